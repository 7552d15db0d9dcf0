//! The block-size policy: every rule that decides how many tokens a request drafts
//! this round, in two parts. [`Beliefs`] is everything the run has learned (the
//! prices, branch-row hit rates, the tables' calibration, the regimes' rates, the
//! round clock); it changes only by observing what rounds did
//! ([`Beliefs::observe`]). A [`Strategy`] is how a request chooses, from its options
//! and the batching; [`decide`] is the one decision function of the beliefs, the
//! round's members and the batching, pure, so each rule is a unit test on plain data.
//! The scheduler asks `decide` and tells the beliefs; it keeps no clock and no
//! prices of its own.
//!
//! The rules, each a [`Rule`]:
//! - `fixed`: LinearSS and RecGuide without adaptive; AR is a fixed block of 1;
//! - `reused`: a request holding a branch's block verifies it (no draft forward); a
//!   round whose draft rode the last forward (`Member::carried`) verifies its block;
//! - `cold_start` / `ratio`: RecGuide's per-request rule (reference §3.2), argmax
//!   V_B(s) / T_C(B) over the action space, capped by concurrency before any history;
//! - `round`: in a packed round the adaptive requests choose together (`joint`), the
//!   round's expected tokens per ms, a fresh draft charged its share of a forward where
//!   drafts ride the shared forward;
//! - `ar_regime` / `ar_trial`: where the action space holds 1 (the throughput preset),
//!   packed rounds run drafting or AR steps, whichever measured more tokens per ms
//!   (`regime`);
//! - `rows` (with every rule above): a block size is priced with the branch rows it is
//!   expected to carry, and after the draft each row rides only where P(hit) × the
//!   draft it spares covers its price at this load (`rows`);
//! - `explore`: now and then one request runs a size the rule did not pick, so the
//!   learned costs keep measuring it (only where the costs learn: under a fixed
//!   profile's prices exploring would measure nothing);
//! - `context`: clipped to what is left of the window.
//!
//! Every adaptive rule chooses among the sizes offered at the load: one below the
//! reference's smallest (4, or 1: an AR step) only where the forward is compute-bound
//! at it (`offered`).

mod beliefs;
mod joint;
mod regime;
mod rows;
mod strategy;
mod tables;

pub use beliefs::{Beliefs, BeliefsStart, Observation};
pub use joint::RoundOption;
pub use regime::{Regime, RegimeChooser, RegimeTurn};
pub use rows::{expected_rows_ms, price_rows, HitRates, RowKey, RowLoad};
pub use strategy::{decide, RoundPlan, Strategy};
pub use tables::{
    cold_start, pava_non_increasing, stratum, verify_entropy, History, RoundOutcome,
    SurvivalSample, SurvivalTables,
};

use super::cost::CostModel;
use super::events::{BlockCandidate, BlockDecision, Rule};
use super::options::DecodeOptions;

/// The exploration budget: each alternative the rules did not choose (a block size, the
/// other regime) may spend this share of the run's time on being measured, so a slow
/// spell, or a profile that misprices one, cannot lock it out for good.
pub const EXPLORE_SHARE: f64 = 0.03;

/// How overdue an alternative costing `cost_ms` to measure is, `since_ms` after it last
/// ran: 1 or more means its share of the time has built up.
pub fn overdue(since_ms: f64, cost_ms: f64) -> f64 {
    since_ms * EXPLORE_SHARE / cost_ms.max(1e-9)
}

/// What the policy needs to know of one live request.
#[derive(Debug, Clone)]
pub struct Member<'a> {
    pub options: &'a DecodeOptions,
    pub history: &'a History,
    /// Committed positions in its cache.
    pub ctx: usize,
    /// Positions left in the context window.
    pub room: usize,
    /// Length of a reused branch block waiting to be verified.
    pub reused: Option<usize>,
    /// Block size of a round whose draft rode the last forward: it verifies that block.
    pub carried: Option<usize>,
}

impl Member<'_> {
    /// It holds a block to verify (a branch's, or one drafted in the last forward).
    pub fn holds(&self) -> bool {
        self.reused.is_some() || self.carried.is_some()
    }
}

/// A round's block size for one request, and why (`None` for AR, which shows none).
pub type Decision = (usize, Option<BlockDecision>);

/// What a run has learned that the ratio rule weighs, per block size.
pub struct Learned<'a> {
    /// What a request's branch rows are expected to add to a round (ms).
    pub rows_ms: &'a dyn Fn(usize) -> f64,
    /// What its tables' values are scaled by (`Beliefs::calibration`).
    pub calibration: &'a dyn Fn(usize) -> f64,
}

impl Learned<'_> {
    /// Nothing learned: the tables and the profile as they are.
    pub const NONE: Learned<'static> = Learned {
        rows_ms: &|_| 0.0,
        calibration: &|_| 1.0,
    };
}

/// The ratio rule over the action space `blocks`: argmax_B V_B(s) / T_C(B); ties go
/// to the smaller B. Before a request has history (cold start) the reference's
/// mapping from concurrency to B is the largest B allowed, and within it the rule
/// runs on the tables' marginal values: with flat forward costs, as on the
/// reference's GPUs, that is the reference's choice; where a 32-token forward costs
/// several 8-token ones, as on a CPU, the first round is not spent on a block the
/// costs do not justify. Sizes the tables cannot value are left out; when none is
/// left, the smallest requested size is taken (`untabled`). The strategies apply it
/// with what the run has `learned`.
pub fn ratio_rule(
    history: &History,
    tables: &SurvivalTables,
    cost: &CostModel,
    blocks: &[usize],
    concurrency: usize,
    ctx: usize,
    learned: &Learned,
) -> (usize, BlockDecision) {
    let (rule, cap) = if history.is_empty() {
        (Rule::ColdStart, cold_start(concurrency))
    } else {
        (Rule::Ratio, usize::MAX)
    };
    let signal = history.signal();
    let stratum = history.stratum();
    let candidates: Vec<BlockCandidate> = blocks
        .iter()
        .filter(|&&b| b <= cap && tables.covers(b))
        .map(|&b| BlockCandidate {
            block: b,
            value: tables.value(b, signal, stratum.as_deref()) * (learned.calibration)(b),
            cost_ms: cost.round_ms(concurrency, b, ctx),
            rows_ms: concurrency.max(1) as f64 * (learned.rows_ms)(b),
        })
        .collect();
    let best = candidates.iter().reduce(|best, c| {
        let (r, rb) = (c.score(None), best.score(None));
        if r > rb + 1e-12 || (r > rb - 1e-12 && c.block < best.block) {
            c
        } else {
            best
        }
    });
    let (block, rule) = match best {
        Some(c) => (c.block, rule),
        None => (blocks.iter().copied().min().unwrap_or(1), Rule::Untabled),
    };
    (
        block,
        BlockDecision {
            rule,
            signal,
            candidates,
            rate: None,
            measured: None,
            ar_rate: None,
        },
    )
}

#[cfg(test)]
mod tests;
