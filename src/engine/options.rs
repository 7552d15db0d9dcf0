//! How a request is decoded: the one options type. The command line parses into it,
//! recordings store it, the screen shows and changes it, bench sweeps over it. Every
//! default is written here once; the presets name the two policies users choose
//! between. What bench's ablations turn off is not an option (`super::ablation`).

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::ablation::Ablation;
pub use super::events::Blocks;
use super::events::Mode;
use super::signals::Sampling;

/// The reference's action space for the adaptive block size (the paper's RecGuide).
pub const REFERENCE_BLOCKS: [usize; 3] = [8, 16, 32];
/// The throughput preset's: the reference's plus 4 and 1 (an AR step, no draft).
pub const THROUGHPUT_BLOCKS: [usize; 5] = [1, 4, 8, 16, 32];
/// The fixed block size when none is given (the reference's).
pub const DEFAULT_BLOCK: usize = 32;
/// Largest block size accepted: larger drafts never survive whole, and a block is one
/// forward's query length.
pub const MAX_BLOCK: usize = 256;
/// Draft positions with a margin p1 − p2 below this are risky (the reference's).
pub const DEFAULT_RISK_THRESHOLD: f32 = 0.5;
pub const DEFAULT_MAX_NEW_TOKENS: usize = 256;
/// Block diffusion commits a masked position once its top probability reaches this
/// (the reference's and vLLM's default).
pub const DEFAULT_THRESHOLD: f32 = 0.9;

/// The two policies users choose between (`--preset`'s names and help come from the
/// variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The paper's RecGuide: B ∈ {8, 16, 32} and the branch rows chosen together by
    /// the cost profile's prices at the round's load (rows ride where they pay, blocks
    /// shrink as forwards turn compute-bound). Drafts every round on any machine.
    #[default]
    Paper,
    /// Tokens per second on the machine at hand: AR steps and 4-token drafts allowed,
    /// a measured regime (drafting or AR steps, whichever delivered more), branch rows
    /// only where the cost profile says they pay. 4-token drafts and AR steps are
    /// offered only where the forward is compute-bound at them: on a CPU it mostly
    /// takes AR steps from two requests on; under GPU prices, below a load of tens
    /// of requests, it decides as the paper preset does.
    Throughput,
}

impl Preset {
    /// The options this preset decodes with (RecGuide).
    pub fn options(self) -> DecodeOptions {
        let paper = DecodeOptions {
            mode: Mode::Recguide,
            blocks: Blocks::Adaptive(REFERENCE_BLOCKS.to_vec()),
            overlap: true,
            risk_threshold: DEFAULT_RISK_THRESHOLD,
            threshold: DEFAULT_THRESHOLD,
            sampling: Sampling::default(),
            max_new_tokens: DEFAULT_MAX_NEW_TOKENS,
        };
        match self {
            Preset::Paper => paper,
            Preset::Throughput => DecodeOptions {
                blocks: Blocks::Adaptive(THROUGHPUT_BLOCKS.to_vec()),
                ..paper
            },
        }
    }
}

/// How a round's requests share forwards (a scheduler setting, one per run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// Rows of every request packed side by side in one forward per phase (the forward
    /// takes ragged rows, so nothing is padded), and a fresh draft rides the shared
    /// forward: while some request verifies a block it already holds (a branch's), the
    /// others' draft rows go into that forward and are verified in the next, so no
    /// forward runs for drafts alone (beyond the paper; docs/decisions.md, "A draft
    /// rides the shared forward").
    #[default]
    Packed,
    /// Packed, but every round drafts then verifies in step: a fresh draft takes the
    /// round's draft forward even when others verify held blocks (the ablation).
    Lockstep,
    /// The reference's buckets: one forward per phase for each planned block size.
    ByBlock,
}

impl Batching {
    /// Requests share one forward per phase (the adaptive requests choose together).
    pub fn packs(self) -> bool {
        self != Batching::ByBlock
    }
}

/// How one request is decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeOptions {
    pub mode: Mode,
    /// The block size rule (LinearSS: fixed; RecGuide: fixed or adaptive; AR: unused).
    pub blocks: Blocks,
    /// RecGuide: fuse correction/continuation branches with verification.
    pub overlap: bool,
    /// A draft position is risky when its margin p1 − p2 is below this.
    pub risk_threshold: f32,
    /// Block diffusion: a masked position is committed once its top probability is at
    /// least this (at least one position per step whatever it is).
    #[serde(default = "default_threshold")]
    pub threshold: f32,
    pub sampling: Sampling,
    pub max_new_tokens: usize,
}

fn default_threshold() -> f32 {
    DEFAULT_THRESHOLD
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Preset::default().options()
    }
}

impl DecodeOptions {
    pub fn validate(&self) -> Result<()> {
        let sizes: Vec<usize> = match &self.blocks {
            Blocks::Fixed(b) => vec![*b],
            Blocks::Adaptive(set) => {
                ensure!(
                    !set.is_empty(),
                    "the adaptive block sizes are an empty list"
                );
                ensure!(
                    !matches!(self.mode, Mode::Linear | Mode::Diffusion),
                    "{} uses a fixed block size; adaptive sizes are RecGuide's",
                    if self.mode == Mode::Linear {
                        "LinearSS"
                    } else {
                        "block diffusion"
                    }
                );
                set.clone()
            }
        };
        for b in sizes {
            ensure!(
                (1..=MAX_BLOCK).contains(&b),
                "block size {b} is out of range: sizes go from 1 to {MAX_BLOCK}"
            );
            // A canvas of one position is an AR step without the AR.
            ensure!(
                self.mode != Mode::Diffusion || b >= 2,
                "a block diffusion canvas is at least 2 positions long (got {b})"
            );
        }
        ensure!(
            self.max_new_tokens >= 1,
            "max_new_tokens must be at least 1"
        );
        ensure!(
            self.risk_threshold.is_finite() && (0.0..=1.0).contains(&self.risk_threshold),
            "risk threshold must be in [0, 1] (got {})",
            self.risk_threshold
        );
        ensure!(
            self.threshold.is_finite() && (0.0..=1.0).contains(&self.threshold),
            "the diffusion threshold must be in [0, 1] (got {})",
            self.threshold
        );
        ensure!(
            self.sampling.temperature >= 0.0 && self.sampling.temperature.is_finite(),
            "temperature must be a non-negative number (got {})",
            self.sampling.temperature
        );
        Ok(())
    }

    /// The block rule in force: AR is a fixed block of 1 (its one home).
    pub fn block_policy(&self) -> Blocks {
        match self.mode {
            Mode::Ar => Blocks::Fixed(1),
            _ => self.blocks.clone(),
        }
    }

    /// The fixed block size, when the rule is fixed.
    pub fn fixed_block(&self) -> Option<usize> {
        match self.block_policy() {
            Blocks::Fixed(b) => Some(b),
            Blocks::Adaptive(_) => None,
        }
    }

    /// The adaptive action space, when the rule is adaptive.
    pub fn adaptive_blocks(&self) -> Option<&[usize]> {
        match (&self.blocks, self.mode) {
            (Blocks::Adaptive(set), Mode::Recguide) => Some(set),
            _ => None,
        }
    }

    /// Overlap branches are built: only RecGuide has them (their one home).
    pub fn overlap_on(&self) -> bool {
        self.mode == Mode::Recguide && self.overlap
    }

    /// The preset these options are, if they are one (`max_new_tokens` and sampling
    /// aside).
    pub fn preset(&self) -> Option<Preset> {
        <Preset as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .find(|p| {
                let o = p.options();
                o.mode == self.mode
                    && o.blocks == self.blocks
                    && o.overlap == self.overlap
                    && o.risk_threshold == self.risk_threshold
            })
    }

    /// `RecGuide adaptive {8,16,32} +overlap`, `LinearSS fixed 16`, `AR`: the one label
    /// of a configuration, everywhere.
    pub fn label(&self) -> String {
        match self.mode {
            Mode::Ar => "AR".into(),
            Mode::Linear => format!("LinearSS {}", self.block_policy()),
            Mode::Diffusion => format!(
                "Diffusion L={} τ={}",
                self.fixed_block().unwrap_or(DEFAULT_BLOCK),
                self.threshold
            ),
            Mode::Recguide => Ablation::SHIPPED.label(self),
        }
    }

    /// F2: AR → LinearSS → RecGuide → diffusion → AR. LinearSS and diffusion take
    /// the fixed size of `base` (or the last fixed one); RecGuide returns to `base`'s
    /// block rule.
    pub fn cycle_mode(&mut self, base: &DecodeOptions) {
        match self.mode {
            Mode::Ar => {
                self.mode = Mode::Linear;
                self.blocks = Blocks::Fixed(self.last_fixed(base).max(2));
            }
            Mode::Linear => {
                self.mode = Mode::Recguide;
                self.blocks = base.blocks.clone();
            }
            Mode::Recguide => {
                self.mode = Mode::Diffusion;
                self.blocks = Blocks::Fixed(self.last_fixed(base).max(2));
            }
            Mode::Diffusion => self.mode = Mode::Ar,
        }
    }

    /// F3/F4: the next smaller or larger fixed size of `steps` (adaptive off). Returns
    /// false when already at the end.
    pub fn step_block(&mut self, base: &DecodeOptions, steps: &[usize], larger: bool) -> bool {
        // A diffusion canvas is at least two positions long: its sizes are the rest.
        let canvas: Vec<usize> = steps.iter().copied().filter(|&b| b >= 2).collect();
        let steps = if self.mode == Mode::Diffusion && !canvas.is_empty() {
            &canvas[..]
        } else {
            steps
        };
        let cur = match self.block_policy() {
            Blocks::Fixed(b) => b,
            Blocks::Adaptive(_) => self.last_fixed(base),
        };
        let i = steps
            .iter()
            .position(|b| *b >= cur)
            .unwrap_or(steps.len() - 1);
        let j = if larger {
            (i + 1).min(steps.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        let moved = steps[j] != cur || matches!(self.blocks, Blocks::Adaptive(_));
        let b = steps[j];
        self.blocks = Blocks::Fixed(b);
        match (self.mode, b) {
            (Mode::Ar, b) if b > 1 => self.mode = Mode::Linear,
            (Mode::Linear, 1) => self.mode = Mode::Ar,
            _ => {}
        }

        moved
    }

    /// F7: RecGuide's adaptive block size on or off.
    pub fn toggle_adaptive(&mut self, base: &DecodeOptions) {
        self.mode = Mode::Recguide;
        self.blocks = match &self.blocks {
            Blocks::Adaptive(_) => Blocks::Fixed(self.last_fixed(base)),
            Blocks::Fixed(_) => match &base.blocks {
                Blocks::Adaptive(set) => Blocks::Adaptive(set.clone()),
                Blocks::Fixed(_) => Blocks::Adaptive(REFERENCE_BLOCKS.to_vec()),
            },
        };
    }

    /// F8: RecGuide's overlap branches on or off (priced as before: the round pane
    /// says which rows ride and why). From AR or LinearSS, whose flag is kept but not
    /// in force, it turns them on.
    pub fn toggle_overlap(&mut self) {
        let on = !self.overlap_on();
        self.mode = Mode::Recguide;
        self.overlap = on;
    }

    fn last_fixed(&self, base: &DecodeOptions) -> usize {
        match (&self.blocks, &base.blocks) {
            (Blocks::Fixed(b), _) | (_, Blocks::Fixed(b)) if *b > 1 => *b,
            _ => DEFAULT_BLOCK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_key_turns_branches_on_from_other_modes() {
        let mut o = DecodeOptions::default();
        o.cycle_mode(&DecodeOptions::default()); // RecGuide → diffusion, the flag kept
        assert!(o.overlap && !o.overlap_on());
        o.toggle_overlap();
        assert!(o.overlap_on(), "{}", o.label());
        o.toggle_overlap();
        assert_eq!((o.mode, o.overlap), (Mode::Recguide, false));
    }

    #[test]
    fn presets_and_labels() {
        let paper = DecodeOptions::default();
        assert_eq!(paper.preset(), Some(Preset::Paper));
        assert_eq!(paper.label(), "RecGuide adaptive {8,16,32} +overlap");
        let t = Preset::Throughput.options();
        assert_eq!(t.label(), "RecGuide adaptive {1,4,8,16,32} +overlap");
        let ar = DecodeOptions {
            mode: Mode::Ar,
            ..paper.clone()
        };
        assert_eq!(
            (ar.label(), ar.block_policy()),
            ("AR".into(), Blocks::Fixed(1))
        );
        assert!(!ar.overlap_on(), "overlap is RecGuide's");
        let lin = DecodeOptions {
            mode: Mode::Linear,
            blocks: Blocks::Fixed(16),
            ..paper
        };
        assert_eq!(lin.label(), "LinearSS fixed 16");
        assert_eq!(lin.preset(), None);
    }

    #[test]
    fn validation_names_the_problem() {
        let bad = |o: DecodeOptions| o.validate().unwrap_err().to_string();
        let base = DecodeOptions::default();
        assert!(bad(DecodeOptions {
            blocks: Blocks::Fixed(0),
            ..base.clone()
        })
        .contains("block size 0"));
        assert!(bad(DecodeOptions {
            blocks: Blocks::Adaptive(vec![8, 1_000_000]),
            ..base.clone()
        })
        .contains("1000000"));
        assert!(bad(DecodeOptions {
            mode: Mode::Linear,
            ..base.clone()
        })
        .contains("LinearSS"));
        assert!(bad(DecodeOptions {
            risk_threshold: -1.0,
            ..base.clone()
        })
        .contains("risk threshold"));
        assert!(bad(DecodeOptions {
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(1),
            ..base.clone()
        })
        .contains("at least 2"));
        assert!(bad(DecodeOptions {
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(16),
            threshold: 1.5,
            ..base.clone()
        })
        .contains("diffusion threshold"));
        // F3 on a diffusion canvas stops at the smallest canvas, not at an AR step.
        let mut d = DecodeOptions {
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(4),
            ..base
        };
        assert!(!d.step_block(&DecodeOptions::default(), &[1, 4, 8, 16, 32], false));
        assert_eq!((d.mode, d.blocks), (Mode::Diffusion, Blocks::Fixed(4)));
    }

    #[test]
    fn old_and_typed_block_policies_read() {
        let read = |s: &str| serde_json::from_str::<Blocks>(s).unwrap();
        assert_eq!(read("\"fixed:16\""), Blocks::Fixed(16));
        assert_eq!(read(r#"{"fixed":8}"#), Blocks::Fixed(8));
        assert_eq!(
            read(r#"{"adaptive":[8,16,32]}"#),
            Blocks::Adaptive(vec![8, 16, 32])
        );
        assert!(serde_json::from_str::<Blocks>("\"fixed:x\"").is_err());
        let o = DecodeOptions::default();
        let back: DecodeOptions =
            serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn keys_change_options_and_come_back() {
        let base = DecodeOptions::default();
        let mut o = base.clone();
        // F2 cycles back to the starting setup: RecGuide → diffusion → AR → LinearSS.
        o.cycle_mode(&base);
        assert_eq!(
            (o.mode, o.label()),
            (Mode::Diffusion, "Diffusion L=32 τ=0.9".to_string())
        );
        o.cycle_mode(&base);
        assert_eq!(o.mode, Mode::Ar);
        o.cycle_mode(&base);
        assert_eq!(
            (o.mode, o.blocks.clone()),
            (Mode::Linear, Blocks::Fixed(32))
        );
        o.cycle_mode(&base);
        assert_eq!(o, base);
        // F4 at the largest: nothing moves.
        let steps = [1, 4, 8, 16, 32];
        let mut f = o.clone();
        assert!(f.step_block(&base, &steps, false));
        assert_eq!(f.blocks, Blocks::Fixed(16));
        assert!(f.step_block(&base, &steps, true));
        assert!(!f.step_block(&base, &steps, true), "already at 32");
        // F7 off and on again.
        f.toggle_adaptive(&base);
        assert_eq!(f.blocks, base.blocks);
        f.toggle_adaptive(&base);
        assert_eq!(f.blocks, Blocks::Fixed(32));
        // LinearSS down to 1 is AR.
        let mut l = DecodeOptions {
            mode: Mode::Linear,
            blocks: Blocks::Fixed(4),
            ..base.clone()
        };
        l.step_block(&base, &steps, false);
        assert_eq!(l.mode, Mode::Ar);
    }
}
