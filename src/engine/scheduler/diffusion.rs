//! Block diffusion, NLD's third mode (what vLLM's `nemotron_dllm` serves): a canvas of
//! L masks after the committed prefix. Each step is one bidirectional forward over the
//! canvas (the prefix through the cache, the draft adapter on, as for drafting) and
//! commits every masked position whose top probability is at least τ — at least the
//! most confident one. A full canvas is written to the cache by one causal forward,
//! which also gives what AR would emit at each of its positions: the faithfulness
//! marks, for free. No verifier: fast, and **not** lossless.
//!
//! The canvases of every diffusing request share each step's forward; a canvas that
//! filled last step has its cache write packed into the same forward (a causal row
//! beside the bidirectional ones). Forwards per request are counted the reference's
//! way: its denoising steps plus one cache write per block.

use anyhow::Result;

use super::Scheduler;
use crate::engine::events::{BlockTally, DecodeEvent, EventSink, Origin, Phase};
use crate::engine::round;
use crate::model::{AttnRule, LogitSel, Row, RowBatch};

/// A request's block being filled.
pub(super) struct Canvas {
    /// `None` where still masked.
    pub tokens: Vec<Option<u32>>,
    /// The step that committed each position (0 while masked).
    pub step_of: Vec<usize>,
    /// Denoising forwards so far.
    pub steps: usize,
}

impl Canvas {
    fn new(len: usize) -> Self {
        Self {
            tokens: vec![None; len],
            step_of: vec![0; len],
            steps: 0,
        }
    }

    fn full(&self) -> bool {
        self.tokens.iter().all(Option::is_some)
    }
}

/// Positions to commit this step: every masked one whose top probability is at least
/// `threshold`, or else the single most confident one (the first on ties).
pub fn commit_positions(masked: &[(usize, f32)], threshold: f32) -> Vec<usize> {
    let sure: Vec<usize> = masked
        .iter()
        .filter(|(_, p)| *p >= threshold)
        .map(|(i, _)| *i)
        .collect();
    if !sure.is_empty() {
        return sure;
    }
    masked
        .iter()
        .fold(None::<(usize, f32)>, |best, &(i, p)| match best {
            Some((_, bp)) if bp >= p => best,
            _ => Some((i, p)),
        })
        .map(|(i, _)| vec![i])
        .unwrap_or_default()
}

impl Scheduler {
    /// One forward for every diffusing request in `live`: a denoising step of each
    /// canvas with masks left, the cache write of each full one.
    pub(super) fn diffusion_step(
        &mut self,
        live: &[usize],
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        let max_pos = self.model.config().max_position_embeddings;
        for &i in live {
            let r = &mut self.requests[i];
            if r.canvas.is_none() {
                let budget = r.opts.max_new_tokens.saturating_sub(r.out.len());
                let room = max_pos - r.cache.len();
                let len = r
                    .opts
                    .fixed_block()
                    .unwrap_or(1)
                    .min(budget)
                    .min(room)
                    .max(1);
                r.canvas = Some(Canvas::new(len));
                r.round += 1;
            }
        }
        let mask = self.mask;
        let mut rows = Vec::with_capacity(live.len());
        let mut denoising = false;
        for (slot, &i) in live.iter().enumerate() {
            let c = self.requests[i]
                .canvas
                .as_ref()
                .expect("a canvas was made above");
            let tokens: Vec<u32> = c.tokens.iter().map(|t| t.unwrap_or(mask)).collect();
            rows.push(if c.full() {
                Row::new(slot, tokens, AttnRule::Causal)
                    .commit()
                    .logits(LogitSel::All)
            } else {
                denoising = true;
                Row::new(slot, tokens, AttnRule::Bidirectional)
                    .lora_from(0)
                    .logits(LogitSel::All)
            });
        }
        let phase = if denoising {
            Phase::Denoise
        } else {
            Phase::Refresh
        };
        let (logits, timing) = self.forward(phase, RowBatch::new(rows), live, sink)?;
        for (slot, &i) in live.iter().enumerate() {
            let (sig, choice) = self.choose(i, &logits[slot])?;
            let full = self.requests[i].canvas.as_ref().is_some_and(Canvas::full);
            if full {
                let ar = sig.iter().map(|s| s.argmax).collect::<Vec<_>>();
                self.write_block(i, &ar, sink);
            } else {
                self.denoise(i, &sig, &choice, sink);
            }
        }
        self.learn_cost(&timing);
        Ok(())
    }

    /// Commits this step's positions of request `i`'s canvas.
    fn denoise(
        &mut self,
        i: usize,
        sig: &[crate::engine::signals::PosSignals],
        choice: &[u32],
        sink: &mut dyn EventSink,
    ) {
        let r = &mut self.requests[i];
        let Some(c) = r.canvas.as_mut() else { return };
        c.steps += 1;
        // The probability of the token each position would take (greedy: the top one;
        // sampled: the sample's, 0 when it is outside the top candidates).
        let prob = |k: usize| {
            sig[k]
                .top
                .iter()
                .find(|(id, _)| *id == choice[k])
                .map_or(0.0, |(_, p)| *p)
        };
        let masked: Vec<(usize, f32)> = (0..c.tokens.len())
            .filter(|&k| c.tokens[k].is_none())
            .map(|k| (k, prob(k)))
            .collect();
        let positions = commit_positions(&masked, r.opts.threshold);
        for &k in &positions {
            c.tokens[k] = Some(choice[k]);
            c.step_of[k] = c.steps;
        }
        sink.emit(DecodeEvent::Denoised {
            req: r.id,
            round: r.round,
            step: c.steps,
            canvas: c.tokens.clone(),
            confidence: positions.iter().map(|&k| prob(k)).collect(),
            positions,
        });
    }

    /// The full canvas of request `i` is in the cache now: compare it with AR's argmax
    /// (`ar[k]` predicts position k + 1), commit it up to the answer's end.
    fn write_block(&mut self, i: usize, ar: &[u32], sink: &mut dyn EventSink) {
        let r = &mut self.requests[i];
        let Some(c) = r.canvas.take() else { return };
        let block: Vec<u32> = c.tokens.iter().map(|t| t.unwrap_or(self.mask)).collect();
        // AR at position 0 was predicted by the forward before (the prefill's, or the
        // previous block's write); at k ≥ 1 by this one's position k − 1.
        let mut ar_at = Vec::with_capacity(block.len());
        ar_at.push(r.ar_next.unwrap_or(block[0]));
        ar_at.extend_from_slice(&ar[..block.len() - 1]);
        r.ar_next = ar.last().copied();
        let budget = r.opts.max_new_tokens.saturating_sub(r.out.len());
        let (kept, _) = round::truncate_emitted(&block, &self.eos, budget);
        let agree = BlockTally::agreeing(&kept, &ar_at);
        if r.stats.first_divergence.is_none() {
            if let Some(k) = kept.iter().zip(&ar_at).position(|(a, b)| a != b) {
                r.stats.first_divergence = Some(r.out.len() + k);
            }
        }
        let (id, rnd) = (r.id, r.round);
        sink.emit(DecodeEvent::BlockWritten {
            req: id,
            round: rnd,
            block: block.clone(),
            steps: c.step_of.clone(),
            ar: ar_at,
        });
        r.stats.tally.record_block(&BlockTally {
            block: block.len(),
            steps: c.steps,
            advance: kept.len(),
            agree,
        });
        let origins = vec![Origin::Diffusion; kept.len()];
        self.commit(i, rnd, &kept, &origins, sink);
    }
}
