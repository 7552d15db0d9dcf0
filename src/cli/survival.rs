//! `specscope survival`: rebuild the adaptive block size's survival tables for a model.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use specscope::bench::prompts::{encode, read_prompt_file};
use specscope::engine::adaptive::SurvivalTables;
use specscope::engine::survival;

use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct SurvivalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// JSONL prompt files (default: the bundled held-out sets).
    #[arg(long, value_delimiter = ',')]
    pub prompts: Vec<PathBuf>,
    /// Prompts per family.
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Signal bins.
    #[arg(long, default_value_t = 8)]
    pub bins: usize,
    /// Rounds a (previous B, full) stratum needs before it gets its own curves.
    #[arg(long, default_value_t = 60)]
    pub min_stratum: usize,
    /// Where to write the tables.
    #[arg(long, default_value = "assets/survival_tables.json")]
    pub out: PathBuf,
}

pub fn run(a: SurvivalArgs) -> Result<()> {
    let files = if a.prompts.is_empty() {
        let dir = specscope::model::source::bundled_dir()
            .parent()
            .map(|p| p.join("prompts"))
            .unwrap_or_default();
        ["math", "code", "qa"]
            .iter()
            .map(|f| dir.join(format!("{f}.jsonl")))
            .collect()
    } else {
        a.prompts.clone()
    };
    let mut records = Vec::new();
    for f in &files {
        records.extend(read_prompt_file(f)?);
    }
    let loaded = a.model.load()?;
    let prompts = encode(&records, &loaded.tokenizer, a.limit)?;
    let mut samples = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        eprint!("\r[{}/{}] {} rounds", i + 1, prompts.len(), samples.len());
        samples.extend(survival::collect(
            &loaded.model,
            &p.tokens,
            a.max_new_tokens,
            i as u64,
        )?);
    }
    eprintln!();
    let source = format!(
        "{} ({} prompts, {} rounds)",
        loaded.files.label,
        prompts.len(),
        samples.len()
    );
    let tables = SurvivalTables::estimate(&samples, a.bins, a.min_stratum, &source);
    std::fs::write(&a.out, serde_json::to_string_pretty(&tables)?)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    for b in [8, 16, 32] {
        eprintln!("V_{b} marginal: {:.2}", tables.value(b, None, None));
    }
    eprintln!("wrote {} ({} strata)", a.out.display(), tables.strata.len());
    Ok(())
}
