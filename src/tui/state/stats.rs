//! What the history pane and the status line count: the session's statistics (the
//! same fold as `trace summary`), a throughput timeline, and how fast drafting and
//! AR steps are on this machine.

use std::collections::VecDeque;

use crate::engine::events::{ratio, DecodeEvent, Origin, Phase};
use crate::trace::summary::{Summary, SummaryBuilder};
use crate::trace::{SessionEvent, TraceEvent};

use super::rounds::MAX_ROUNDS;

/// One point of the throughput timeline (cumulative counters after a round).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t: f64,
    pub tokens: usize,
    pub decode_tokens: usize,
    pub decode_forwards: usize,
    pub forward_ms: f64,
}

/// Tokens and forward time of one kind of round.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    pub tokens: usize,
    pub ms: f64,
}

impl Rate {
    /// Tokens per ms, once there is enough to say.
    pub fn per_ms(&self) -> Option<f64> {
        (self.tokens >= 16 && self.ms > 0.0).then(|| self.tokens as f64 / self.ms)
    }
}

/// Drafting against AR steps on this machine: tokens per ms of forward time of draft
/// rounds and of AR-step rounds, measured; where no AR step ran, the cost model's
/// price of one (fitted to this machine's forwards) stands in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeedMeter {
    pub drafting: Rate,
    pub ar: Rate,
    /// The cost model's tokens per ms for AR steps, from the last block decision.
    pub ar_model: Option<f64>,
    /// Decode forward ms since the last round ended.
    pending_ms: f64,
}

/// How drafting compares with AR steps here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Drafting's tokens per ms over AR steps'.
    pub ratio: f64,
    /// AR steps were measured (else modelled).
    pub ar_measured: bool,
}

impl SpeedMeter {
    fn forward(&mut self, phase: Phase, ms: f64) {
        if phase != Phase::Prefill {
            self.pending_ms += ms;
        }
    }

    /// A round of `block` ended with `tokens` committed.
    fn round(&mut self, block: usize, tokens: usize) {
        let r = if block <= 1 {
            &mut self.ar
        } else {
            &mut self.drafting
        };
        r.tokens += tokens;
        r.ms += std::mem::take(&mut self.pending_ms);
    }

    pub fn comparison(&self) -> Option<Comparison> {
        let d = self.drafting.per_ms()?;
        let (ar, measured) = match self.ar.per_ms() {
            Some(a) => (a, true),
            None => (self.ar_model?, false),
        };
        Some(Comparison {
            ratio: ratio(d, ar),
            ar_measured: measured,
        })
    }
}

/// The history pane's state.
#[derive(Debug, Clone)]
pub struct Stats {
    pub summary: SummaryBuilder,
    /// The summary as of the last event (computed once per event, read every frame).
    pub current: Summary,
    pub samples: VecDeque<Sample>,
    pub speed: SpeedMeter,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            // Its round assembler is also the round pane's: a chat cleared mid-answer
            // still shows that answer's rounds.
            summary: SummaryBuilder::adopting(),
            current: Summary::default(),
            samples: VecDeque::new(),
            speed: SpeedMeter::default(),
        }
    }
}

impl Stats {
    /// Counts an event; `block` is the size of the round a commit ends.
    pub fn push(&mut self, t: f64, event: &TraceEvent, block: Option<usize>) {
        self.summary.push(event);
        let e = match event {
            TraceEvent::Decode(e) => e,
            TraceEvent::Session(SessionEvent::ImportedRequest(_)) => {
                self.current = self.summary.summary();
                return;
            }
            TraceEvent::Session(SessionEvent::ImportedRound(_)) => {
                self.current = self.summary.summary();
                self.sample(t);
                return;
            }
            TraceEvent::Session(_) => return,
        };
        match e {
            DecodeEvent::Forward { phase, ms, .. } => self.speed.forward(*phase, *ms),
            DecodeEvent::BlockChosen { reason, .. } => {
                if let Some(r) = reason.ar_rate {
                    self.speed.ar_model = Some(r);
                }
            }
            DecodeEvent::Committed {
                round,
                tokens,
                origins,
                ..
            } if *round > 0 => {
                if origins.contains(&Origin::Diffusion) {
                    // Not drafting: no verifier, not lossless. Its forwards count for
                    // neither side of the comparison.
                    self.speed.pending_ms = 0.0;
                } else {
                    self.speed.round(block.unwrap_or(1), tokens.len());
                }
            }
            _ => {}
        }
        if matches!(
            e,
            DecodeEvent::Committed { .. }
                | DecodeEvent::Forward { .. }
                | DecodeEvent::RequestFinished { .. }
                | DecodeEvent::RequestStarted { .. }
                | DecodeEvent::BranchesBuilt { .. }
                | DecodeEvent::Error { .. }
        ) {
            self.current = self.summary.summary();
        }
        if let DecodeEvent::Committed { round, .. } = e {
            if *round > 0 {
                self.sample(t);
            }
        }
    }

    /// A point of the throughput timeline after a round.
    fn sample(&mut self, t: f64) {
        let sm = &self.current;
        self.samples.push_back(Sample {
            t,
            tokens: sm.tally.new_tokens,
            decode_tokens: sm.tally.decode_tokens,
            decode_forwards: sm.forwards.decode,
            forward_ms: sm.forwards.ms,
        });
        if self.samples.len() > MAX_ROUNDS {
            self.samples.pop_front();
        }
    }
}
