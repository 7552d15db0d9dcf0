//! The decoding flags of `chat`, `run`, `trace record` and `ui-bench`: a preset, then
//! what the flags change. Every default comes from `engine::options`.

use anyhow::Result;
use std::ffi::OsStr;

use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::{Args, ValueEnum};

use specscope::engine::cost::Pricing;
use specscope::engine::options::{
    Blocks, DecodeOptions, Preset, DEFAULT_BLOCK, DEFAULT_MAX_NEW_TOKENS, DEFAULT_RISK_THRESHOLD,
    DEFAULT_THRESHOLD,
};
use specscope::engine::Mode;

/// The parser of an engine enum's flag: the names clap derives from its variants
/// (kebab-case, listed with their help in `--help`), snake_case accepted too as
/// recordings and labels spell them (`two_plus_new`).
#[derive(Clone)]
pub struct Variants<T: ValueEnum + Clone + Send + Sync + 'static>(EnumValueParser<T>);

pub fn variants<T: ValueEnum + Clone + Send + Sync + 'static>() -> Variants<T> {
    Variants(EnumValueParser::new())
}

impl<T: ValueEnum + Clone + Send + Sync + 'static> TypedValueParser for Variants<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let kebab = value.to_str().map(|s| s.replace('_', "-"));
        let value = kebab.as_deref().map_or(value, OsStr::new);
        self.0.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        self.0.possible_values()
    }
}

#[derive(Debug, Clone, Args)]
pub struct DecodeArgs {
    /// The RecGuide policy (the flags below change what it sets).
    #[arg(long, value_parser = variants::<Preset>(), default_value = "paper")]
    pub preset: Preset,
    /// The decoding mode (diffusion's canvas length is --block).
    #[arg(long, value_parser = variants::<Mode>(), default_value = "recguide")]
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
    /// Margin below which a draft position is risky.
    #[arg(long, default_value_t = DEFAULT_RISK_THRESHOLD, allow_negative_numbers = true)]
    pub risk_threshold: f32,
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
    /// that GPU would), `b200-nld8b-measured` (NLD-8B on a B200 priced by the paper's
    /// measured sweep, the roofline beyond it; fixed prices), `cpu` (this CPU's built-in
    /// measured profile, refitted from the run's forwards), or a `specscope profile
    /// --json` file [default: the saved profile, else `b200-nld8b`].
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
        if fixed_wanted && self.adaptive_blocks.is_some() {
            let why = if self.mode == Mode::Ar {
                "--mode ar decodes one token per forward".to_string()
            } else if self.mode != Mode::Recguide {
                format!(
                    "--mode {} decodes fixed blocks",
                    format!("{:?}", self.mode).to_lowercase()
                )
            } else if self.no_adaptive {
                "--no-adaptive fixes the block".to_string()
            } else {
                "--block fixes the block".to_string()
            };
            anyhow::bail!(
                "--adaptive-blocks sets the sizes RecGuide's adaptive rule chooses from, and {why}: drop one of them"
            );
        }
        if fixed_wanted {
            o.blocks = Blocks::Fixed(fixed);
        }
        o.overlap = !self.no_overlap;
        o.risk_threshold = self.risk_threshold;
        o.threshold = self.threshold;
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
    use specscope::engine::overlap::RowTable;

    /// Every variant parses from its kebab name and its snake_case one, and the
    /// snake_case one is serde's (what recordings and bench JSON write).
    #[test]
    fn every_variant_parses_in_both_spellings() {
        fn check<
            T: ValueEnum
                + serde::Serialize
                + Clone
                + Send
                + Sync
                + PartialEq
                + std::fmt::Debug
                + 'static,
        >() {
            let cmd = clap::Command::new("t");
            let p = variants::<T>();
            for v in T::value_variants() {
                let kebab = v.to_possible_value().unwrap().get_name().to_string();
                let snake = kebab.replace('-', "_");
                for n in [&kebab, &snake] {
                    let got = p.parse_ref(&cmd, None, OsStr::new(n)).unwrap();
                    assert_eq!(&got, v, "{n}");
                }
                let serde = serde_json::to_value(v).unwrap();
                let serde = serde.as_str().unwrap().replace('-', "_");
                assert_eq!(serde, snake, "serde and clap name {v:?} alike");
            }
            assert!(p.parse_ref(&cmd, None, OsStr::new("nonsense")).is_err());
        }
        check::<Mode>();
        check::<RowTable>();
        check::<Preset>();
        check::<Config>();
    }
}
