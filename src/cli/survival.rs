//! `specscope survival`: rebuild the adaptive block size's survival tables for a model.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use specscope::engine::policy::SurvivalTables;
use specscope::engine::survival;

use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct SurvivalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: super::PromptFileArgs,
    /// Tokens to decode per prompt while collecting rounds.
    #[arg(long, default_value_t = 256, value_parser = super::count(1, super::MAX_NEW_TOKENS))]
    pub max_new_tokens: usize,
    /// Signal bins (1 to 64: each bin needs rounds of its own).
    #[arg(long, default_value_t = 8, value_parser = super::count(1, 64))]
    pub bins: usize,
    /// Rounds a (previous B, full) stratum needs before it gets its own curves.
    #[arg(long, default_value_t = 60)]
    pub min_stratum: usize,
    /// Block sizes to tabulate; 1 adds AR steps to the rounds that advance (B = 1 needs
    /// no table, but the rounds after one get their own stratum).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16,32", value_parser = super::count(1, 256))]
    pub blocks: Vec<usize>,
    /// Where to write the tables (a file that exists, the shipped
    /// assets/survival_tables.json included, only with --force).
    #[arg(long, default_value = "survival_tables.json")]
    pub out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: SurvivalArgs) -> Result<()> {
    let records = a.prompts.records()?;
    let loaded = a.model.load()?;
    let mut inputs = a.prompts.files_or(&super::DEFAULT_FAMILIES);
    inputs.extend(loaded.files.inputs());
    specscope::output::claim(&a.out, "--out", a.force, &inputs)?;
    let prompts = a.prompts.encode(&records, &loaded)?;
    let mut samples = Vec::new();
    let mut progress = super::progress::Progress::new("survival", prompts.len() as u64);
    for (i, p) in prompts.iter().enumerate() {
        progress.set(i as u64, &format!("{} rounds", samples.len()));
        samples.extend(survival::collect(
            loaded.model.as_ref(),
            &p.tokens,
            a.max_new_tokens,
            i as u64,
            &a.blocks,
        )?);
    }
    progress.finish(&format!("{} rounds", samples.len()));
    let source = format!(
        "{} ({} prompts, {} rounds)",
        loaded.files.label,
        prompts.len(),
        samples.len()
    );
    let tables = SurvivalTables::estimate(&samples, a.bins, a.min_stratum, &source);
    specscope::output::write_whole(&a.out, &serde_json::to_string_pretty(&tables)?)?;
    for &b in a.blocks.iter().filter(|&&b| b >= 2) {
        eprintln!("V_{b} marginal: {:.2}", tables.value(b, None, None));
    }
    eprintln!("wrote {} ({} strata)", a.out.display(), tables.strata.len());
    Ok(())
}
