//! The ablations: switches that turn one part of RecGuide off to measure what it buys.
//! They are not decoding options: chat, run, recordings and the screen decode with the
//! shipped policy, and only `bench` builds a scheduler with another [`Ablation`]
//! (`Scheduler::with_ablation`; the way requests share forwards, [`super::Batching`],
//! is the other such setting).

use serde::{Deserialize, Serialize};

use super::events::{Blocks, Mode};
use super::options::{DecodeOptions, Preset};
use super::overlap::RowTable;

/// What the shipped policy does (the default) or the part an ablation turns off.
/// Serialized with its fields beside the decoding options' (bench results and
/// recordings made before the split keep them in `options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ablation {
    /// Branch rows ride only where the cost profile says they pay (off: every row the
    /// row table asks for, the all-rows ablation).
    pub cost_aware: bool,
    /// Which branch rows a draft's risky positions ask for.
    pub row_table: RowTable,
    /// The adaptive block size reads the previous round's outcome (its block size, and
    /// whether it was accepted whole) beside the verifier's entropy (off: the entropy
    /// alone).
    pub outcome_signal: bool,
}

impl Default for Ablation {
    fn default() -> Self {
        Self::SHIPPED
    }
}

impl Ablation {
    /// Nothing turned off: what users decode with.
    pub const SHIPPED: Ablation = Ablation {
        cost_aware: true,
        row_table: RowTable::ConditionalRank,
        outcome_signal: true,
    };

    /// Every branch row the row table asks for rides, priced or not (the all-rows
    /// ablation).
    pub const EVERY_ROW: Ablation = Ablation {
        cost_aware: false,
        ..Self::SHIPPED
    };

    pub fn is_shipped(&self) -> bool {
        *self == Self::SHIPPED
    }

    /// Branch rows of a request decoding with `o` are gated by the cost profile.
    pub fn prices_rows(&self, o: &DecodeOptions) -> bool {
        o.overlap_on() && self.cost_aware
    }

    /// `o`'s label with what this ablation turned off: `RecGuide adaptive {8,16,32}
    /// (entropy only) +overlap (every row)`; the label alone when nothing is.
    pub fn label(&self, o: &DecodeOptions) -> String {
        if o.mode != Mode::Recguide {
            return o.label();
        }
        let mut s = format!("RecGuide {}", o.blocks);
        if !self.outcome_signal && matches!(o.blocks, Blocks::Adaptive(_)) {
            s.push_str(" (entropy only)");
        }
        if o.overlap {
            s.push_str(" +overlap");
            if !self.cost_aware {
                s.push_str(" (every row)");
            }
            if self.row_table != Self::SHIPPED.row_table {
                s.push_str(&format!(" ({} rows)", self.row_table.name()));
            }
        }
        s
    }
}

/// What a configuration decodes with: a request's options and what of RecGuide the
/// scheduler turns off (a bench configuration's, a recording's). Stored as one
/// `options` object, the ablation's fields beside the options' (the layout of files
/// written before the two were split); read as the options it derefs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigOptions {
    #[serde(flatten)]
    pub decode: DecodeOptions,
    #[serde(flatten)]
    pub ablation: Ablation,
}

impl std::ops::Deref for ConfigOptions {
    type Target = DecodeOptions;

    fn deref(&self) -> &DecodeOptions {
        &self.decode
    }
}

impl ConfigOptions {
    /// `decode` as users decode it (no ablation).
    pub fn shipped(decode: DecodeOptions) -> Self {
        Self {
            decode,
            ablation: Ablation::SHIPPED,
        }
    }

    /// The configuration's label, with what its ablation turns off.
    pub fn label(&self) -> String {
        self.ablation.label(&self.decode)
    }

    /// The preset these options are: none where something is turned off.
    pub fn preset(&self) -> Option<Preset> {
        self.decode.preset().filter(|_| self.ablation.is_shipped())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_what_is_turned_off() {
        let paper = Preset::Paper.options();
        assert_eq!(Ablation::SHIPPED.label(&paper), paper.label());
        let all = Ablation {
            cost_aware: false,
            outcome_signal: false,
            row_table: RowTable::Corrections,
        };
        assert_eq!(
            all.label(&paper),
            "RecGuide adaptive {8,16,32} (entropy only) +overlap (every row) (corrections rows)"
        );
        let ar = DecodeOptions {
            mode: crate::engine::Mode::Ar,
            ..paper.clone()
        };
        assert_eq!(all.label(&ar), "AR");
        let every_row = ConfigOptions {
            decode: paper.clone(),
            ablation: Ablation::EVERY_ROW,
        };
        assert_eq!(every_row.preset(), None);
        assert_eq!(ConfigOptions::shipped(paper).preset(), Some(Preset::Paper));
    }

    /// Written and read back, options and ablation share one object, as in files
    /// written before they were split.
    #[test]
    fn configured_options_keep_one_object() {
        let c = ConfigOptions {
            decode: Preset::Throughput.options(),
            ablation: Ablation {
                outcome_signal: false,
                ..Ablation::EVERY_ROW
            },
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["cost_aware"], false);
        assert_eq!(v["mode"], "recguide");
        let back: ConfigOptions = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn older_options_objects_give_their_ablation() {
        let v = serde_json::json!({"mode": "recguide", "cost_aware": false,
            "row_table": "two_plus_new"});
        let a: Ablation = serde_json::from_value(v).unwrap();
        assert!(!a.cost_aware && a.outcome_signal);
        assert_eq!(a.row_table, RowTable::TwoPlusNew);
        let none: Ablation = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(none.is_shipped());
    }
}
