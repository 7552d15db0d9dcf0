//! `specscope bench`: modes × block sizes × concurrency, side by side in one process.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use clap::Args;

use specscope::bench::acceptance::answer_right;
use specscope::bench::prompts::{fresh_requests_at, requests_at};
use specscope::bench::report::{pass_spread, repeated_prompts, share_table, table};
use specscope::bench::sweep::{configs, run_config, BenchConfig, BenchResult, Config};
use specscope::engine::options::{DecodeOptions, DEFAULT_RISK_THRESHOLD};
use specscope::engine::overlap::RowTable;
use specscope::engine::policy::SurvivalTables;
use specscope::engine::Mode;

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
    ensure!(
        a.concurrency.iter().all(|&c| c > 0),
        "--concurrency values must be at least 1"
    );
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
    let repeats = usize::from(a.repeats);
    let total = cfgs.len() * a.concurrency.len() * repeats;
    let mut results = Vec::new();
    let mut done = 0;
    let mut progress = super::progress::Progress::new("bench", total as u64);
    for &c in &a.concurrency {
        // The simulator has a fresh answer for every request; a checkpoint repeats its prompts.
        let at = if loaded.simulated() {
            fresh_requests_at
        } else {
            requests_at
        };
        let requests = at(&prompts, c, a.requests_per_slot)?;
        // Per configuration: its result and outputs from the first pass.
        let mut at_c: Vec<Option<(BenchResult, Vec<Vec<u32>>)>> = vec![None; cfgs.len()];
        for pass in 0..repeats {
            let order: Vec<usize> = if pass % 2 == 0 {
                (0..cfgs.len()).collect()
            } else {
                (0..cfgs.len()).rev().collect()
            };
            for k in order {
                let cfg = &cfgs[k];
                progress.set(done as u64, &format!("{} C={c}", cfg.name));
                let (r, out) = run_config(&loaded.model, &requests, cfg, c, &tables, &pricing)
                    .with_context(|| format!("{} at C={c}", cfg.name))?;
                if !loaded.simulated() {
                    same_as_originals(&out, prompts.len(), cfg, c)?;
                }
                match &mut at_c[k] {
                    None => at_c[k] = Some((r, out)),
                    Some((first, first_out)) => {
                        ensure!(
                            *first_out == out,
                            "{} at C={c}: pass {} decoded different tokens than pass 1",
                            cfg.name,
                            pass + 1
                        );
                        first.add_repeat(&r, pass);
                    }
                }
                done += 1;
            }
        }
        let ar_out = cfgs
            .iter()
            .zip(&at_c)
            .find(|(cfg, _)| cfg.options.mode == Mode::Ar)
            .and_then(|(_, r)| r.as_ref().map(|(_, out)| out.clone()));
        for (mut r, out) in at_c.into_iter().flatten() {
            r.identical_to_ar = ar_out.as_ref().map(|want| *want == out);
            // The answers as text: the checks `eval` makes (the math answer line, or
            // the expected string).
            for (p, tokens) in requests.iter().zip(&out) {
                let text = loaded.tokenizer.decode(tokens)?;
                // A simulated answer is stand-in text: nothing to check.
                if let Some(right) = answer_right(p, &text).filter(|_| !loaded.simulated()) {
                    r.answers_checked += 1;
                    r.answers_right += usize::from(right);
                }
            }
            results.push(r);
        }
    }
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

/// A repeated prompt (`--requests-per-slot`) is the same request again: greedy, it
/// decodes its original's tokens whatever the load, or the figures would count
/// something else.
fn same_as_originals(out: &[Vec<u32>], prompts: usize, cfg: &BenchConfig, c: usize) -> Result<()> {
    if cfg.options.sampling.temperature > 0.0 {
        return Ok(());
    }
    if let Some(i) = (prompts..out.len()).find(|&i| out[i] != out[i % prompts]) {
        anyhow::bail!(
            "{} at C={c}: request {} (prompt {} again) decoded other tokens than its first run",
            cfg.name,
            i + 1,
            i % prompts + 1
        );
    }
    Ok(())
}
