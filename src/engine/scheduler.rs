//! Many concurrent requests, one round at a time: every phase of a round (draft, then
//! verify + branch rows) is one forward over all requests, whatever block size each
//! planned, since rows of different lengths pack without padding. The reference's
//! buckets (one forward per planned block size) remain selectable (`Batching`).
//! Each request keeps its own cache, seed and history.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

use super::adaptive::{self, History, RoundRecord, SurvivalTables};
use super::cost::{CostModel, ForwardShape};
use super::events::{
    BlockCandidate, BlockReason, BranchCount, BranchView, DecodeEvent, EventSink, Mode, Origin,
    PosView, RequestId, RequestStats,
};
use super::online_cost::OnlineCost;
use super::overlap::{self, Branch, BranchKind, BranchOutcome, BranchRoom, RowTable};
use super::regime::{Regime, RegimeChooser};
use super::round;
use super::round_blocks::{self, FixedCosts, RoundOption};
use super::signals::{self, PosSignals, Sampling};
use super::StopReason;
use crate::model::{AttnRule, KvCache, LogitSel, Model, Row, RowBatch, TextTokenizer};
use crate::rng::Rng;

/// How one request is decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeOptions {
    pub mode: Mode,
    /// Fixed block size (LinearSS, and RecGuide without adaptive). 1 degenerates to AR.
    pub block: usize,
    /// RecGuide: fuse correction/continuation branches with verification.
    pub overlap: bool,
    /// RecGuide: choose B per round from verifier history.
    pub adaptive: bool,
    /// The adaptive block size's action space (default {1, 4, 8, 16, 32}, 1 being an
    /// AR step; the reference's is {8, 16, 32}).
    #[serde(default = "default_adaptive_blocks")]
    pub adaptive_blocks: Vec<usize>,
    /// RecGuide: add branch rows only where the cost profile says they pay.
    pub cost_aware: bool,
    /// A draft position is risky when its margin p1 − p2 is below this.
    pub risk_threshold: f32,
    pub row_table: RowTable,
    pub sampling: Sampling,
    pub max_new_tokens: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Recguide,
            block: 32,
            overlap: true,
            adaptive: true,
            adaptive_blocks: default_adaptive_blocks(),
            cost_aware: true,
            risk_threshold: 0.5,
            row_table: RowTable::default(),
            sampling: Sampling::default(),
            max_new_tokens: 256,
        }
    }
}

fn default_adaptive_blocks() -> Vec<usize> {
    adaptive::DEFAULT_BLOCKS.to_vec()
}

impl DecodeOptions {
    pub fn validate(&self) -> Result<()> {
        ensure!(self.block >= 1, "block size must be at least 1 (got 0)");
        ensure!(
            !self.adaptive_blocks.is_empty() && self.adaptive_blocks.iter().all(|&b| b >= 1),
            "adaptive block sizes must be a non-empty list of sizes of at least 1 (got {:?})",
            self.adaptive_blocks
        );
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
            self.sampling.temperature >= 0.0 && self.sampling.temperature.is_finite(),
            "temperature must be a non-negative number"
        );
        Ok(())
    }

    fn overlap_on(&self) -> bool {
        self.mode == Mode::Recguide && self.overlap
    }

    fn adaptive_on(&self) -> bool {
        self.mode == Mode::Recguide && self.adaptive
    }

    /// `fixed:B` or `adaptive`, as events and recordings state it.
    pub fn block_policy(&self) -> String {
        match self.mode {
            Mode::Ar => "fixed:1".into(),
            _ if self.adaptive_on() => "adaptive".into(),
            _ => format!("fixed:{}", self.block),
        }
    }
}

/// A request to decode.
#[derive(Debug, Clone)]
pub struct Submit {
    pub prompt: Vec<u32>,
    pub options: DecodeOptions,
    /// Prompt family tag (math, code, qa, …) carried into events and stats.
    pub family: Option<String>,
}

/// A finished request.
#[derive(Debug, Clone, Serialize)]
pub struct Finished {
    pub id: RequestId,
    pub tokens: Vec<u32>,
    pub text: String,
    pub stop: StopReason,
    pub family: Option<String>,
    pub stats: RequestStats,
}

/// A block size and why (no reason for AR, which emits no `BlockChosen`).
type BlockDecision = (usize, Option<BlockReason>);

/// One live request of a packed round, as the joint choice sees it.
struct RoundMember {
    req: usize,
    options: Vec<RoundOption>,
    /// Decided by the per-request rule (a single option); `None`: chosen jointly.
    fixed: Option<BlockDecision>,
}

/// When a forward started, how long the forward itself took, and what it computed.
struct Timing {
    start: Instant,
    ms: f64,
    shape: ForwardShape,
}

/// Physical forwards of the whole scheduler (each counted once).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ForwardCounts {
    pub prefill: usize,
    pub draft: usize,
    pub verify: usize,
    pub fused: usize,
    pub rows: usize,
    pub query_tokens: usize,
}

/// A branch block to use as the next round's draft.
struct Pending {
    block: Vec<u32>,
    signals: Vec<PosSignals>,
    kind: BranchKind,
}

struct ReqState {
    id: RequestId,
    prompt: Vec<u32>,
    opts: DecodeOptions,
    family: Option<String>,
    cache: KvCache,
    prefilled: bool,
    seed: u32,
    out: Vec<u32>,
    pending: Option<Pending>,
    history: History,
    stats: RequestStats,
    round: usize,
    rng: Rng,
    text: String,
    stream: Option<crate::model::tokenizer::TokenStream>,
    decode_start: Option<Instant>,
}

/// How a round's requests share forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// One forward per phase for every request: rows of different block sizes are
    /// packed side by side (the forward takes ragged rows, so nothing is padded).
    #[default]
    Packed,
    /// The reference's buckets: one forward per phase for each planned block size.
    ByBlock,
}

/// What one request does this round.
struct Plan {
    req: usize,
    block_size: usize,
    block: Vec<u32>,
    draft: Vec<PosSignals>,
    reused: Option<BranchKind>,
    risky: Vec<usize>,
    branches: Vec<Branch>,
}

/// Online hit rates of each branch kind, with a prior (for the cost-aware gate).
#[derive(Debug, Clone, Default)]
struct HitRates {
    counts: BTreeMap<String, BranchCount>,
}

impl HitRates {
    fn rate(&self, kind: BranchKind) -> f64 {
        let (prior, n) = match kind {
            BranchKind::Correction { rank: 1 } => (0.35, 4.0),
            BranchKind::Correction { .. } => (0.2, 4.0),
            BranchKind::Continuation => (0.5, 4.0),
        };
        let c = self.counts.get(&kind.label()).cloned().unwrap_or_default();
        (c.hits as f64 + prior * n) / (c.built as f64 + n)
    }
}

/// The decoding core: owns the model, every request's state and the policies.
pub struct Scheduler {
    model: Model,
    tokenizer: Option<TextTokenizer>,
    tables: SurvivalTables,
    cost: OnlineCost,
    hit_rates: HitRates,
    requests: Vec<ReqState>,
    finished: Vec<Finished>,
    next_id: RequestId,
    mask: u32,
    eos: Vec<u32>,
    counts: ForwardCounts,
    batching: Batching,
    /// Packed rounds run so far (for exploration).
    rounds_run: u64,
    /// ms of rounds run so far (the exploration clock).
    clock_ms: f64,
    /// `clock_ms` when each block size last ran in a jointly chosen round.
    last_ran: BTreeMap<usize, f64>,
    /// ms of this round's forwards the cost model has learned (the rest is overhead).
    round_forward_ms: f64,
    /// Drafting or AR steps, by measured throughput (packed rounds, costs learning).
    regimes: RegimeChooser,
    /// The regime of the round running, if it had adaptive requests to apply it to.
    round_regime: Option<Regime>,
    /// Tokens committed so far by every request.
    committed: usize,
}

/// Share of the run's time each block size may spend on being measured when the rule
/// does not choose it (`round_blocks::explore`): the learned costs must see the sizes
/// the rule has stopped taking, or a slow spell while one ran, or a profile that
/// misprices one, would lock it out for good.
const EXPLORE_SHARE: f64 = 0.02;

impl Scheduler {
    pub fn new(model: Model, tokenizer: Option<TextTokenizer>) -> Self {
        let mask = model.config().mask_token_id();
        let eos = model.config().eos_token_ids();
        Self {
            model,
            tokenizer,
            tables: SurvivalTables::builtin(),
            cost: OnlineCost::new(CostModel::load_default()),
            hit_rates: HitRates::default(),
            requests: Vec::new(),
            finished: Vec::new(),
            next_id: 1,
            mask,
            eos,
            counts: ForwardCounts::default(),
            rounds_run: 0,
            clock_ms: 0.0,
            last_ran: BTreeMap::new(),
            round_forward_ms: 0.0,
            regimes: RegimeChooser::default(),
            round_regime: None,
            committed: 0,
            batching: Batching::default(),
        }
    }

    pub fn with_batching(mut self, batching: Batching) -> Self {
        self.batching = batching;
        self
    }

    pub fn with_tables(mut self, tables: SurvivalTables) -> Self {
        self.tables = tables;
        self
    }

    /// The cost profile decisions start from (refitted online unless turned off).
    pub fn with_cost(mut self, cost: CostModel) -> Self {
        self.cost = OnlineCost::new(cost);
        self
    }

    /// Whether the cost model learns from this run's forwards (on by default; off
    /// makes block choices reproducible).
    pub fn with_cost_learning(mut self, on: bool) -> Self {
        self.cost = self.cost.learning(on);
        self
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn cost(&self) -> &CostModel {
        self.cost.model()
    }

    pub fn tables(&self) -> &SurvivalTables {
        &self.tables
    }

    pub fn counts(&self) -> &ForwardCounts {
        &self.counts
    }

    /// Requests still decoding.
    pub fn active(&self) -> usize {
        self.requests.len()
    }

    /// Finished requests so far, in finishing order (taken out of the scheduler).
    pub fn take_finished(&mut self) -> Vec<Finished> {
        std::mem::take(&mut self.finished)
    }

    /// Queues a request; it is prefilled at the next step.
    pub fn submit(&mut self, s: Submit, sink: &mut dyn EventSink) -> Result<RequestId> {
        let id = self.next_id;
        self.submit_with_id(id, s, sink)?;
        Ok(id)
    }

    /// Queues a request under an id chosen by the caller (the engine thread's handle).
    pub fn submit_with_id(
        &mut self,
        id: RequestId,
        s: Submit,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        s.options.validate()?;
        let max_pos = self.model.config().max_position_embeddings;
        ensure!(!s.prompt.is_empty(), "the prompt is empty");
        ensure!(
            s.prompt.len() < max_pos,
            "the prompt has {} tokens but the model's context is {max_pos}",
            s.prompt.len()
        );
        let vocab = self.model.config().vocab_size;
        if let Some(&bad) = s.prompt.iter().find(|&&t| t as usize >= vocab) {
            bail!("prompt token id {bad} is not below the vocabulary size {vocab}");
        }
        self.next_id = self.next_id.max(id + 1);
        sink.emit(DecodeEvent::RequestStarted {
            req: id,
            mode: s.options.mode,
            block_policy: s.options.block_policy(),
            overlap: s.options.overlap_on(),
            prompt_tokens: s.prompt.len(),
            max_new_tokens: s.options.max_new_tokens,
            family: s.family.clone(),
        });
        self.requests.push(ReqState {
            id,
            cache: self.model.new_cache(),
            prefilled: false,
            seed: 0,
            out: Vec::new(),
            pending: None,
            history: History::default(),
            stats: RequestStats {
                prompt_tokens: s.prompt.len(),
                ..RequestStats::default()
            },
            round: 0,
            rng: Rng::new(s.options.sampling.seed ^ id),
            text: String::new(),
            stream: self.tokenizer.as_ref().map(TextTokenizer::stream),
            decode_start: None,
            prompt: s.prompt,
            opts: s.options,
            family: s.family,
        });
        Ok(())
    }

    /// Stops a request between rounds; its cache is dropped.
    pub fn cancel(&mut self, id: RequestId, sink: &mut dyn EventSink) -> bool {
        match self.requests.iter().position(|r| r.id == id) {
            Some(i) => {
                self.finish(i, StopReason::Cancelled, sink);
                true
            }
            None => false,
        }
    }

    /// Cancels every live request.
    pub fn cancel_all(&mut self, sink: &mut dyn EventSink) {
        while !self.requests.is_empty() {
            self.finish(0, StopReason::Cancelled, sink);
        }
    }

    /// Changes the options of every live request from its next round on.
    pub fn set_options(&mut self, f: impl Fn(&mut DecodeOptions)) -> Result<()> {
        for r in &mut self.requests {
            let mut o = r.opts.clone();
            f(&mut o);
            o.validate()?;
            if o.mode != r.opts.mode || o.block != r.opts.block {
                r.pending = None;
            }
            r.opts = o;
        }
        Ok(())
    }

    /// Runs until every request has finished.
    pub fn run_to_completion(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        while self.active() > 0 {
            self.step(sink)?;
        }
        Ok(())
    }

    /// One round for every live request (prefilling new ones first).
    pub fn step(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        self.prefill(sink)?;
        // Requests that stopped at their first token leave before indices are planned.
        self.finish_done(sink);
        let start = Instant::now();
        self.round_forward_ms = 0.0;
        self.round_regime = None;
        let committed = self.committed;
        let concurrency = self.requests.len();
        let mut chosen = match self.batching {
            Batching::Packed => self.round_blocks(concurrency),
            Batching::ByBlock => vec![None; concurrency],
        };
        let plans: Vec<Plan> = (0..self.requests.len())
            .filter_map(|i| self.plan(i, concurrency, chosen[i].take(), sink))
            .collect();
        let groups: Vec<Vec<Plan>> = match self.batching {
            Batching::Packed => vec![plans],
            Batching::ByBlock => {
                let mut buckets: BTreeMap<usize, Vec<Plan>> = BTreeMap::new();
                for p in plans {
                    buckets.entry(p.block_size).or_default().push(p);
                }
                buckets.into_values().collect()
            }
        };
        for mut group in groups.into_iter().filter(|g| !g.is_empty()) {
            self.draft_group(&mut group, sink)?;
            for p in &mut group {
                self.plan_branches(p, concurrency);
            }
            self.verify_group(group, sink)?;
        }
        self.finish_done(sink);
        let round_ms = start.elapsed().as_secs_f64() * 1e3;
        self.clock_ms += round_ms;
        if let Some(regime) = self.round_regime {
            let tokens = self.committed - committed;
            self.regimes.record(concurrency, regime, tokens, round_ms);
        }
        if self.round_forward_ms > 0.0 {
            let outside = round_ms - self.round_forward_ms;
            self.cost.observe_round(outside.max(0.0));
        }
        Ok(())
    }

    /// One physical forward over the caches of `reqs` (row `cache` indices refer to
    /// positions in `reqs`): counted once, reported as a `Forward` event.
    fn forward(
        &mut self,
        phase: Phase,
        batch: RowBatch,
        reqs: &[usize],
        sink: &mut dyn EventSink,
    ) -> Result<(Vec<candle_core::Tensor>, Timing)> {
        let shape = ForwardShape {
            rows: batch.rows.len(),
            tokens: batch.num_tokens(),
            token_ctx: batch
                .rows
                .iter()
                .map(|r| r.tokens.len() * self.requests[reqs[r.cache]].cache.len())
                .sum(),
            draft_tokens: batch
                .rows
                .iter()
                .map(|r| r.lora_from.map_or(0, |f| r.tokens.len().saturating_sub(f)))
                .sum(),
        };
        let start = Instant::now();
        let logits = {
            let mut caches = caches_of(&mut self.requests, reqs);
            self.model
                .forward(&batch, &mut caches)
                .with_context(|| format!("{} forward", phase.name()))?
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let c = &mut self.counts;
        match phase {
            Phase::Prefill => c.prefill += 1,
            Phase::Draft => c.draft += 1,
            Phase::Verify => c.verify += 1,
            Phase::Fused => c.fused += 1,
        }
        if phase != Phase::Prefill {
            c.rows += batch.rows.len();
            c.query_tokens += batch.num_tokens();
        }
        sink.emit(DecodeEvent::Forward {
            phase: phase.name().into(),
            rows: batch.rows.len(),
            query_tokens: batch.num_tokens(),
            requests: reqs.len(),
            ms,
        });
        Ok((logits, Timing { start, ms, shape }))
    }

    fn choose(
        &mut self,
        req: usize,
        logits: &candle_core::Tensor,
    ) -> Result<(Vec<PosSignals>, Vec<u32>)> {
        let r = &mut self.requests[req];
        signals::signals_and_choices(logits, self.mask, r.opts.sampling, &mut r.rng)
    }

    /// Batched prefill of every new request: one forward, first token chosen.
    fn prefill(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        let new: Vec<usize> = (0..self.requests.len())
            .filter(|&i| !self.requests[i].prefilled)
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let rows: Vec<Row> = new
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                Row::new(k, self.requests[i].prompt.clone(), AttnRule::Causal)
                    .commit()
                    .logits(LogitSel::Last)
            })
            .collect();
        let (logits, Timing { ms, .. }) =
            self.forward(Phase::Prefill, RowBatch::new(rows), &new, sink)?;
        for (k, &i) in new.iter().enumerate() {
            let (_, choice) = self.choose(i, &logits[k])?;
            let seed = choice[0];
            let r = &mut self.requests[i];
            r.prefilled = true;
            r.seed = seed;
            r.stats.prefill_secs = ms / 1e3;
            r.decode_start = Some(Instant::now());
            sink.emit(DecodeEvent::Prefilled {
                req: r.id,
                prompt_tokens: r.prompt.len(),
                seed,
                ms,
            });
            self.commit(i, 0, &[seed], &[Origin::Prefill], sink);
        }
        Ok(())
    }

    /// Appends emitted tokens, streams their text and emits `Committed`; stopping is
    /// decided later by `stop_reason`.
    fn commit(
        &mut self,
        i: usize,
        round: usize,
        tokens: &[u32],
        origins: &[Origin],
        sink: &mut dyn EventSink,
    ) {
        let r = &mut self.requests[i];
        let text = match &mut r.stream {
            Some(s) => s.push(tokens).unwrap_or_default(),
            None => String::new(),
        };
        r.text.push_str(&text);
        r.out.extend_from_slice(tokens);
        self.committed += tokens.len();
        r.stats.new_tokens = r.out.len();
        r.stats.decode_tokens = r.out.len().saturating_sub(1);
        sink.emit(DecodeEvent::Committed {
            req: r.id,
            round,
            tokens: tokens.to_vec(),
            origins: origins.to_vec(),
            text,
        });
    }

    /// Why request `i` must stop now, if it must.
    fn stop_reason(&self, i: usize) -> Option<StopReason> {
        let r = &self.requests[i];
        if r.out.last().is_some_and(|t| self.eos.contains(t)) {
            return Some(StopReason::Eos);
        }
        if r.out.len() >= r.opts.max_new_tokens {
            return Some(StopReason::MaxTokens);
        }
        // The seed still needs a slot in the context.
        if r.cache.len() + 1 > self.model.config().max_position_embeddings {
            return Some(StopReason::Context);
        }
        None
    }

    fn finish_done(&mut self, sink: &mut dyn EventSink) {
        let mut i = 0;
        while i < self.requests.len() {
            if self.requests[i].prefilled {
                if let Some(stop) = self.stop_reason(i) {
                    self.finish(i, stop, sink);
                    continue;
                }
            }
            i += 1;
        }
    }

    fn finish(&mut self, i: usize, stop: StopReason, sink: &mut dyn EventSink) {
        let mut r = self.requests.remove(i);
        if let Some(s) = &mut r.stream {
            let rest = s.finish().unwrap_or_default();
            r.text.push_str(&rest);
        }
        r.stats.decode_secs = r.decode_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let text = match &self.tokenizer {
            Some(t) => t.decode(&r.out).unwrap_or_else(|_| r.text.clone()),
            None => String::new(),
        };
        sink.emit(DecodeEvent::RequestFinished {
            req: r.id,
            stop,
            text: text.clone(),
            stats: r.stats.clone(),
        });
        self.finished.push(Finished {
            id: r.id,
            tokens: r.out,
            text,
            stop,
            family: r.family,
            stats: r.stats,
        });
    }

    /// Whether request `i` takes part in this round.
    fn live(&self, i: usize) -> bool {
        self.requests[i].prefilled && self.stop_reason(i).is_none()
    }

    /// Block sizes of a packed round: the adaptive ones chosen together
    /// (`round_blocks`), or all AR steps when the measured regime says so (`regime`),
    /// now and then with one request measuring a size the rule did not pick
    /// (`round_blocks::explore`); the others by the per-request rule. `None` for
    /// requests not in the round.
    fn round_blocks(&mut self, concurrency: usize) -> Vec<Option<BlockDecision>> {
        let mut out = vec![None; self.requests.len()];
        let members = self.round_members(concurrency);
        for m in &members {
            out[m.req] = m.fixed.clone();
        }
        if members.iter().all(|m| m.fixed.is_some()) {
            return out;
        }
        let options: Vec<Vec<RoundOption>> = members.iter().map(|m| m.options.clone()).collect();
        let cost = self.cost.model();
        let fixed = FixedCosts {
            forward_ms: cost.fixed_ms,
            per_round_ms: cost.per_round_ms,
        };
        let mut choice = round_blocks::choose(&options, fixed);
        let round = self.rounds_run;
        self.rounds_run += 1;
        let mut explored = None;
        let open: Vec<usize> = (0..members.len())
            .filter(|&m| members[m].fixed.is_none() && members[m].options.len() > 1)
            .collect();
        let steps = |m: usize| options[m].iter().position(|o| o.block == 1);
        let regime = if self.cost.is_learning() && open.iter().any(|&m| steps(m).is_some()) {
            let regime = self.regimes.next(concurrency);
            self.round_regime = Some(regime);
            regime
        } else {
            Regime::Draft
        };
        if regime == Regime::Ar {
            for &m in &open {
                if let Some(k) = steps(m) {
                    choice.picks[m] = k;
                }
            }
            choice.rate = round_blocks::rate_of(&options, &choice.picks, fixed);
        } else if self.cost.is_learning() && !open.is_empty() {
            // One request (in turn) measures the most overdue size.
            let m = open[round as usize % open.len()];
            let since = |b: usize| self.clock_ms - self.last_ran.get(&b).copied().unwrap_or(0.0);
            let pick = choice.picks[m];
            if let Some(k) = round_blocks::explore(&options[m], pick, fixed, EXPLORE_SHARE, since) {
                choice.picks[m] = k;
                explored = Some(m);
            }
        }
        for (member, &k) in members.iter().zip(&choice.picks) {
            if member.fixed.is_none() {
                self.last_ran.insert(member.options[k].block, self.clock_ms);
            }
        }
        for (m, (member, &k)) in members.into_iter().zip(&choice.picks).enumerate() {
            if member.fixed.is_some() {
                continue;
            }
            let (i, opts) = (member.req, member.options);
            let h = &self.requests[i].history;
            let stepped = regime == Regime::Ar && opts[k].block == 1;
            let rule = if explored == Some(m) {
                "explore"
            } else if stepped && self.regimes.in_trial() {
                "ar_trial"
            } else if stepped {
                "ar_regime"
            } else if h.is_empty() {
                "cold_start"
            } else {
                "round"
            };
            // An AR step of the AR regime: the measured rates say why, not V − λ·T.
            let candidates = if stepped {
                Vec::new()
            } else {
                opts.iter()
                    .map(|o| BlockCandidate {
                        block: o.block,
                        value: o.value,
                        cost_ms: o.cost(),
                    })
                    .collect()
            };
            let reason = BlockReason {
                rule: rule.into(),
                signal: h.signal(),
                candidates,
                rate: (!stepped).then_some(choice.rate),
                measured: stepped.then(|| self.regimes.rates(concurrency)),
            };
            out[i] = Some((opts[k].block, Some(reason)));
        }
        out
    }

    /// The round's live requests: the adaptive ones without a reused draft get an
    /// option per size of their action space; the others a single option, their
    /// per-request size.
    fn round_members(&self, concurrency: usize) -> Vec<RoundMember> {
        let max_pos = self.model.config().max_position_embeddings;
        let cost = self.cost.model();
        let mut members = Vec::new();
        for (i, r) in self.requests.iter().enumerate() {
            if !self.live(i) {
                continue;
            }
            let ctx = r.cache.len();
            let room = max_pos - ctx;
            let (signal, stratum) = (r.history.signal(), r.history.stratum());
            let option = |b: usize, drafts: bool| RoundOption {
                block: b,
                value: if self.tables.covers(b) {
                    self.tables.value(b, signal, stratum.as_deref())
                } else {
                    1.0
                },
                draft_ms: if drafts {
                    cost.draft_row_ms(b, ctx)
                } else {
                    0.0
                },
                verify_ms: cost.row_ms(b, ctx),
            };
            let joint = r.opts.adaptive_on() && r.pending.is_none();
            let mut opts: Vec<RoundOption> = Vec::new();
            if joint {
                let cap = if r.history.is_empty() {
                    adaptive::cold_start(concurrency)
                } else {
                    usize::MAX
                };
                let mut blocks = r.opts.adaptive_blocks.clone();
                blocks.sort_unstable();
                blocks.dedup();
                opts = blocks
                    .into_iter()
                    .filter(|&b| b <= cap && b <= room && self.tables.covers(b))
                    .map(|b| option(b, b > 1))
                    .collect();
            }
            let mut fixed = None;
            if opts.is_empty() {
                let decision = self.per_request_block(i, concurrency);
                let b = decision.0.min(room);
                opts = vec![option(b, b > 1 && r.pending.is_none())];
                fixed = Some(decision);
            }
            members.push(RoundMember {
                req: i,
                options: opts,
                fixed,
            });
        }
        members
    }

    /// The per-request block size: fixed, AR, a reused draft's, or the ratio rule.
    fn per_request_block(&self, i: usize, concurrency: usize) -> BlockDecision {
        let r = &self.requests[i];
        let ratio_rule = || {
            adaptive::choose_block(
                &r.history,
                &self.tables,
                self.cost.model(),
                &r.opts.adaptive_blocks,
                concurrency,
                r.cache.len(),
            )
        };
        match r.opts.mode {
            Mode::Ar => (1, None),
            _ if r.pending.is_some() => {
                let len = r.pending.as_ref().map_or(1, |p| p.block.len());
                let want = if r.opts.adaptive_on() {
                    ratio_rule().0
                } else {
                    r.opts.block
                };
                // A reused draft cost no draft forward: verify it rather than drop it
                // for an AR step.
                let b = if want == 1 { len } else { len.min(want) };
                (b, Some(simple_reason("reused")))
            }
            _ if r.opts.adaptive_on() => {
                let (b, why) = ratio_rule();
                (b, Some(why))
            }
            _ => (r.opts.block, Some(simple_reason("fixed"))),
        }
    }

    /// Block size and draft source of request `i` for this round (`chosen` when the
    /// round already decided it).
    fn plan(
        &mut self,
        i: usize,
        concurrency: usize,
        chosen: Option<BlockDecision>,
        sink: &mut dyn EventSink,
    ) -> Option<Plan> {
        if !self.live(i) {
            return None;
        }
        let room = self.model.config().max_position_embeddings - self.requests[i].cache.len();
        let (mut b, mut reason) = match chosen {
            Some(decision) => decision,
            None => self.per_request_block(i, concurrency),
        };
        if b > room {
            b = room;
            reason = Some(simple_reason("context"));
        }
        let r = &mut self.requests[i];
        r.round += 1;
        if let Some(reason) = reason {
            sink.emit(DecodeEvent::BlockChosen {
                req: r.id,
                round: r.round,
                block: b,
                reason,
            });
        }
        let (block, draft, reused) = match r.pending.take() {
            Some(p) => {
                let mut block = p.block;
                let mut sig = p.signals;
                block.truncate(b);
                sig.truncate(b - 1);
                r.stats.saved_drafts += 1;
                (block, sig, Some(p.kind))
            }
            None => (vec![r.seed], Vec::new(), None),
        };
        Some(Plan {
            req: i,
            block_size: b,
            block,
            draft,
            reused,
            risky: Vec::new(),
            branches: Vec::new(),
        })
    }

    /// One bidirectional draft forward for every plan of the group that needs one.
    fn draft_group(&mut self, group: &mut [Plan], sink: &mut dyn EventSink) -> Result<()> {
        let need: Vec<usize> = (0..group.len())
            .filter(|&k| group[k].block_size > 1 && group[k].reused.is_none())
            .collect();
        if !need.is_empty() {
            let reqs: Vec<usize> = need.iter().map(|&k| group[k].req).collect();
            let rows: Vec<Row> = need
                .iter()
                .enumerate()
                .map(|(slot, &k)| {
                    let b = group[k].block_size;
                    let mut tokens = vec![self.requests[group[k].req].seed];
                    tokens.extend(std::iter::repeat_n(self.mask, b - 1));
                    Row::new(slot, tokens, AttnRule::Bidirectional)
                        .lora_from(0)
                        .logits(LogitSel::Range {
                            start: 1,
                            len: b - 1,
                        })
                })
                .collect();
            let (logits, timing) = self.forward(Phase::Draft, RowBatch::new(rows), &reqs, sink)?;
            for (slot, &k) in need.iter().enumerate() {
                let req = group[k].req;
                let (sig, choice) = self.choose(req, &logits[slot])?;
                group[k].block.extend_from_slice(&choice);
                group[k].draft = sig;
                let st = &mut self.requests[req].stats;
                st.draft_forwards += 1;
                st.rows += 1;
                st.query_tokens += group[k].block_size;
            }
            self.learn_cost(&timing);
        }
        let detail = sink.detail();
        for p in group.iter_mut() {
            let r = &self.requests[p.req];
            p.risky = overlap::risky_positions(&p.draft, r.opts.risk_threshold);
            if p.block_size > 1 {
                sink.emit(DecodeEvent::Drafted {
                    req: r.id,
                    round: r.round,
                    block: p.block.clone(),
                    margins: p.draft.iter().map(|s| s.margin).collect(),
                    risky: p.risky.clone(),
                    reused: p.reused,
                    detail: if detail { views(&p.draft) } else { Vec::new() },
                });
            }
        }
        Ok(())
    }

    /// Branch rows for one plan (RecGuide overlap), gated by cost when asked.
    fn plan_branches(&self, p: &mut Plan, concurrency: usize) {
        let r = &self.requests[p.req];
        if !r.opts.overlap_on() || p.block_size < 2 {
            return;
        }
        let max_pos = self.model.config().max_position_embeddings;
        let ctx = r.cache.len();
        let mut banned = vec![self.mask];
        banned.extend_from_slice(&self.eos);
        let room = BranchRoom {
            context: max_pos - ctx,
            budget: r.opts.max_new_tokens.saturating_sub(r.out.len()),
        };
        let mut branches = overlap::plan_branches(
            &p.block,
            &p.draft,
            &p.risky,
            r.opts.row_table,
            self.mask,
            &banned,
            room,
        );
        if r.opts.cost_aware {
            // A branch pays when its expected saving (hit rate × this request's share of
            // a draft forward) covers the cost of its extra row in the fused forward.
            let cost = self.cost.model();
            let saving =
                cost.draft_row_ms(p.block_size, ctx) + cost.fixed_ms / concurrency.max(1) as f64;
            branches.retain(|br| {
                self.hit_rates.rate(br.kind) * saving >= cost.row_ms(br.tokens.len(), ctx)
            });
        }
        p.branches = branches;
    }

    /// One fused forward: every plan's verify row (committing) plus its branch rows.
    fn verify_group(&mut self, group: Vec<Plan>, sink: &mut dyn EventSink) -> Result<()> {
        let reqs: Vec<usize> = group.iter().map(|p| p.req).collect();
        let mut rows = Vec::new();
        // (first row index, number of branch rows) per plan.
        let mut layout = Vec::with_capacity(group.len());
        for (slot, p) in group.iter().enumerate() {
            layout.push((rows.len(), p.branches.len()));
            rows.push(
                Row::new(slot, p.block.clone(), AttnRule::Causal)
                    .commit()
                    .logits(LogitSel::All),
            );
            rows.extend(p.branches.iter().map(|br| br.row(slot)));
        }
        let phase = if group.iter().any(|p| !p.branches.is_empty()) {
            Phase::Fused
        } else {
            Phase::Verify
        };
        let (logits, timing) = self.forward(phase, RowBatch::new(rows), &reqs, sink)?;
        let detail = sink.detail();
        for (p, &(first, nbranch)) in group.into_iter().zip(&layout) {
            let i = p.req;
            let (vsig, vtok) = self.choose(i, &logits[first])?;
            let mut predicted = Vec::with_capacity(nbranch);
            for k in 0..nbranch {
                predicted.push(self.choose(i, &logits[first + 1 + k])?);
            }
            self.resolve(p, vsig, vtok, predicted, detail, sink);
        }
        self.learn_cost(&timing);
        Ok(())
    }

    /// The cost model learns the forward's time with its signals and verdicts.
    fn learn_cost(&mut self, t: &Timing) {
        let ms = t.start.elapsed().as_secs_f64() * 1e3;
        self.cost.observe(&t.shape, ms);
        self.round_forward_ms += ms;
    }

    /// Applies the verdict: acceptance, crop, emit, branch reuse, history, stats.
    fn resolve(
        &mut self,
        p: Plan,
        vsig: Vec<PosSignals>,
        vtok: Vec<u32>,
        predicted: Vec<(Vec<PosSignals>, Vec<u32>)>,
        detail: bool,
        sink: &mut dyn EventSink,
    ) {
        let (i, b) = (p.req, p.block_size);
        let eos = self.eos.clone();
        let verdict = round::verify(&p.block, &vtok);
        let nrows = 1 + p.branches.len();
        let r = &mut self.requests[i];
        let (id, rnd) = (r.id, r.round);
        let ctx = r.cache.len() - b;
        let _ = r.cache.truncate(ctx + verdict.advance());
        let budget = r.opts.max_new_tokens.saturating_sub(r.out.len());
        let (kept, _) = round::truncate_emitted(verdict.emitted(), &eos, budget);
        let origins: Vec<Origin> = (0..kept.len())
            .map(|k| match (k < verdict.accepted, p.reused.is_some()) {
                (true, true) => Origin::Reused,
                (true, false) => Origin::Draft,
                _ => Origin::Bonus,
            })
            .collect();
        let st = &mut r.stats;
        st.rounds += 1;
        st.rows += nrows;
        st.query_tokens += p.block.len() + p.branches.iter().map(|x| x.tokens.len()).sum::<usize>();
        if p.branches.is_empty() {
            st.verify_forwards += 1;
        } else {
            st.fused_forwards += 1;
        }
        st.record_accept(verdict.advance());
        *st.blocks.entry(b.to_string()).or_default() += 1;
        r.history.push(RoundRecord {
            block: b,
            advance: verdict.advance(),
            full: verdict.first_reject.is_none(),
            verify_entropy: adaptive::verify_entropy(
                &vsig.iter().map(|s| s.entropy).collect::<Vec<_>>(),
                verdict.accepted,
            ),
        });
        r.seed = verdict.bonus;
        if !p.branches.is_empty() {
            sink.emit(DecodeEvent::BranchesBuilt {
                req: id,
                round: rnd,
                branches: p
                    .branches
                    .iter()
                    .zip(&predicted)
                    .map(|(br, (_, tok))| BranchView {
                        kind: br.kind,
                        at: br.at,
                        alt: br.alt,
                        tokens: br.tokens.len(),
                        block: match br.alt {
                            Some(alt) => std::iter::once(alt)
                                .chain(tok[1..].iter().copied())
                                .collect(),
                            None => tok.clone(),
                        },
                    })
                    .collect(),
            });
        }
        sink.emit(DecodeEvent::Verified {
            req: id,
            round: rnd,
            accepted: verdict.accepted,
            first_reject: verdict.first_reject,
            verifier_tokens: verdict.verifier_tokens.clone(),
            bonus: verdict.bonus,
            detail: if detail { views(&vsig) } else { Vec::new() },
        });
        let ends =
            kept.len() < verdict.emitted().len() || kept.last().is_some_and(|t| eos.contains(t));
        if !p.branches.is_empty() {
            let cont_first = p
                .branches
                .iter()
                .position(|br| br.kind == BranchKind::Continuation)
                .map(|k| predicted[k].1[0]);
            let outcome = overlap::resolve(&p.branches, &verdict, cont_first);
            for br in &p.branches {
                let label = br.kind.label();
                r.stats.branches.entry(label.clone()).or_default().built += 1;
                self.hit_rates.counts.entry(label).or_default().built += 1;
            }
            if let BranchOutcome::Hit { index, kind } = outcome {
                r.stats.branches.entry(kind.label()).or_default().hits += 1;
                self.hit_rates.counts.entry(kind.label()).or_default().hits += 1;
                if !ends {
                    let (sig, tok) = &predicted[index];
                    r.pending = Some(Pending {
                        block: overlap::reused_block(&p.branches[index], tok, verdict.bonus),
                        signals: sig[1..].to_vec(),
                        kind,
                    });
                }
            }
            sink.emit(DecodeEvent::BranchResolved {
                req: id,
                round: rnd,
                outcome,
            });
        }
        self.commit(i, rnd, &kept, &origins, sink);
    }
}

/// What a physical forward does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prefill,
    Draft,
    Verify,
    /// Verification with branch rows.
    Fused,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Draft => "draft",
            Phase::Verify => "verify",
            Phase::Fused => "fused",
        }
    }
}

/// Mutable caches of the given requests, in that order (each request at most once).
fn caches_of<'a>(requests: &'a mut [ReqState], idx: &[usize]) -> Vec<&'a mut KvCache> {
    let mut slots: Vec<Option<&mut KvCache>> =
        requests.iter_mut().map(|r| Some(&mut r.cache)).collect();
    idx.iter().filter_map(|&i| slots[i].take()).collect()
}

fn simple_reason(rule: &str) -> BlockReason {
    BlockReason {
        rule: rule.into(),
        signal: None,
        candidates: Vec::new(),
        rate: None,
        measured: None,
    }
}

fn views(sig: &[PosSignals]) -> Vec<PosView> {
    sig.iter()
        .map(|s| PosView {
            margin: s.margin,
            confidence: s.confidence,
            entropy: s.entropy,
            top: s.top.iter().take(5).copied().collect(),
        })
        .collect()
}
