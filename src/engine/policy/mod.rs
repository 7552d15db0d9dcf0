//! The block-size policy: every rule that decides how many tokens a request drafts
//! this round, in one place, with one clock, one exploration budget and one cost
//! model. The scheduler asks it once per round ([`BlockPolicy::decide`]) and tells it
//! what the forwards and the round cost ([`BlockPolicy::observe_forward`],
//! [`BlockPolicy::end_round`]).
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

mod joint;
mod regime;
mod rows;
mod tables;

use std::borrow::Cow;
use std::collections::BTreeMap;

pub use joint::RoundOption;
pub use regime::{Regime, RegimeChooser};
pub use rows::{expected_rows_ms, price_rows, HitRates, RowKey, RowLoad};
pub use tables::{
    cold_start, pava_non_increasing, stratum, verify_entropy, History, RoundOutcome,
    SurvivalSample, SurvivalTables,
};

use super::cost::{CostModel, ForwardShape, OnlineCost};
use super::events::{BlockCandidate, BlockDecision, Rule};
use super::options::{Batching, Blocks, DecodeOptions, REFERENCE_BLOCKS};

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

/// The block-size policy with what it has learned.
#[derive(Debug, Clone)]
pub struct BlockPolicy {
    tables: SurvivalTables,
    cost: OnlineCost,
    regimes: RegimeChooser,
    /// ms of rounds run so far: the one clock.
    clock_ms: f64,
    /// `clock_ms` when each block size last ran in a jointly chosen round.
    last_ran: BTreeMap<usize, f64>,
    /// Packed rounds decided (whose turn it is to explore).
    rounds: u64,
    /// The regime of the round being run, if it applied to someone.
    round_regime: Option<Regime>,
    /// ms of this round's forwards the cost model learned from (the rest is overhead).
    round_forward_ms: f64,
    /// What branch rows hit, learned from the run's rounds.
    hits: HitRates,
    /// What verification said of the tables' values: per block size, previous round's
    /// stratum and signal bin, Σ tokens predicted and Σ tokens advanced.
    calib: BTreeMap<CalibKey, (f64, f64)>,
    /// Judged rounds that measured each block size (its own or a larger block's).
    evidence: BTreeMap<usize, usize>,
    /// This machine's costs, fitted to the forwards' wall time, where decisions are
    /// priced by another profile (a GPU's): what an AR step costs *here*, which the
    /// screen weighs drafting against. `None` where `cost` learns (it is this machine's).
    machine: Option<OnlineCost>,
    /// Fresh drafts ride the shared forward (`Batching::Packed`): a row's hit spares
    /// this request a forward's share whatever the others do.
    rides: bool,
}

/// A cell of the survival tables: block size, stratum, signal bin.
type CalibKey = (usize, Option<String>, Option<usize>);

/// Tokens of evidence a cell's calibration starts with at its block size's ratio: a
/// few rounds' worth, so one lucky round does not move it.
const CALIB_PRIOR: f64 = 40.0;

/// The share of a size's value held back before any round has measured it (less as
/// rounds do, as 1/√(n + 1)).
const UNMEASURED_DISCOUNT: f64 = 0.25;

impl BlockPolicy {
    pub fn new(tables: SurvivalTables, cost: CostModel) -> Self {
        Self {
            tables,
            cost: OnlineCost::new(cost),
            regimes: RegimeChooser::default(),
            clock_ms: 0.0,
            last_ran: BTreeMap::new(),
            rounds: 0,
            round_regime: None,
            round_forward_ms: 0.0,
            hits: HitRates::default(),
            calib: BTreeMap::new(),
            evidence: BTreeMap::new(),
            machine: None,
            rides: Batching::default() == Batching::Packed,
        }
    }

    fn calib_key(&self, b: usize, h: &History) -> CalibKey {
        (b, h.stratum(), self.tables.bin(h.signal()))
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
        let (mut pred, mut real) = (0.0, 0.0);
        for ((bb, _, _), (p, r)) in &self.calib {
            if *bb == b {
                pred += p;
                real += r;
            }
        }
        let overall = (real + CALIB_PRIOR) / (pred + CALIB_PRIOR);
        let (p, r) = self
            .calib
            .get(&self.calib_key(b, h))
            .copied()
            .unwrap_or((0.0, 0.0));
        (r + CALIB_PRIOR * overall) / (p + CALIB_PRIOR)
    }

    /// A judged round of a fresh draft of `b` (not cut by the answer's end) by a
    /// request whose history before it was `h`: it advanced `advance` tokens.
    ///
    /// It says what every smaller tabled size b' would have advanced from the same
    /// state too, `min(advance, b')`: the verifier keeps the same prefix of a shorter
    /// draft (to the approximation the survival tables themselves make). Without this
    /// a size the rule stops picking is never measured, and where the tables
    /// underrate it the rule never comes back to it (measured: under B200 prices at
    /// C = 2 it kept B = 32 in 99% of rounds where fixed B = 16 was faster). A larger size is not inferred:
    /// a full round says nothing of what lay past its end, and imputing the tables'
    /// tail there measured worse at every load.
    pub fn observe_advance(&mut self, b: usize, h: &History, advance: usize) {
        if b < 2 || !self.tables.covers(b) {
            return;
        }
        let (signal, stratum) = (h.signal(), h.stratum());
        for size in self.tables.blocks() {
            if size < 2 || size > b {
                continue;
            }
            let predicted = self.tables.value(size, signal, stratum.as_deref());
            let c = self.calib.entry(self.calib_key(size, h)).or_default();
            c.0 += predicted;
            c.1 += advance.min(size) as f64;
            *self.evidence.entry(size).or_default() += 1;
        }
    }

    /// V_B(s) for a member, calibrated by what verification said this run, less what
    /// is known of it beyond the best-measured drafting size:
    /// `UNMEASURED_DISCOUNT` × (1/√(n_B + 1) − 1/√(n_max + 1)) of it, n the rounds that
    /// measured a size this run (its own, or a larger block's). The rule picks the
    /// sizes the tables overrate most; a size no round has measured is taken only
    /// where the tables favour it by more than the discount (measured: at C = 64–128
    /// under B200 prices B = 16 was picked in 7% of rounds on the tables' word and
    /// lost 1–2% against fixed B = 8). Relative, so before any round (or where only AR
    /// steps ran) every drafting size stands on the tables alone: an absolute
    /// discount locked the throughput preset into AR steps at C = 128.
    fn value(&self, m: &Member, b: usize) -> f64 {
        let v = self
            .tables
            .value(b, m.history.signal(), m.history.stratum().as_deref())
            * self.calibration(b, m.history);
        if b < 2 {
            return v;
        }
        let unknown = |n: usize| 1.0 / (n as f64 + 1.0).sqrt();
        let most = self.evidence.values().copied().max().unwrap_or(0);
        let n = self.evidence.get(&b).copied().unwrap_or(0);
        v * (1.0 - UNMEASURED_DISCOUNT * (unknown(n) - unknown(most)))
    }

    pub fn set_tables(&mut self, tables: SurvivalTables) {
        self.tables = tables;
    }

    pub fn set_cost(&mut self, cost: CostModel) {
        let learn = self.cost.is_learning();
        self.cost = OnlineCost::new(cost).learning(learn);
    }

    /// Whether forwards refit the cost model (on by default; off keeps the profile's
    /// prices, e.g. a GPU profile on a CPU). The rules run the same either way; off,
    /// this machine's own costs are fitted beside them (from the built-in CPU profile)
    /// for the AR rate the screen compares drafting with.
    pub fn set_cost_learning(&mut self, on: bool) {
        self.cost = self.cost.clone().learning(on);
        self.machine = (!on).then(|| OnlineCost::new(CostModel::builtin()));
    }

    /// A forward's wall time on this machine (whatever clock the decisions use).
    pub fn observe_wall(&mut self, shape: &ForwardShape, ms: f64) {
        if let Some(m) = &mut self.machine {
            m.observe(shape, ms);
        }
    }

    pub fn tables(&self) -> &SurvivalTables {
        &self.tables
    }

    /// The cost model decisions use now.
    pub fn cost(&self) -> &CostModel {
        self.cost.model()
    }

    /// Its linear prices at a load of `concurrency` requests: a measured sweep's tangent
    /// model there (a row's price depends on the load), any other profile as it is.
    fn cost_at(&self, concurrency: usize) -> Cow<'_, CostModel> {
        self.cost.model().at_load(concurrency)
    }

    /// The branch-row hit rates learned so far.
    pub fn hits(&self) -> &HitRates {
        &self.hits
    }

    /// Which of a drafted block's branch rows (query tokens and hit-rate key each, in
    /// the row table's order) ride in the verify forward, priced at `load`; all of
    /// them when `priced` is off (the all-rows ablation). The row table asked for
    /// them: that is learned too.
    pub fn price_rows(
        &mut self,
        rows: &[(usize, RowKey)],
        load: RowLoad,
        priced: bool,
    ) -> (Vec<bool>, super::events::RowsPriced) {
        let kinds: Vec<_> = rows.iter().map(|(_, k)| k.kind).collect();
        self.hits.record_planned(load.block, &kinds);
        let cost = self.cost_at(load.concurrency);
        price_rows(rows, &self.hits, &cost, load, priced)
    }

    /// A judged round's branch rows and the one that hit.
    pub fn observe_rows(&mut self, built: &[RowKey], hit: Option<usize>) {
        self.hits.record(built, hit);
    }

    /// A request verified a reused block in a packed round of `concurrency`;
    /// `skipped`: the round ran no draft forward (what a hit is worth depends on it).
    pub fn observe_spared(&mut self, concurrency: usize, skipped: bool) {
        self.hits.record_spared(concurrency, skipped);
    }

    /// What a block of `b` is expected to pay for its branch rows (0 without overlap).
    fn rows_ms(&self, m: &Member, b: usize, concurrency: usize) -> f64 {
        if !m.options.overlap_on() || b < 2 {
            return 0.0;
        }
        let load = RowLoad {
            concurrency,
            ctx: m.ctx,
            block: b,
            rides: self.rides,
        };
        let cost = self.cost_at(concurrency);
        expected_rows_ms(&self.hits, &cost, load, m.options.cost_gated())
    }

    /// A forward's measured time (with its signals), for the cost model.
    pub fn observe_forward(&mut self, shape: &ForwardShape, ms: f64) {
        self.cost.observe(shape, ms);
        self.round_forward_ms += ms;
    }

    /// A round ended: `tokens` committed by everyone in `round_ms`.
    pub fn end_round(&mut self, concurrency: usize, tokens: usize, round_ms: f64) {
        self.clock_ms += round_ms;
        if let Some(regime) = self.round_regime.take() {
            self.regimes
                .record(concurrency, regime, tokens, round_ms, self.clock_ms);
        }
        if self.round_forward_ms > 0.0 {
            self.cost
                .observe_round((round_ms - self.round_forward_ms).max(0.0));
        }
        self.round_forward_ms = 0.0;
    }

    /// Block sizes for every member of a round. Where the round shares its forwards
    /// (`batching` packs) adaptive requests choose together; otherwise each by the
    /// per-request rule (the reference's buckets). A carried round keeps its size.
    pub fn decide(&mut self, members: &[Member], batching: Batching) -> Vec<Decision> {
        let concurrency = members.len();
        let joint = batching.packs();
        self.rides = batching == Batching::Packed;
        let mut out: Vec<Option<Decision>> = vec![None; members.len()];
        // Adaptive requests without a reused block choose among their action space.
        let mut open: Vec<(usize, Vec<RoundOption>)> = Vec::new();
        for (i, m) in members.iter().enumerate() {
            match (joint, m.options.adaptive_blocks(), m.holds()) {
                (true, Some(set), false) => {
                    let opts = self.options_of(m, set, concurrency);
                    if opts.is_empty() {
                        out[i] = Some(self.per_request(m, concurrency));
                    } else {
                        open.push((i, opts));
                    }
                }
                _ => out[i] = Some(self.per_request(m, concurrency)),
            }
        }
        if !open.is_empty() {
            for (i, d) in self.choose_jointly(members, &open) {
                out[i] = Some(d);
            }
        }
        // What an AR step makes here, on this machine's costs (not a GPU profile's).
        let here = self
            .machine
            .as_ref()
            .unwrap_or(&self.cost)
            .model()
            .at_load(concurrency);
        out.into_iter()
            .zip(members)
            .map(|(d, m)| {
                let (b, why) = d.unwrap_or((1, None));
                let (b, why) = if b > m.room {
                    (m.room.max(1), Some(BlockDecision::plain(Rule::Context)))
                } else {
                    (b, why)
                };
                let ar_rate = Some(here.ar_rate(concurrency, m.ctx));
                (b, why.map(|w| BlockDecision { ar_rate, ..w }))
            })
            .collect()
    }

    /// The sizes of `set` offered at this load. A size below the reference's smallest
    /// (the throughput preset's 4, and 1: an AR step) is offered only where the
    /// forward is compute-bound at it, `concurrency` rows of it costing at least a
    /// forward's fixed price: there a shorter block saves compute that the forward
    /// pays for. Where the forward is memory-bound it saves almost nothing and yields
    /// fewer tokens a forward, and the one-round rule misjudges that (a hit's
    /// continuation keeps its size; a stepping request lengthens a closed batch):
    /// docs/decisions.md, "Short blocks only where forwards are compute-bound".
    fn offered(&self, set: &[usize], concurrency: usize, ctx: usize) -> Vec<usize> {
        let cost = self.cost_at(concurrency);
        set.iter()
            .copied()
            .filter(|&b| b >= REFERENCE_BLOCKS[0] || cost.compute_bound(concurrency, b, ctx))
            .collect()
    }

    /// An option per size of the action space offered at this load that the tables
    /// can value and the window holds, capped by the reference's concurrency mapping
    /// before any history.
    fn options_of(&self, m: &Member, set: &[usize], concurrency: usize) -> Vec<RoundOption> {
        let cap = if m.history.is_empty() {
            cold_start(concurrency)
        } else {
            usize::MAX
        };
        let mut blocks = self.offered(set, concurrency, m.ctx);
        blocks.sort_unstable();
        blocks.dedup();
        blocks
            .into_iter()
            .filter(|&b| b <= cap && b <= m.room && self.tables.covers(b))
            .map(|b| self.option(m, b, b > 1, concurrency))
            .collect()
    }

    fn option(&self, m: &Member, b: usize, drafts: bool, concurrency: usize) -> RoundOption {
        let cost = self.cost_at(concurrency);
        RoundOption {
            rows_ms: self.rows_ms(m, b, concurrency),
            block: b,
            value: self.value(m, b),
            draft_ms: if drafts {
                cost.draft_row_ms(b, m.ctx)
            } else {
                0.0
            },
            verify_ms: cost.row_ms(b, m.ctx),
        }
    }

    /// The per-request block size: fixed, a reused block's, or the ratio rule.
    fn per_request(&self, m: &Member, concurrency: usize) -> Decision {
        let o = m.options;
        if let Some(len) = m.carried {
            return (len, None);
        }
        if let Some(len) = m.reused {
            // A reused block cost no draft forward: verify it rather than drop it for
            // an AR step. In lockstep the adaptive rule may shorten it; where drafts
            // ride, verifying it whole costs this round only its verify tokens, so it
            // is verified whole.
            if self.rides {
                return (len, Some(BlockDecision::plain(Rule::Reused)));
            }
            let want = match o.adaptive_blocks() {
                Some(set) => self.learned_ratio_rule(m, set, concurrency).0,
                None => o.fixed_block().unwrap_or(len),
            };
            let b = if want == 1 { len } else { len.min(want) };
            return (b, Some(BlockDecision::plain(Rule::Reused)));
        }
        match o.block_policy() {
            Blocks::Fixed(1) if o.mode == super::events::Mode::Ar => (1, None),
            Blocks::Fixed(b) => (b, Some(BlockDecision::plain(Rule::Fixed))),
            Blocks::Adaptive(set) => {
                let (b, why) = self.learned_ratio_rule(m, &set, concurrency);
                (b, Some(why))
            }
        }
    }

    /// The ratio rule over the action space `blocks`: argmax_B V_B(s) / T_C(B); ties go
    /// to the smaller B. Before a request has history (cold start) the reference's
    /// mapping from concurrency to B is the largest B allowed, and within it the rule
    /// runs on the tables' marginal values: with flat forward costs, as on the
    /// reference's GPUs, that is the reference's choice; where a 32-token forward costs
    /// several 8-token ones, as on a CPU, the first round is not spent on a block the
    /// costs do not justify. Sizes the tables cannot value are left out; when none is
    /// left, the smallest requested size is taken (`untabled`).
    pub fn learned_ratio_rule(
        &self,
        m: &Member,
        blocks: &[usize],
        concurrency: usize,
    ) -> (usize, BlockDecision) {
        let offered = self.offered(blocks, concurrency, m.ctx);
        ratio_rule(
            m.history,
            &self.tables,
            &self.cost_at(concurrency),
            if offered.is_empty() { blocks } else { &offered },
            concurrency,
            m.ctx,
            &Learned {
                rows_ms: &|b| self.rows_ms(m, b, concurrency),
                calibration: &|b| self.calibration(b, m.history),
            },
        )
    }

    /// The joint choice of a packed round's open members, the regime, exploration.
    fn choose_jointly(
        &mut self,
        members: &[Member],
        open: &[(usize, Vec<RoundOption>)],
    ) -> Vec<(usize, Decision)> {
        let concurrency = members.len();
        // Everyone in the round counts in its cost, the members with one option too.
        let mut options: Vec<Vec<RoundOption>> = Vec::with_capacity(members.len());
        let mut slot = vec![None; members.len()];
        for (k, (i, opts)) in open.iter().enumerate() {
            slot[*i] = Some(k);
            options.push(opts.clone());
        }
        for (i, m) in members.iter().enumerate() {
            if slot[i].is_none() {
                let (b, _) = self.per_request(m, concurrency);
                // Where drafts ride, every member is priced for a whole draft → verify
                // cycle, holding a block this round or not: its rows' expected saving
                // (`rows_ms`) already credits the draft a hit spares, so leaving out
                // the draft a held block spared now counts that saving twice and
                // overrates the round's tokens per ms, which favoured small blocks
                // (issue 52). In lockstep a holder still sits out the round's draft
                // forward, which the joint choice's skip path weighs; the ablation
                // keeps its pricing.
                let drafts = b > 1 && (self.rides || !m.holds());
                options.push(vec![self.option(
                    m,
                    b.min(m.room.max(1)),
                    drafts,
                    concurrency,
                )]);
            }
        }
        let cost = self.cost_at(concurrency).into_owned();
        let ride = self.rides;
        let mut choice = joint::choose(&options, &cost, ride);
        let round = self.rounds;
        self.rounds += 1;
        let can_step = |k: usize| options[k].iter().position(|o| o.block == 1);
        let steppers: Vec<usize> = (0..open.len()).filter(|&k| can_step(k).is_some()).collect();
        // The measured regime (drafting against AR steps, whichever measured more
        // tokens per ms) only where the costs are this machine's: under a fixed
        // profile's prices the joint choice already weighs each request's AR step at
        // those prices, and trials timed by the profile's clock only cost rounds.
        let regime = if steppers.is_empty() || !self.cost.is_learning() {
            Regime::Draft
        } else {
            let r = self.regimes.next(concurrency, self.clock_ms);
            self.round_regime = Some(r);
            r
        };
        let mut explored = None;
        if regime == Regime::Ar {
            for &k in &steppers {
                if let Some(j) = can_step(k) {
                    choice.picks[k] = j;
                }
            }
            choice.rate = joint::rate_of(&options, &choice.picks, &cost, ride);
        } else {
            let multi: Vec<usize> = (0..open.len()).filter(|&k| options[k].len() > 1).collect();
            if !multi.is_empty() && self.cost.is_learning() {
                // One request (in turn) measures the most overdue size.
                let k = multi[round as usize % multi.len()];
                let since =
                    |b: usize| self.clock_ms - self.last_ran.get(&b).copied().unwrap_or(0.0);
                if let Some(j) = joint::explore(&options[k], choice.picks[k], &cost, since) {
                    choice.picks[k] = j;
                    explored = Some(k);
                }
            }
        }
        let mut out = Vec::with_capacity(open.len());
        for (k, (i, opts)) in open.iter().enumerate() {
            let o = opts[choice.picks[k]];
            self.last_ran.insert(o.block, self.clock_ms);
            let h = members[*i].history;
            let stepped = regime == Regime::Ar && o.block == 1;
            let rule = if explored == Some(k) {
                Rule::Explore
            } else if stepped && self.regimes.in_trial() {
                Rule::ArTrial
            } else if stepped {
                Rule::ArRegime
            } else if h.is_empty() {
                Rule::ColdStart
            } else {
                Rule::Round
            };
            // An AR step of the AR regime: the measured rates say why, not V − λ·T.
            // Each option's cost as the joint choice weighed it: a drafting option
            // riding the shared forward pays its share of one.
            let share = if ride {
                joint::ride_share(&cost, options.len())
            } else {
                0.0
            };
            let candidates = if stepped {
                Vec::new()
            } else {
                opts.iter()
                    .map(|o| BlockCandidate {
                        block: o.block,
                        value: o.value,
                        cost_ms: o.draft_ms + o.verify_ms + if o.drafts() { share } else { 0.0 },
                        rows_ms: o.rows_ms,
                    })
                    .collect()
            };
            let decision = BlockDecision {
                rule,
                signal: h.signal(),
                candidates,
                rate: (!stepped).then_some(choice.rate),
                measured: stepped.then(|| self.regimes.rates(concurrency)),
                ar_rate: None,
            };
            out.push((*i, (o.block, Some(decision))));
        }
        out
    }
}

/// What a run has learned that the ratio rule weighs, per block size.
pub struct Learned<'a> {
    /// What a request's branch rows are expected to add to a round (ms).
    pub rows_ms: &'a dyn Fn(usize) -> f64,
    /// What its tables' values are scaled by (`BlockPolicy::calibration`).
    pub calibration: &'a dyn Fn(usize) -> f64,
}

impl Learned<'_> {
    /// Nothing learned: the tables and the profile as they are.
    pub const NONE: Learned<'static> = Learned {
        rows_ms: &|_| 0.0,
        calibration: &|_| 1.0,
    };
}

/// The ratio rule on plain data (see [`BlockPolicy::learned_ratio_rule`], which
/// applies it with what the run has learned).
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
