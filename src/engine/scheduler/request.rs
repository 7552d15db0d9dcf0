//! A request's life in the scheduler: submitted, prefilled, committing tokens round
//! after round, finished (end of answer, limit, context, cancel).

use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;

use super::Scheduler;
use crate::engine::events::{
    DecodeEvent, EventSink, Mode, Origin, Phase, RequestId, RequestStats, StopReason,
};
use crate::engine::options::DecodeOptions;
use crate::engine::overlap::BranchKind;
use crate::engine::policy::History;
use crate::engine::signals::PosSignals;
use crate::model::tokenizer::TokenStream;
use crate::model::{AttnRule, KvCache, LogitSel, Row, RowBatch, TextTokenizer};
use crate::rng::Rng;

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

/// A branch block to use as the next round's draft.
pub(super) struct Pending {
    pub block: Vec<u32>,
    pub signals: Vec<PosSignals>,
    pub kind: BranchKind,
}

/// Everything the scheduler keeps of one live request.
pub(super) struct ReqState {
    pub id: RequestId,
    pub prompt: Vec<u32>,
    pub opts: DecodeOptions,
    pub family: Option<String>,
    pub cache: KvCache,
    pub prefilled: bool,
    /// The next block's position 0: the last bonus, not yet in the cache.
    pub seed: u32,
    pub out: Vec<u32>,
    pub pending: Option<Pending>,
    /// A round whose draft rode the last shared forward, to verify in this one (its
    /// block, rows and events are done; `Batching::Packed`).
    pub carried: Option<super::Plan>,
    pub history: History,
    pub stats: RequestStats,
    pub round: usize,
    pub rng: Rng,
    pub text: String,
    pub stream: Option<TokenStream>,
    pub decode_start: Option<Instant>,
    /// Block diffusion: the canvas being filled.
    pub canvas: Option<super::diffusion::Canvas>,
    /// Block diffusion: AR's argmax for the next canvas's position 0 (from the last
    /// causal forward).
    pub ar_next: Option<u32>,
}

impl Scheduler {
    /// Queues a request under an id chosen by the caller (the engine thread's handle).
    pub fn submit_with_id(
        &mut self,
        id: RequestId,
        s: Submit,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        s.options.validate()?;
        crate::engine::check_prompt_len(
            s.prompt.len(),
            self.model.config().max_position_embeddings,
        )?;
        let vocab = self.model.config().vocab_size;
        if let Some(&bad) = s.prompt.iter().find(|&&t| t as usize >= vocab) {
            bail!("prompt token id {bad} is not below the vocabulary size {vocab}");
        }
        self.next_id = self.next_id.max(id + 1);
        sink.emit(DecodeEvent::RequestStarted {
            req: id,
            mode: s.options.mode,
            blocks: s.options.block_policy(),
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
            carried: None,
            history: {
                let mut h = History::default();
                h.read_outcome(self.ablation.outcome_signal);
                h
            },
            stats: RequestStats {
                prompt_tokens: s.prompt.len(),
                ..RequestStats::default()
            },
            round: 0,
            rng: Rng::new(s.options.sampling.seed ^ id),
            text: String::new(),
            stream: self.tokenizer.as_ref().map(TextTokenizer::stream),
            decode_start: None,
            canvas: None,
            ar_next: None,
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

    /// Batched prefill of every new request: one forward, first token chosen.
    pub(super) fn prefill(&mut self, sink: &mut dyn EventSink) -> Result<()> {
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
        let (logits, timing) = self.forward(Phase::Prefill, RowBatch::new(rows), &new, sink)?;
        let ms = timing.start.elapsed().as_secs_f64() * 1e3;
        for (k, &i) in new.iter().enumerate() {
            let (sig, choice) = self.choose(i, &logits[k])?;
            let seed = choice[0];
            let ar_first = sig.first().map_or(seed, |s| s.argmax);
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
            if r.opts.mode == Mode::Diffusion {
                // Block diffusion fills its first canvas from the prompt alone: the
                // prefill's argmax is only what AR would say at position 0.
                r.ar_next = Some(ar_first);
            } else {
                self.commit(i, 0, &[seed], &[Origin::Prefill], sink);
            }
        }
        Ok(())
    }

    /// Appends emitted tokens, streams their text and emits `Committed`; stopping is
    /// decided later by `stop_reason`.
    pub(super) fn commit(
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
        r.stats.tally.record_commit(tokens.len(), round == 0);
        sink.emit(DecodeEvent::Committed {
            req: r.id,
            round,
            tokens: tokens.to_vec(),
            origins: origins.to_vec(),
            text,
        });
    }

    /// Why request `i` must stop now, if it must.
    pub(super) fn stop_reason(&self, i: usize) -> Option<StopReason> {
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

    pub(super) fn finish_done(&mut self, sink: &mut dyn EventSink) {
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

    pub(super) fn finish(&mut self, i: usize, stop: StopReason, sink: &mut dyn EventSink) {
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
            stats: Box::new(r.stats.clone()),
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
    pub(super) fn live(&self, i: usize) -> bool {
        self.requests[i].prefilled && self.stop_reason(i).is_none()
    }
}
