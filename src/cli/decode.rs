//! The decoding flags of `chat`, `run`, `trace record` and `ui-bench`: a preset, then
//! what the flags change. Every default comes from `engine::options`.

use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use serde::de::DeserializeOwned;

use specscope::engine::cost::Pricing;
use specscope::engine::options::{
    Blocks, DecodeOptions, Preset, DEFAULT_BLOCK, DEFAULT_MAX_NEW_TOKENS, DEFAULT_RISK_THRESHOLD,
    DEFAULT_THRESHOLD,
};
use specscope::engine::overlap::RowTable;
use specscope::engine::Mode;

/// A parser for an engine enum from its names (kebab or snake case), with the names
/// listed in `--help`.
pub fn names<T: DeserializeOwned + Clone + Send + Sync + 'static>(
    names: &'static [&'static str],
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(names).try_map(|s: String| {
        // The engine's enums are snake_case or kebab-case in serde: try both spellings.
        let parse = |v: &str| serde_json::from_value::<T>(serde_json::Value::String(v.into()));
        parse(&s.replace('-', "_"))
            .or_else(|_| parse(&s))
            .map_err(|e| format!("{s}: {e}"))
    })
}

pub const MODES: &[&str] = &["ar", "linear", "recguide", "diffusion"];
pub const ROW_TABLES: &[&str] = &[
    "multi",
    "two-plus-new",
    "conditional-rank",
    "no-p3",
    "p1-conditional-new",
    "corrections",
];
pub const PRESETS: &[&str] = &["paper", "throughput"];

#[derive(Debug, Clone, Args)]
pub struct DecodeArgs {
    /// The RecGuide policy: `paper` (B ∈ {8, 16, 32} and branch rows chosen together
    /// at the round's load by the cost profile's prices: drafts every round, the
    /// default) or `throughput` (AR steps and 4-token drafts allowed too; priced by
    /// this machine, a measured regime: drafting or AR steps, whichever delivered more).
    #[arg(long, value_parser = names::<Preset>(PRESETS), default_value = "paper")]
    pub preset: Preset,
    /// ar, linear (LinearSS), recguide, or diffusion (block diffusion: fast, not
    /// lossless; its canvas length is --block).
    #[arg(long, value_parser = names::<Mode>(MODES), default_value = "recguide")]
    pub mode: Mode,
    /// Fixed block size B: LinearSS's, RecGuide's instead of adaptive, and block
    /// diffusion's canvas length L [default: 32].
    #[arg(long)]
    pub block: Option<usize>,
    /// Block diffusion: a masked position is committed once its top probability is at
    /// least this (0 to 1; at least one position per step).
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    pub threshold: f32,
    /// RecGuide with a fixed block size (--block).
    #[arg(long)]
    pub no_adaptive: bool,
    /// Block sizes the adaptive rule chooses from (1 = an AR step) [default: the preset's].
    #[arg(long, value_delimiter = ',')]
    pub adaptive_blocks: Option<Vec<usize>>,
    /// RecGuide without overlap branches.
    #[arg(long)]
    pub no_overlap: bool,
    /// Branch rows only where the cost profile says they pay (the presets' way).
    #[arg(long, conflicts_with = "no_cost_aware")]
    pub cost_aware: bool,
    /// Every branch row the table builds at every load, paying or not (the ablation).
    #[arg(long)]
    pub no_cost_aware: bool,
    /// Margin below which a draft position is risky.
    #[arg(long, default_value_t = DEFAULT_RISK_THRESHOLD, allow_negative_numbers = true)]
    pub risk_threshold: f32,
    /// Which branch rows RecGuide builds beside verification, by how many risky
    /// positions the draft has: correction rows (P1–P3, the draft's next choices at a
    /// risky position) and the continuation row (the block after a full accept); the
    /// tables are described in docs/decisions.md ("Default row table") and src/engine/overlap.rs.
    #[arg(long, value_parser = names::<RowTable>(ROW_TABLES), default_value = "conditional-rank")]
    pub row_table: RowTable,
    /// Sampling temperature (0 = greedy, lossless).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Seed of the sampler (with --temperature above 0).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many new tokens.
    #[arg(long, default_value_t = DEFAULT_MAX_NEW_TOKENS, value_parser = super::count(1, super::MAX_NEW_TOKENS))]
    pub max_new_tokens: usize,
    #[command(flatten)]
    pub cost: CostArgs,
}

/// Where the block policy's prices come from.
#[derive(Debug, Clone, Args)]
pub struct CostArgs {
    /// Prices the block size and the branch rows decide from: `b200-nld8b`,
    /// `h200-nld8b` or `h100-nld8b` (NLD-8B on that GPU, a roofline model with fixed prices: decide as
    /// that GPU would), `cpu` (this CPU's built-in measured profile, refitted from the
    /// run's forwards), or a `specscope profile --json` file [default: the saved
    /// profile, else `b200-nld8b`].
    #[arg(long)]
    pub cost_profile: Option<String>,
}

impl CostArgs {
    pub fn pricing(&self) -> Result<Pricing> {
        let p = Pricing::select(self.cost_profile.as_deref())?;
        if let Some(w) = &p.warning {
            eprintln!("specscope: warning: {w}");
        }
        Ok(p)
    }
}

impl DecodeArgs {
    /// The options these flags ask for: the preset, changed by the flags given.
    pub fn options(&self) -> Result<DecodeOptions> {
        let mut o = self.preset.options();
        o.mode = self.mode;
        let fixed = self.block.unwrap_or(DEFAULT_BLOCK);
        if let Some(set) = &self.adaptive_blocks {
            o.blocks = Blocks::Adaptive(set.clone());
        }
        let fixed_wanted = self.mode != Mode::Recguide || self.no_adaptive || self.block.is_some();
        if fixed_wanted {
            o.blocks = Blocks::Fixed(fixed);
        }
        o.overlap = !self.no_overlap;
        if self.cost_aware {
            o.cost_aware = true;
        }
        if self.no_cost_aware {
            o.cost_aware = false;
        }
        o.risk_threshold = self.risk_threshold;
        o.threshold = self.threshold;
        o.row_table = self.row_table;
        o.sampling.temperature = self.temperature;
        o.sampling.seed = self.seed;
        o.max_new_tokens = self.max_new_tokens;
        o.validate()?;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specscope::bench::sweep::Config;

    /// Every name a flag lists parses to its enum (kebab- and snake-case enums alike).
    #[test]
    fn every_listed_name_parses() {
        fn check<T: DeserializeOwned + Clone + Send + Sync + 'static>(
            list: &'static [&'static str],
        ) {
            let cmd = clap::Command::new("t");
            let p = names::<T>(list);
            for n in list {
                assert!(
                    p.parse_ref(&cmd, None, std::ffi::OsStr::new(n)).is_ok(),
                    "{n} does not parse"
                );
            }
        }
        check::<Mode>(MODES);
        check::<RowTable>(ROW_TABLES);
        check::<Preset>(PRESETS);
        check::<Config>(super::super::bench::CONFIGS);
    }
}
