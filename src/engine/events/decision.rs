//! Why a round's block size is what it is (`BlockDecision`: the rule, the candidates
//! weighed, the rates) and which branch rows ride (`RowsPriced`), as events carry them.

use serde::{Deserialize, Serialize};

/// Which rule set a round's block size (the policy module's rules, `policy::*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A fixed block size (LinearSS, RecGuide without adaptive).
    Fixed,
    /// No history yet: the reference's concurrency cap, valued by the tables' marginal.
    ColdStart,
    /// The per-request ratio rule: argmax V_B / T_C(B).
    Ratio,
    /// Chosen together with the round's other requests (max Σ V / Σ T).
    Round,
    /// A size the rule did not pick, run so the learned costs keep measuring it.
    Explore,
    /// An AR step because AR steps measured more tokens per ms here lately.
    ArRegime,
    /// AR steps tried for a span of rounds, to keep their measure fresh.
    ArTrial,
    /// The block of a reused branch (no draft forward).
    Reused,
    /// None of the sizes asked for has a survival table: the smallest asked.
    Untabled,
    /// Clipped to what is left of the context window.
    Context,
}

impl Rule {
    /// Short words for the round pane.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Fixed => "fixed size",
            Rule::ColdStart => "cold start",
            Rule::Ratio => "best tokens per ms",
            Rule::Round => "best tokens per ms for the round",
            Rule::Explore => "explore (measuring a size not chosen lately)",
            Rule::ArRegime => "AR step (measured regime)",
            Rule::ArTrial => "AR step (trial of the AR regime)",
            Rule::Reused => "reused branch block",
            Rule::Untabled => "no survival table: smallest size",
            Rule::Context => "clipped to the context window",
        }
    }
}

/// A block size and why it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockDecision {
    pub rule: Rule,
    /// The history signal (mean verifier entropy over the last two rounds).
    pub signal: Option<f32>,
    /// Per candidate B: expected tokens advanced V_B and cost in ms: T_C(B) for the
    /// per-request rule; the rows it adds to the round for `round`.
    pub candidates: Vec<BlockCandidate>,
    /// `round`: the round's expected tokens per ms λ; the pick maximises V − λ·T.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// `ar_regime`, `ar_trial`: what each regime has delivered here lately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<RegimeRates>,
    /// Tokens per ms the round's requests would make taking AR steps instead, by the
    /// cost model (fitted to this machine's forwards): what drafting is up against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_rate: Option<f64>,
}

impl BlockDecision {
    /// A decision with nothing to show but its rule.
    pub fn plain(rule: Rule) -> Self {
        Self {
            rule,
            signal: None,
            candidates: Vec::new(),
            rate: None,
            measured: None,
            ar_rate: None,
        }
    }
}

/// Tokens per ms of round time delivered lately at this concurrency (`None`: not
/// measured yet).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegimeRates {
    pub draft: Option<f64>,
    pub ar: Option<f64>,
}

/// One block size the rule weighed: expected tokens V, what its forwards cost, and
/// what the branch rows it is expected to carry change that by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockCandidate {
    pub block: usize,
    pub value: f64,
    /// Its draft and verify rows (a bucket's forwards for the per-request rule), ms.
    pub cost_ms: f64,
    /// Expected net price of its branch rows, ms: negative where they are expected
    /// to spare more than they cost (absent before event version 4: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_ms: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl BlockCandidate {
    /// What the rule weighs V against: its forwards and its rows' net price.
    pub fn total_ms(&self) -> f64 {
        (self.cost_ms + self.rows_ms).max(1e-9)
    }

    /// What the rule that chose among these candidates compared: tokens per ms
    /// V ÷ T (the per-request ratio rule, `rate` None), or the net tokens V − λ·T at
    /// the round's rate λ (the round rule: the forwards' fixed part is in λ, so V ÷ T
    /// alone would favour the wrong size).
    pub fn score(&self, rate: Option<f64>) -> f64 {
        match rate {
            Some(lambda) => self.value - lambda * self.total_ms(),
            None => self.value / self.total_ms(),
        }
    }
}

/// Some rows, summed: how many, what they add to the forward, and the draft forwards
/// they are expected to spare (Σ P(hit): at most one row of a round hits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSet {
    pub rows: usize,
    pub added_ms: f64,
    pub saves: f64,
}

impl RowSet {
    pub fn add(&mut self, ms: f64, p: f64) {
        self.rows += 1;
        self.added_ms += ms;
        self.saves += p;
    }
}

/// A round's row decision for one request, for the screen and recordings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RowsPriced {
    pub kept: RowSet,
    pub dropped: RowSet,
    /// This request's share of the verify forward without rows (ms): the rows'
    /// price is stated against it.
    pub share_ms: f64,
    /// What one spared draft is worth (ms).
    pub saving_ms: f64,
    /// Every row kept whatever it costs (the all-rows ablation).
    pub unpriced: bool,
}

impl RowsPriced {
    /// "+41% verify price for 0.30 drafts expected saved" of a set.
    pub fn describe(&self, set: &RowSet) -> String {
        let pct = if self.share_ms > 0.0 {
            100.0 * set.added_ms / self.share_ms
        } else {
            0.0
        };
        format!(
            "+{pct:.0}% verify price for {:.2} drafts expected saved",
            set.saves
        )
    }
}
