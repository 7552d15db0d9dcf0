//! `specscope bench`: modes × block sizes × concurrency, side by side in one process.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use specscope::bench::report::{pass_spread, repeated_prompts, share_table, table};
use specscope::bench::run::Bench;
use specscope::bench::sweep::{configs, BenchResult, Config};
use specscope::engine::options::{DecodeOptions, DEFAULT_RISK_THRESHOLD};
use specscope::engine::overlap::RowTable;
use specscope::engine::policy::SurvivalTables;

use super::decode::variants;
use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: super::PromptFileArgs,
    /// Configurations to run, comma-separated (`--help` says what each one is).
    #[arg(
        long,
        alias = "modes",
        value_delimiter = ',',
        value_parser = variants::<Config>(),
        default_value = "ar,linear,recguide"
    )]
    pub configs: Vec<Config>,
    /// Block sizes for linear, recguide-fixed and diffusion (2 to 256).
    #[arg(long, value_delimiter = ',', default_value = "8,16,32", value_parser = super::count(2, 256))]
    pub blocks: Vec<usize>,
    /// Branch row tables for the RecGuide configurations (each runs once per table).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = variants::<RowTable>(),
        default_value = "conditional-rank"
    )]
    pub row_tables: Vec<RowTable>,
    /// Margin below which a draft position is risky.
    #[arg(long, default_value_t = DEFAULT_RISK_THRESHOLD, allow_negative_numbers = true)]
    pub risk_threshold: f32,
    /// Block diffusion's confidence thresholds τ (comma-separated, each 0 to 1).
    #[arg(long, value_delimiter = ',', default_value = "0.9,0.7,0.5")]
    pub thresholds: Vec<f32>,
    /// Requests in flight (1 to 1024; the paper's loads are 1,2,4,8,16,32,64,128).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", value_parser = super::count(1, 1024))]
    pub concurrency: Vec<usize>,
    /// Each load runs at least this many requests per slot (this × --concurrency),
    /// running the prompt list whole again, in order, when it has fewer; a repeat
    /// decodes the same tokens and counts again. 0 runs each prompt once (a closed
    /// batch where the list is no longer than the load; the list again up to the load
    /// where it is shorter).
    #[arg(long, default_value_t = 2, value_parser = super::count(0, 64))]
    pub requests_per_slot: usize,
    /// Tokens to decode per prompt.
    #[arg(long, default_value_t = 128, value_parser = super::count(1, super::MAX_NEW_TOKENS))]
    pub max_new_tokens: usize,
    /// Timed runs of every configuration, interleaved (configurations in turn, the
    /// order reversed on every other pass) so the machine's drift hits all alike;
    /// tokens/s is over all runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub repeats: u16,
    /// Survival tables for the adaptive block size (default: built-in).
    #[arg(long)]
    pub tables: Option<PathBuf>,
    #[command(flatten)]
    pub cost: super::decode::CostArgs,
    /// Also write every result as JSON (an existing file only with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Replace the output file(s) if they exist (without it an existing file is kept
    /// and the command refuses).
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let base = DecodeOptions {
        max_new_tokens: a.max_new_tokens,
        risk_threshold: a.risk_threshold,
        ..DecodeOptions::default()
    };
    base.validate()?;
    let cfgs = configs(&a.configs, &a.blocks, &a.row_tables, &a.thresholds, &base)?;
    let records = a.prompts.records()?;
    let loaded = a.model.load()?;
    if let Some(out) = &a.json {
        let mut inputs = a.prompts.files_or(&super::DEFAULT_FAMILIES);
        inputs.extend(loaded.files.inputs());
        inputs.extend(a.tables.iter().cloned());
        inputs.extend(a.cost.cost_profile.iter().map(PathBuf::from));
        specscope::output::claim(out, "--json", a.force, &inputs)?;
    }
    let prompts = a.prompts.encode(&records, &loaded)?;
    let tables = match &a.tables {
        Some(p) => SurvivalTables::from_file(p)?,
        None => loaded.survival_tables(),
    };
    let pricing = a.cost.pricing()?;
    eprintln!(
        "bench: {} on {} prompts, {} configurations x {:?}; cost profile: {}; survival tables: {}",
        loaded.files.label,
        prompts.len(),
        cfgs.len(),
        a.concurrency,
        pricing.describe(),
        tables.source
    );
    let bench = Bench {
        model: &loaded.model,
        tokenizer: &loaded.tokenizer,
        prompts: &prompts,
        simulated: loaded.simulated(),
        tables: &tables,
        pricing: &pricing,
        requests_per_slot: a.requests_per_slot,
        repeats: usize::from(a.repeats),
    };
    let total = cfgs.len() * a.concurrency.len() * bench.repeats;
    let mut progress = super::progress::Progress::new("bench", total as u64);
    let results = bench.run(&cfgs, &a.concurrency, |done, what| {
        progress.set(done as u64, what);
    })?;
    progress.finish("done");
    print_tables(
        &loaded,
        &results,
        &pricing,
        prompts.len(),
        a.requests_per_slot,
    )?;
    if let Some(path) = &a.json {
        write_json(
            path,
            &a,
            &loaded,
            results,
            &pricing,
            &tables.source,
            prompts.len(),
        )?;
    }
    Ok(())
}

/// `--json`: every result with what produced it.
fn write_json(
    path: &std::path::Path,
    a: &BenchArgs,
    loaded: &super::Loaded,
    results: Vec<BenchResult>,
    pricing: &specscope::engine::cost::Pricing,
    tables: &str,
    prompts: usize,
) -> Result<()> {
    let out = specscope::files::BenchDoc {
        format: specscope::files::BenchDoc::FORMAT.to_string(),
        format_version: Some(specscope::files::BENCH_VERSION),
        model: loaded.files.label.clone(),
        acceptance: loaded.acceptance().to_string(),
        prompts,
        requests_per_slot: a.requests_per_slot,
        max_new_tokens: a.max_new_tokens,
        repeats: a.repeats,
        cost_profile: Some(pricing.cost.clone()),
        cost_profile_fixed: !pricing.learn,
        survival_tables: tables.to_string(),
        provenance: Some(specscope::Provenance::here()),
        results,
    };
    specscope::output::write_whole(path, &serde_json::to_string_pretty(&out)?)?;
    Ok(())
}

/// The bench's tables on standard output: the results, what the prices and the
/// requests were.
fn print_tables(
    loaded: &super::Loaded,
    results: &[BenchResult],
    pricing: &specscope::engine::cost::Pricing,
    prompts: usize,
    requests_per_slot: usize,
) -> Result<()> {
    if loaded.simulated() {
        outln!(
            "{}: every acceptance figure below is simulated, not measured",
            loaded.files.label
        );
    }
    out!("{}", table(results));
    outln!(
        "mod = modeled, not measured: each decode forward priced by the cost profile ({})",
        pricing.cost.source
    );
    if loaded.simulated() {
        outln!(
            "requests: every one a fresh simulated answer (the prompt list again with a pass marker, --requests-per-slot {})",
            requests_per_slot
        );
    } else {
        out!("{}", repeated_prompts(results, prompts, requests_per_slot));
    }
    out!("{}", share_table(results));
    out!("{}", pass_spread(results));
    Ok(())
}
