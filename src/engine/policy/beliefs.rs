//! What the block policy has learned of a run: prices (the ones decisions use, the
//! profile's modeled ones, this machine's), branch-row hit rates, the survival tables'
//! calibration and its evidence, the regimes' measured rates and the round clock. It
//! changes only by [`Beliefs::observe`]-ing what a round did, in the order it happened:
//! the decisions, each forward's shape and times, the rows planned, the verdicts, the
//! round's end. The strategies read it and never write it (`strategy`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::joint::RoundOption;
use super::regime::{Regime, RegimeChooser, RegimeTurn};
use super::rows::{expected_rows_ms, price_rows, HitRates, RowKey, RowLoad};
use super::strategy::RoundPlan;
use super::tables::{History, SurvivalTables};
use crate::engine::cost::{Clock, CostModel, ForwardShape, OnlineCost, Pricing};
use crate::engine::events::{RegimeRates, RowsPriced};
use crate::engine::options::REFERENCE_BLOCKS;
use crate::engine::overlap::BranchKind;

/// Tokens of evidence a cell's calibration starts with at its block size's ratio: a
/// few rounds' worth, so one lucky round does not move it.
const CALIB_PRIOR: f64 = 40.0;

/// The share of a size's value held back before any round has measured it (less as
/// rounds do, as 1/√(n + 1)).
pub(super) const UNMEASURED_DISCOUNT: f64 = 0.25;

/// A cell of the survival tables: block size, stratum, signal bin.
type CalibKey = (usize, Option<String>, Option<usize>);

/// One thing a round did, as the beliefs learn it: owned and serializable, so the
/// scheduler reports each one it observes (`DecodeEvent::Learned`) and a recording's
/// events rebuild the beliefs (`trace::beliefs::rebuild`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Observation {
    /// A packed round's block sizes were chosen together (`strategy::decide`): the
    /// sizes its adaptive members run, and the regime's turn where one was asked.
    Decided {
        ran: Vec<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        regime: Option<RegimeTurn>,
    },
    /// A decode forward: its shape, the wall time from its start to this report, the
    /// forward's own wall time, and its price on the profile's machine.
    Forward {
        shape: ForwardShape,
        wall_ms: f64,
        forward_ms: f64,
        modeled_ms: f64,
    },
    /// A drafted block of `block` asked the row table for rows of these kinds.
    RowsPlanned {
        block: usize,
        kinds: Vec<BranchKind>,
    },
    /// A request verified a reused block in a packed round of `concurrency`;
    /// `skipped`: the round ran no draft forward.
    Spared { concurrency: usize, skipped: bool },
    /// A judged fresh draft of `block` (not cut by the answer's end) advanced
    /// `advance` tokens; the request's history before it read `signal` (the verifier
    /// entropy) and `stratum` (the previous round's outcome).
    Advanced {
        block: usize,
        signal: Option<f32>,
        stratum: Option<String>,
        advance: usize,
    },
    /// A judged round's branch rows and the one that hit.
    RowsJudged {
        built: Vec<RowKey>,
        hit: Option<usize>,
    },
    /// The round ended: `tokens` committed by the `concurrency` requests in it, in
    /// `wall_ms` here and `modeled_ms` on the profile's machine.
    RoundEnded {
        concurrency: usize,
        tokens: usize,
        wall_ms: f64,
        modeled_ms: f64,
    },
}

impl Observation {
    /// A judged draft of `block` by a request whose history before it was `h`.
    pub fn advanced(block: usize, h: &History, advance: usize) -> Self {
        Observation::Advanced {
            block,
            signal: h.signal(),
            stratum: h.stratum(),
            advance,
        }
    }

    /// What a packed round's plan changes in the beliefs (`None`: nothing, as when no
    /// request chose jointly).
    pub fn decided(plan: &RoundPlan) -> Option<Self> {
        plan.joint.as_ref().map(|j| {
            // Each size once: when it last ran is all the beliefs keep of it.
            let mut ran = j.blocks.clone();
            ran.sort_unstable();
            ran.dedup();
            Observation::Decided {
                ran,
                regime: j.regime,
            }
        })
    }
}

/// Where beliefs start: the survival tables (named by their `source`) and the prices
/// as given, whether they learn and the clock. A recording's first `learned` event
/// carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeliefsStart {
    pub tables: String,
    pub cost: CostModel,
    pub learn: bool,
    pub clock: Clock,
}

/// Everything the policy has learned.
#[derive(Debug, Clone)]
pub struct Beliefs {
    tables: SurvivalTables,
    /// The prices decisions use: the profile's, refitted from this run where it learns.
    cost: OnlineCost,
    /// The profile as given: what forwards cost on its machine (`modeled_ms`).
    modeled: CostModel,
    /// This machine's costs, fitted to the forwards' wall time, where decisions are
    /// priced by another profile (a GPU's): what an AR step costs *here*, which the
    /// screen weighs drafting against. `None` where `cost` learns (it is this machine's).
    machine: Option<OnlineCost>,
    /// What rounds and forwards are timed by.
    clock: Clock,
    /// ms of rounds run so far: the one clock.
    clock_ms: f64,
    /// `clock_ms` when each block size last ran in a jointly chosen round.
    last_ran: BTreeMap<usize, f64>,
    /// Packed rounds decided together (whose turn it is to explore).
    rounds: u64,
    regimes: RegimeChooser,
    /// The regime of the round being run, if it applied to someone.
    round_regime: Option<Regime>,
    /// ms of this round's forwards the cost model learned from (the rest is overhead).
    round_forward_ms: f64,
    /// What branch rows hit, learned from the run's rounds.
    hits: HitRates,
    /// What verification said of the tables' values: per cell, Σ tokens predicted and
    /// Σ tokens advanced.
    calib: BTreeMap<CalibKey, (f64, f64)>,
    /// Judged rounds that measured each block size (its own or a larger block's).
    evidence: BTreeMap<usize, usize>,
}

impl Beliefs {
    /// Nothing learned yet: the tables and the prices as given.
    pub fn new(tables: SurvivalTables, pricing: &Pricing) -> Self {
        Self {
            tables,
            cost: OnlineCost::new(pricing.cost.clone()).learning(pricing.learn),
            modeled: pricing.cost.clone(),
            machine: (!pricing.learn).then(|| OnlineCost::new(CostModel::builtin())),
            clock: pricing.clock,
            clock_ms: 0.0,
            last_ran: BTreeMap::new(),
            rounds: 0,
            regimes: RegimeChooser::default(),
            round_regime: None,
            round_forward_ms: 0.0,
            hits: HitRates::default(),
            calib: BTreeMap::new(),
            evidence: BTreeMap::new(),
        }
    }

    /// Nothing learned yet, from a recorded start and the tables it names.
    pub fn from_start(tables: SurvivalTables, start: &BeliefsStart) -> Self {
        let mut pricing = Pricing::fixed(start.cost.clone());
        pricing.learn = start.learn;
        pricing.clock = start.clock;
        Self::new(tables, &pricing)
    }

    /// Where these beliefs started (the prices before any refit).
    pub fn start(&self) -> BeliefsStart {
        BeliefsStart {
            tables: self.tables.source.clone(),
            cost: self.modeled.clone(),
            learn: self.cost.is_learning(),
            clock: self.clock,
        }
    }

    /// Learns one thing a round did.
    pub fn observe(&mut self, o: &Observation) {
        match o {
            Observation::Decided { ran, regime } => {
                self.rounds += 1;
                for &b in ran {
                    self.last_ran.insert(b, self.clock_ms);
                }
                if let Some(turn) = *regime {
                    self.regimes.begin(turn);
                    self.round_regime = Some(turn.regime);
                }
            }
            Observation::Forward {
                shape,
                wall_ms,
                forward_ms,
                modeled_ms,
            } => {
                let ms = self.timed(*wall_ms, *modeled_ms);
                self.cost.observe(shape, ms);
                self.round_forward_ms += ms;
                // The forward's own time, as the screen's drafting rate counts it.
                if let Some(m) = &mut self.machine {
                    m.observe(shape, *forward_ms);
                }
            }
            Observation::RowsPlanned { block, kinds } => self.hits.record_planned(*block, kinds),
            Observation::Spared {
                concurrency,
                skipped,
            } => self.hits.record_spared(*concurrency, *skipped),
            Observation::Advanced {
                block,
                signal,
                stratum,
                advance,
            } => self.learn_advance(*block, *signal, stratum.as_deref(), *advance),
            Observation::RowsJudged { built, hit } => self.hits.record(built, *hit),
            Observation::RoundEnded {
                concurrency,
                tokens,
                wall_ms,
                modeled_ms,
            } => {
                let round_ms = self.timed(*wall_ms, *modeled_ms);
                self.clock_ms += round_ms;
                if let Some(regime) = self.round_regime.take() {
                    self.regimes
                        .record(*concurrency, regime, *tokens, round_ms, self.clock_ms);
                }
                if self.round_forward_ms > 0.0 {
                    self.cost
                        .observe_round((round_ms - self.round_forward_ms).max(0.0));
                }
                self.round_forward_ms = 0.0;
            }
        }
    }

    /// A time on the clock the beliefs keep.
    fn timed(&self, wall_ms: f64, modeled_ms: f64) -> f64 {
        match self.clock {
            Clock::Wall => wall_ms,
            Clock::Priced => modeled_ms,
        }
    }

    /// Every smaller tabled size b' would have advanced `min(advance, b')` from the
    /// same state: the verifier keeps the same prefix of a shorter draft (to the
    /// approximation the survival tables themselves make). Without this a size the
    /// rule stops picking is never measured, and where the tables underrate it the
    /// rule never comes back to it (measured: under B200 prices at C = 2 it kept
    /// B = 32 in 99% of rounds where fixed B = 16 was faster). A larger size is not
    /// inferred: a full round says nothing of what lay past its end, and imputing the
    /// tables' tail there measured worse at every load.
    fn learn_advance(
        &mut self,
        b: usize,
        signal: Option<f32>,
        stratum: Option<&str>,
        advance: usize,
    ) {
        if b < 2 || !self.tables.covers(b) {
            return;
        }
        for size in self.tables.blocks() {
            if size < 2 || size > b {
                continue;
            }
            let predicted = self.tables.value(size, signal, stratum);
            let c = self
                .calib
                .entry(self.calib_key(size, signal, stratum))
                .or_default();
            c.0 += predicted;
            c.1 += advance.min(size) as f64;
            *self.evidence.entry(size).or_default() += 1;
        }
    }

    fn calib_key(&self, b: usize, signal: Option<f32>, stratum: Option<&str>) -> CalibKey {
        (b, stratum.map(str::to_string), self.tables.bin(signal))
    }

    /// What the tables' V_B of a request with history `h` is scaled by: the tokens
    /// rounds of that cell advanced over those the tables predicted, shrunk toward the
    /// block size's ratio over every cell, itself shrunk toward 1. The tables are
    /// estimated from a few rounds per cell; the cells a run picks most are the ones
    /// they overrate most, and verification says by how much.
    pub fn calibration(&self, b: usize, h: &History) -> f64 {
        if b < 2 {
            return 1.0;
        }
        let (_, pred, real) = self.measured(b);
        let overall = (real + CALIB_PRIOR) / (pred + CALIB_PRIOR);
        let key = self.calib_key(b, h.signal(), h.stratum().as_deref());
        let (p, r) = self.calib.get(&key).copied().unwrap_or((0.0, 0.0));
        (r + CALIB_PRIOR * overall) / (p + CALIB_PRIOR)
    }

    /// V_B(s) of a request with history `h`, calibrated by what verification said this
    /// run, less what is known of it beyond the best-measured drafting size:
    /// `UNMEASURED_DISCOUNT` × (1/√(n_B + 1) − 1/√(n_max + 1)) of it, n the rounds that
    /// measured a size this run (its own, or a larger block's). The rule picks the
    /// sizes the tables overrate most; a size no round has measured is taken only
    /// where the tables favour it by more than the discount (measured: at C = 64–128
    /// under B200 prices B = 16 was picked in 7% of rounds on the tables' word and
    /// lost 1–2% against fixed B = 8). Relative, so before any round (or where only AR
    /// steps ran) every drafting size stands on the tables alone: an absolute
    /// discount locked the throughput preset into AR steps at C = 128.
    pub fn value(&self, h: &History, b: usize) -> f64 {
        let v = self.tables.value(b, h.signal(), h.stratum().as_deref()) * self.calibration(b, h);
        if b < 2 {
            return v;
        }
        let unknown = |n: usize| 1.0 / (n as f64 + 1.0).sqrt();
        let most = self.evidence.values().copied().max().unwrap_or(0);
        let n = self.evidence.get(&b).copied().unwrap_or(0);
        v * (1.0 - UNMEASURED_DISCOUNT * (unknown(n) - unknown(most)))
    }

    /// Judged rounds that measured block size `b`, and the tokens the tables predicted
    /// and verification advanced over them (every cell of `b`).
    pub fn measured(&self, b: usize) -> (usize, f64, f64) {
        let (pred, real) = self
            .calib
            .iter()
            .filter(|((bb, _, _), _)| *bb == b)
            .fold((0.0, 0.0), |(p, r), (_, (cp, cr))| (p + cp, r + cr));
        (self.evidence.get(&b).copied().unwrap_or(0), pred, real)
    }

    /// ms of rounds run so far, on the beliefs' clock.
    pub fn elapsed_ms(&self) -> f64 {
        self.clock_ms
    }

    /// Measured tokens per ms of drafting and of AR steps at `concurrency`.
    pub fn regime_rates(&self, concurrency: usize) -> RegimeRates {
        self.regimes.rates(concurrency)
    }

    pub fn tables(&self) -> &SurvivalTables {
        &self.tables
    }

    /// The cost model decisions use now.
    pub fn cost(&self) -> &CostModel {
        self.cost.model()
    }

    /// Whether the decisions' prices learn from this run (and so whether measuring an
    /// alternative tells them anything).
    pub fn learns(&self) -> bool {
        self.cost.is_learning()
    }

    /// The profile as given: what a forward costs on its machine.
    pub fn modeled(&self) -> &CostModel {
        &self.modeled
    }

    /// This machine's prices (the decisions' own where they learn here).
    pub fn machine(&self) -> &CostModel {
        self.machine.as_ref().unwrap_or(&self.cost).model()
    }

    /// The decisions' linear prices at a load of `concurrency` requests: a measured
    /// sweep's tangent model there (a row's price depends on the load), any other
    /// profile as it is.
    pub fn cost_at(&self, concurrency: usize) -> Cow<'_, CostModel> {
        self.cost.model().at_load(concurrency)
    }

    /// The branch-row hit rates learned so far.
    pub fn hits(&self) -> &HitRates {
        &self.hits
    }

    pub(super) fn regimes(&self) -> &RegimeChooser {
        &self.regimes
    }

    pub(super) fn clock_ms(&self) -> f64 {
        self.clock_ms
    }

    /// Packed rounds decided together so far.
    pub(super) fn rounds(&self) -> u64 {
        self.rounds
    }

    /// ms since block size `b` last ran in a jointly chosen round (since the start if
    /// never).
    pub(super) fn since_ran(&self, b: usize) -> f64 {
        self.clock_ms - self.last_ran.get(&b).copied().unwrap_or(0.0)
    }

    /// Which of a drafted block's branch rows (query tokens and hit-rate key each, in
    /// the row table's order) ride in the verify forward, priced at `load`; all of
    /// them when `priced` is off (the all-rows ablation). The caller observes
    /// `RowsPlanned` first: the row table asked for them, and that is learned too.
    pub fn price_rows(
        &self,
        rows: &[(usize, RowKey)],
        load: RowLoad,
        priced: bool,
    ) -> (Vec<bool>, RowsPriced) {
        price_rows(
            rows,
            &self.hits,
            &self.cost_at(load.concurrency),
            load,
            priced,
        )
    }

    /// What a block of `load.block` is expected to pay for its branch rows at that load
    /// (0 for a request without overlap or an AR step).
    pub(super) fn rows_ms(&self, overlap: bool, gated: bool, load: RowLoad) -> f64 {
        if !overlap || load.block < 2 {
            return 0.0;
        }
        let cost = self.cost_at(load.concurrency);
        expected_rows_ms(&self.hits, &cost, load, gated)
    }

    /// The sizes of `set` offered at this load. A size below the reference's smallest
    /// (the throughput preset's 4, and 1: an AR step) is offered only where the
    /// forward is compute-bound at it, `concurrency` rows of it costing at least a
    /// forward's fixed price: there a shorter block saves compute that the forward
    /// pays for. Where the forward is memory-bound it saves almost nothing and yields
    /// fewer tokens a forward, and the one-round rule misjudges that (a hit's
    /// continuation keeps its size; a stepping request lengthens a closed batch):
    /// docs/decisions.md, "Short blocks only where forwards are compute-bound".
    pub(super) fn offered(&self, set: &[usize], concurrency: usize, ctx: usize) -> Vec<usize> {
        let cost = self.cost_at(concurrency);
        set.iter()
            .copied()
            .filter(|&b| b >= REFERENCE_BLOCKS[0] || cost.compute_bound(concurrency, b, ctx))
            .collect()
    }

    /// A round option of `b` for a request with history `h` at `load` (its rows
    /// priced where `overlap`, gated where `gated`); `drafts`: it pays a draft row.
    pub(super) fn option(
        &self,
        h: &History,
        (overlap, gated): (bool, bool),
        load: RowLoad,
        drafts: bool,
    ) -> RoundOption {
        let cost = self.cost_at(load.concurrency);
        let b = load.block;
        RoundOption {
            rows_ms: self.rows_ms(overlap, gated, load),
            block: b,
            value: self.value(h, b),
            draft_ms: if drafts {
                cost.draft_row_ms(b, load.ctx)
            } else {
                0.0
            },
            verify_ms: cost.row_ms(b, load.ctx),
        }
    }
}
