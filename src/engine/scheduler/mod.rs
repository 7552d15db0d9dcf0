//! Many concurrent requests, one round at a time: prefill the new ones, ask the block
//! policy for each request's block size, draft, verify (with the branch rows of
//! RecGuide's overlap), commit. Every phase of a round is one forward over all
//! requests, whatever block size each planned, since rows of different lengths pack
//! without padding. While some request verifies a block it already holds, the others'
//! fresh drafts ride that forward and verify in the next (their round is `carried`);
//! lockstep rounds (`Batching::Lockstep`) and the reference's buckets (one forward per
//! planned block size, `Batching::ByBlock`) remain selectable. Each request keeps its
//! own cache, seed and history (`request`, prefill included); what it does in a round
//! is its `plan`; a drafted block's branch rows are `branches`; applying a verdict is
//! `resolve`.

mod branches;
mod diffusion;
mod plan;
mod request;
mod resolve;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

pub use diffusion::commit_positions;
use plan::Plan;
pub use request::{Finished, Submit};
use request::{Pending, ReqState};

use super::ablation::Ablation;
use super::backbone::Backbone;
use super::cost::{CostModel, ForwardShape, Pricing};
use super::events::{BlockDecision, DecodeEvent, EventSink, Mode, Phase, RequestId};
use super::options::{Batching, DecodeOptions};
use super::policy::{self, Beliefs, Member, Observation, SurvivalTables};
use super::signals::{self, PosSignals};
use crate::model::{KvCache, Row, RowBatch, TextTokenizer};

/// Physical forwards of the whole scheduler (each counted once).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ForwardCounts {
    pub prefill: usize,
    pub draft: usize,
    pub verify: usize,
    pub fused: usize,
    /// Block diffusion: denoising forwards (cache writes riding along) and forwards
    /// of cache writes alone.
    pub denoise: usize,
    pub refresh: usize,
    pub rows: usize,
    pub query_tokens: usize,
    /// Decode forwards priced by the cost profile the run started from (not the
    /// online refit): the time they would take on the profile's machine.
    pub modeled_ms: f64,
}

/// When a forward started, what it computed and its price on the profile's machine.
struct Timing {
    start: Instant,
    shape: ForwardShape,
    modeled_ms: f64,
    /// The forward alone (what the screen's measured rates count).
    forward_ms: f64,
}

/// The decoding core: owns the model, every request's state and what the block policy
/// has learned.
pub struct Scheduler {
    model: std::sync::Arc<dyn Backbone>,
    tokenizer: Option<TextTokenizer>,
    beliefs: Beliefs,
    /// What the beliefs were built from (each builder replaces one of them).
    tables: SurvivalTables,
    pricing: Pricing,
    requests: Vec<ReqState>,
    finished: Vec<Finished>,
    next_id: RequestId,
    mask: u32,
    eos: Vec<u32>,
    counts: ForwardCounts,
    batching: Batching,
    ablation: Ablation,
    /// Tokens committed so far by every request.
    committed: usize,
    /// What the beliefs observed this step, reported when it ends (`Learned`).
    journal: Vec<Observation>,
    /// Steps whose observations were reported so far.
    steps: u64,
}

impl Scheduler {
    /// A scheduler priced by the built-in CPU profile (no I/O: the caller passes the
    /// prices it decides by with `with_pricing`).
    pub fn new(model: impl Backbone + 'static, tokenizer: Option<TextTokenizer>) -> Self {
        let mask = model.config().mask_token_id();
        let eos = model.config().eos_token_ids();
        let (tables, pricing) = (SurvivalTables::builtin(), Pricing::builtin());
        Self {
            model: std::sync::Arc::new(model),
            tokenizer,
            beliefs: Beliefs::new(tables.clone(), &pricing),
            tables,
            pricing,
            requests: Vec::new(),
            finished: Vec::new(),
            next_id: 1,
            mask,
            eos,
            counts: ForwardCounts::default(),
            batching: Batching::default(),
            ablation: Ablation::SHIPPED,
            committed: 0,
            journal: Vec::new(),
            steps: 0,
        }
    }

    pub fn with_batching(mut self, batching: Batching) -> Self {
        self.batching = batching;
        self
    }

    /// What of RecGuide to turn off for every request (bench's ablations; before the
    /// first request).
    pub fn with_ablation(mut self, ablation: Ablation) -> Self {
        self.ablation = ablation;
        self
    }

    /// The survival tables the policy values block sizes by (before the first round).
    pub fn with_tables(mut self, tables: SurvivalTables) -> Self {
        self.tables = tables;
        self.beliefs = Beliefs::new(self.tables.clone(), &self.pricing);
        self
    }

    /// The prices decisions start from, whether they learn, and the clock (before the
    /// first round): a `--cost-profile` choice.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = pricing;
        self.beliefs = Beliefs::new(self.tables.clone(), &self.pricing);
        self
    }

    pub fn model(&self) -> &dyn Backbone {
        self.model.as_ref()
    }

    pub fn beliefs(&self) -> &Beliefs {
        &self.beliefs
    }

    pub fn cost(&self) -> &CostModel {
        self.beliefs.cost()
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

    /// Changes the options of every live request from its next round on.
    pub fn set_options(&mut self, options: &DecodeOptions) -> Result<()> {
        options.validate()?;
        for r in &mut self.requests {
            // A request diffuses from its start or not at all (its block and cache
            // follow a different rhythm): to or from diffusion is for new requests.
            if (options.mode == Mode::Diffusion) != (r.opts.mode == Mode::Diffusion) {
                continue;
            }
            let o = DecodeOptions {
                max_new_tokens: r.opts.max_new_tokens,
                sampling: r.opts.sampling,
                ..options.clone()
            };
            if o.mode != r.opts.mode || o.blocks != r.opts.blocks {
                r.pending = None;
            }
            r.history.read_outcome(self.ablation.outcome_signal);
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

    /// One round for every live request (prefilling new ones first): a block of the
    /// speculating ones, a step of the diffusing ones.
    pub fn step(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        let stepped = self.step_requests(sink);
        // What the beliefs observed goes out, a failed step's too (they learned it),
        // before the requests it ended finish: a recording that stops when they do
        // still holds it.
        if !self.journal.is_empty() {
            self.steps += 1;
            sink.emit(DecodeEvent::Learned {
                step: self.steps,
                start: (self.steps == 1).then(|| Box::new(self.beliefs.start())),
                observations: std::mem::take(&mut self.journal),
            });
        }
        stepped?;
        self.finish_done(sink);
        Ok(())
    }

    fn step_requests(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        self.prefill(sink)?;
        // Requests that stopped at their first token leave before indices are planned.
        self.finish_done(sink);
        let (diffusing, live): (Vec<usize>, Vec<usize>) = (0..self.requests.len())
            .filter(|&i| self.live(i))
            .partition(|&i| self.requests[i].opts.mode == Mode::Diffusion);
        if !diffusing.is_empty() {
            self.diffusion_step(&diffusing, sink)?;
        }
        if !live.is_empty() {
            self.speculate(live, sink)?;
        }
        Ok(())
    }

    /// One round of drafting and verification for the speculating requests `live`.
    fn speculate(&mut self, live: Vec<usize>, sink: &mut dyn EventSink) -> Result<()> {
        let start = Instant::now();
        let modeled_before = self.counts.modeled_ms;
        let committed = self.committed;
        let max_pos = self.model.config().max_position_embeddings;
        let members: Vec<Member> = live
            .iter()
            .map(|&i| {
                let r = &self.requests[i];
                Member {
                    options: &r.opts,
                    history: &r.history,
                    ctx: r.cache.len(),
                    room: max_pos - r.cache.len(),
                    reused: r.pending.as_ref().map(|p| p.block.len()),
                    carried: r.carried.as_ref().map(|p| p.block_size),
                }
            })
            .collect();
        let decided = policy::decide(&self.beliefs, &members, self.batching, &self.ablation);
        if let Some(o) = Observation::decided(&decided) {
            self.learn(o);
        }
        // A round whose draft rode the last forward keeps its block: verify it now.
        let plans: Vec<Plan> = live
            .iter()
            .zip(decided.decisions)
            .map(|(&i, (b, why))| match self.requests[i].carried.take() {
                // Its index then may have moved as other requests finished.
                Some(p) => Plan { req: i, ..p },
                None => self.plan(i, b, why, sink),
            })
            .collect();
        let groups: Vec<Vec<Plan>> = match self.batching {
            Batching::Packed | Batching::Lockstep => vec![plans],
            Batching::ByBlock => {
                let mut buckets: BTreeMap<usize, Vec<Plan>> = BTreeMap::new();
                for p in plans {
                    buckets.entry(p.block_size).or_default().push(p);
                }
                buckets.into_values().collect()
            }
        };
        for mut group in groups.into_iter().filter(|g| !g.is_empty()) {
            // The requests that share this group's forwards: all of them when packed,
            // the bucket's with the reference's buckets.
            let sharing = if self.batching.packs() {
                live.len()
            } else {
                group.len()
            };
            // Fresh drafts ride the verify forward when someone verifies without one.
            let ride = self.batching == Batching::Packed && group.iter().any(|p| !p.needs_draft());
            self.draft_group(&mut group, sharing, ride, sink)?;
            self.verify_group(group, sharing, sink)?;
        }
        self.learn(Observation::RoundEnded {
            concurrency: live.len(),
            tokens: self.committed - committed,
            wall_ms: start.elapsed().as_secs_f64() * 1e3,
            modeled_ms: self.counts.modeled_ms - modeled_before,
        });
        Ok(())
    }

    /// The beliefs learn `o`, and the round's `Learned` event will report it.
    fn learn(&mut self, o: Observation) {
        self.beliefs.observe(&o);
        self.journal.push(o);
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
            row_ctx: batch
                .rows
                .iter()
                .map(|r| self.requests[reqs[r.cache]].cache.len())
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
        let modeled_ms = self.beliefs.modeled().predict(&shape);
        let c = &mut self.counts;
        match phase {
            Phase::Prefill => c.prefill += 1,
            Phase::Draft => c.draft += 1,
            Phase::Verify => c.verify += 1,
            Phase::Fused => c.fused += 1,
            Phase::Denoise => c.denoise += 1,
            Phase::Refresh => c.refresh += 1,
        }
        if phase != Phase::Prefill {
            c.rows += batch.rows.len();
            c.query_tokens += batch.num_tokens();
            c.modeled_ms += modeled_ms;
        }
        sink.emit(DecodeEvent::Forward {
            phase,
            rows: batch.rows.len(),
            query_tokens: batch.num_tokens(),
            requests: reqs.len(),
            ms,
        });
        Ok((
            logits,
            Timing {
                start,
                shape,
                modeled_ms,
                forward_ms: ms,
            },
        ))
    }

    /// The beliefs learn the forward's times (its wall time counts the signals and
    /// verdicts taken from it).
    fn learn_cost(&mut self, t: &Timing) {
        self.learn(Observation::Forward {
            shape: t.shape,
            wall_ms: t.start.elapsed().as_secs_f64() * 1e3,
            forward_ms: t.forward_ms,
            modeled_ms: t.modeled_ms,
        });
    }

    fn choose(
        &mut self,
        req: usize,
        logits: &candle_core::Tensor,
    ) -> Result<(Vec<PosSignals>, Vec<u32>)> {
        let r = &mut self.requests[req];
        signals::signals_and_choices(logits, self.mask, r.opts.sampling, &mut r.rng)
    }

    /// The plan of request `i` for a block of `b` (the policy's decision): its draft
    /// source, a reused branch's block or a fresh draft.
    fn plan(
        &mut self,
        i: usize,
        b: usize,
        why: Option<BlockDecision>,
        sink: &mut dyn EventSink,
    ) -> Plan {
        let r = &mut self.requests[i];
        r.round += 1;
        if let Some(reason) = why {
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
                (block, sig, Some(p.kind))
            }
            None => (vec![r.seed], Vec::new(), None),
        };
        Plan {
            req: i,
            block_size: b,
            block,
            draft,
            drafted: false,
            reused,
            risky: Vec::new(),
            branches: Vec::new(),
            row_keys: Vec::new(),
            announced: false,
        }
    }

    /// One bidirectional draft forward for every plan of the group that needs one
    /// (none when they `ride` the verify forward), then each drafted plan's branch
    /// rows, priced at the round's `concurrency`.
    fn draft_group(
        &mut self,
        group: &mut [Plan],
        concurrency: usize,
        ride: bool,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        let need: Vec<usize> = (0..group.len())
            .filter(|&k| group[k].needs_draft())
            .collect();
        for _ in group.iter().filter(|p| p.reused.is_some()) {
            self.learn(Observation::Spared {
                concurrency,
                skipped: need.is_empty() || ride,
            });
        }
        if !need.is_empty() && !ride {
            let reqs: Vec<usize> = need.iter().map(|&k| group[k].req).collect();
            let rows: Vec<Row> = need
                .iter()
                .enumerate()
                .map(|(slot, &k)| group[k].draft_row(slot, self.mask))
                .collect();
            let (logits, timing) = self.forward(Phase::Draft, RowBatch::new(rows), &reqs, sink)?;
            for (slot, &k) in need.iter().enumerate() {
                self.take_draft(&mut group[k], &logits[slot])?;
            }
            self.learn_cost(&timing);
        }
        for p in group
            .iter_mut()
            .filter(|p| !p.announced && !p.needs_draft())
        {
            self.announce(p, concurrency, sink);
        }
        Ok(())
    }

    /// A fresh draft from its row's logits.
    fn take_draft(&mut self, p: &mut Plan, logits: &candle_core::Tensor) -> Result<()> {
        let (sig, choice) = self.choose(p.req, logits)?;
        p.block.extend_from_slice(&choice);
        p.draft = sig;
        p.drafted = true;
        Ok(())
    }

    /// One fused forward: every plan's verify row (committing) plus its branch rows,
    /// and the draft rows of the plans riding it, whose rounds verify in the next.
    fn verify_group(
        &mut self,
        group: Vec<Plan>,
        concurrency: usize,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        let reqs: Vec<usize> = group.iter().map(|p| p.req).collect();
        let mut rows = Vec::new();
        // Per plan: its first row and the branch that extends its verify row.
        let mut layout = Vec::with_capacity(group.len());
        for (slot, p) in group.iter().enumerate() {
            if p.needs_draft() {
                layout.push((rows.len(), None));
                rows.push(p.draft_row(slot, self.mask));
                continue;
            }
            let (verify, extended) = p.verify_row(slot);
            layout.push((rows.len(), extended));
            rows.push(verify);
            rows.extend(
                p.branches
                    .iter()
                    .filter(|br| !br.extends_verify())
                    .map(|br| br.row(slot)),
            );
        }
        let phase = if group
            .iter()
            .any(|p| !p.branches.is_empty() || p.needs_draft())
        {
            Phase::Fused
        } else {
            Phase::Verify
        };
        let (logits, timing) = self.forward(phase, RowBatch::new(rows), &reqs, sink)?;
        let detail = sink.detail();
        for (mut p, &(first, extended)) in group.into_iter().zip(&layout) {
            let i = p.req;
            if p.needs_draft() {
                self.take_draft(&mut p, &logits[first])?;
                self.announce(&mut p, concurrency, sink);
                self.requests[i].carried = Some(p);
                continue;
            }
            // An extended verify row: the block's logits, then the continuation's.
            let n = p.block.len();
            let (verify, tail) = match extended {
                Some(_) => (
                    logits[first].narrow(0, 0, n)?,
                    Some(logits[first].narrow(0, n, logits[first].dim(0)? - n)?),
                ),
                None => (logits[first].clone(), None),
            };
            let (vsig, vtok) = self.choose(i, &verify)?;
            // The other branches' rows follow the verify row, in the table's order.
            let mut rows = first + 1..;
            let mut predicted = Vec::with_capacity(p.branches.len());
            for k in 0..p.branches.len() {
                let l = match &tail {
                    Some(t) if extended == Some(k) => t.clone(),
                    _ => logits[rows.next().unwrap_or(first)].clone(),
                };
                predicted.push(self.choose(i, &l)?);
            }
            self.resolve(p, vsig, vtok, predicted, detail, sink)?;
        }
        self.learn_cost(&timing);
        Ok(())
    }
}

/// Mutable caches of the given requests, in that order (each request at most once).
fn caches_of<'a>(requests: &'a mut [ReqState], idx: &[usize]) -> Vec<&'a mut KvCache> {
    let mut slots: Vec<Option<&mut KvCache>> =
        requests.iter_mut().map(|r| Some(&mut r.cache)).collect();
    idx.iter().filter_map(|&i| slots[i].take()).collect()
}
