//! The one reader of a round's events: which events make a round, in what order, and
//! when it is complete. `round_records` (eval, plot) and the trace summary (and through
//! it the screen's statistics, the recorder and the recording check) fold over the
//! rounds it yields, and the round pane shows the round it is gathering; an event
//! out of order is its error.
//!
//! A round of request `req` is, in the engine's order: `block_chosen` (adaptive sizes
//! only), `drafted` (not for an AR step), `branches_built`, `verified`,
//! `branch_resolved`, then `committed`, which completes it. Block diffusion's round is
//! `denoised` steps, `block_written`, then `committed`.

use std::collections::HashMap;

use super::{BlockDecision, BlockTally, BranchKind, BranchOutcome, BranchView, DecodeEvent};
use super::{PosView, RequestId, RoundTally, RowsPriced, Tally};

/// One request's round as its events told it, complete at `committed`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    pub req: RequestId,
    pub round: usize,
    /// The request's prompt family, when it was given one.
    pub family: Option<String>,
    /// The block size `block_chosen` named, and why.
    pub chosen: Option<usize>,
    pub reason: Option<BlockDecision>,
    /// `drafted`: the block (drafted, or reused from a branch), the draft's margins,
    /// its per-position detail (recordings with detail only) and risky positions.
    pub draft: Option<Draft>,
    /// Which rows ride with verification and why (`drafted`).
    pub rows: Option<RowsPriced>,
    /// The branch rows fused with this round's verification.
    pub branches: Vec<BranchView>,
    /// The verifier's verdict on the whole block (`None`: block diffusion).
    pub verdict: Option<Verdict>,
    /// What became of this round's branches.
    pub outcome: Option<BranchOutcome>,
    /// Block diffusion: the canvas as its denoising steps filled it.
    pub denoise: Option<Denoise>,
    /// Block diffusion: the block written, each position's step, and AR's tokens.
    pub written: Option<Written>,
    /// The tokens the round committed: the verdict cut at the answer's end.
    pub committed: Vec<u32>,
    /// Tokens the request had committed before this round (its prefill's included).
    pub committed_before: usize,
}

/// A round's `drafted` event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Draft {
    pub block: Vec<u32>,
    pub margins: Vec<f32>,
    pub detail: Vec<PosView>,
    pub risky: Vec<usize>,
    pub reused: Option<BranchKind>,
}

/// A round's `verified` event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub accepted: usize,
    pub first_reject: Option<usize>,
    pub verifier_tokens: Vec<u32>,
    pub bonus: u32,
    /// The verifier's per-position detail (recordings with detail only).
    pub detail: Vec<PosView>,
}

/// A diffusion round's `denoised` steps so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Denoise {
    /// A token, or `None` where still masked.
    pub canvas: Vec<Option<u32>>,
    /// The step that committed each position (0 while masked).
    pub step_of: Vec<usize>,
    /// The top probability each position was committed with (0 while masked).
    pub confidence: Vec<f32>,
    /// The last step.
    pub steps: usize,
}

/// A diffusion round's `block_written` event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    pub block: Vec<u32>,
    pub steps: Vec<usize>,
    pub ar: Vec<u32>,
}

impl Round {
    /// Tokens the verdict advanced (accepted drafts + the bonus), before the answer's
    /// end cut it.
    pub fn verdict_advance(&self) -> usize {
        self.verdict.as_ref().map_or(0, |v| v.accepted + 1)
    }

    /// The answer ended inside this block: what it committed is less than the verdict
    /// advanced.
    pub fn ended(&self) -> bool {
        crate::engine::round::ended_inside(self.committed.len(), self.verdict_advance())
    }

    /// The round as the engine's statistics count it (`Tally::record_round`).
    pub fn tally(&self) -> RoundTally {
        let draft = self.draft.as_ref();
        let block = match (&self.verdict, draft) {
            (Some(v), _) => v.verifier_tokens.len(),
            (None, Some(d)) => d.block.len(),
            (None, None) => self.chosen.unwrap_or(0),
        };
        RoundTally {
            block,
            advance: self.committed.len(),
            ended: self.ended(),
            drafted: draft.is_some_and(|d| d.reused.is_none()),
            reused: draft.is_some_and(|d| d.reused.is_some()),
            branches: self.branches.iter().map(|b| b.kind).collect(),
            branch_tokens: self.branches.iter().map(|b| b.tokens).sum(),
            hit: match self.outcome {
                Some(BranchOutcome::Hit { kind, .. }) => Some(kind),
                _ => None,
            },
        }
    }

    /// Adds the round to `tally` as the engine counts it: a diffusion block by what it
    /// committed, a verified round by its tally.
    pub fn count_in(&self, tally: &mut Tally) {
        match &self.written {
            Some(w) => tally.record_block(&BlockTally {
                block: w.block.len(),
                steps: w.steps.iter().copied().max().unwrap_or(0),
                advance: self.committed.len(),
                agree: BlockTally::agreeing(&self.committed, &w.ar),
            }),
            None => tally.record_round(&self.tally()),
        }
    }
}

/// An event the round order does not allow (it is not applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderError {
    NotStarted(RequestId),
    Again {
        what: &'static str,
        round: usize,
        req: RequestId,
    },
    Behind {
        what: &'static str,
        round: usize,
        prev: usize,
        req: RequestId,
    },
}

impl std::fmt::Display for OrderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderError::NotStarted(req) => {
                write!(f, "request {req} has no `request_started` before this line")
            }
            OrderError::Again { what, round, req } => {
                write!(f, "a second `{what}` for round {round} of request {req}")
            }
            OrderError::Behind {
                what,
                round,
                prev,
                req,
            } => write!(
                f,
                "round {round} of request {req} is `{what}` after round {prev}"
            ),
        }
    }
}

impl std::error::Error for OrderError {}

/// One request's rounds so far.
#[derive(Debug, Clone, Default)]
struct Open {
    family: Option<String>,
    round: Round,
    /// The last round completed: an event of its round after its commit (an older
    /// recording's order) still reaches it.
    last: Option<Round>,
    committed: usize,
    last_verified: Option<usize>,
    last_committed: Option<usize>,
}

/// Gathers each request's events into rounds; [`Assembler::push`] yields a round when
/// its `committed` arrives. Requests may interleave.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    open: HashMap<RequestId, Open>,
    /// Takes in a request whose start it did not see (the screen after Ctrl+L clears
    /// it mid-answer) instead of refusing its events.
    adopt: bool,
}

impl Assembler {
    /// An assembler that takes in requests whose start it did not see.
    pub fn adopting() -> Self {
        Self {
            adopt: true,
            ..Self::default()
        }
    }

    /// Round `round` of request `req` as its events told it so far: the one being
    /// gathered, or the last one completed.
    pub fn round(&self, req: RequestId, round: usize) -> Option<&Round> {
        let o = self.open.get(&req)?;
        [Some(&o.round), o.last.as_ref()]
            .into_iter()
            .flatten()
            .find(|r| r.round == round && r.req == req)
    }

    /// The round of `req` being gathered: some of its events came, its commit has not.
    pub fn gathering(&self, req: RequestId) -> Option<&Round> {
        self.open
            .get(&req)
            .map(|o| &o.round)
            .filter(|r| r.round > 0 && r.req == req)
    }

    /// Takes the next event: `Ok(Some(round))` when it completes one, `Err` when the
    /// order does not allow it (the event is then dropped).
    pub fn push(&mut self, e: &DecodeEvent) -> Result<Option<Round>, OrderError> {
        let Some(req) = e.request() else {
            return Ok(None);
        };
        if let DecodeEvent::RequestStarted { family, .. } = e {
            self.open.insert(
                req,
                Open {
                    family: family.clone(),
                    ..Open::default()
                },
            );
            return Ok(None);
        }
        if self.adopt && !matches!(e, DecodeEvent::Error { .. }) {
            self.open.entry(req).or_default();
        }
        let Some(o) = self.open.get_mut(&req) else {
            // A submission the engine refused fails before it starts.
            return match e {
                DecodeEvent::Error { .. } => Ok(None),
                _ => Err(OrderError::NotStarted(req)),
            };
        };
        match e {
            DecodeEvent::RequestFinished { .. } | DecodeEvent::Error { .. } => {
                self.open.remove(&req);
                Ok(None)
            }
            DecodeEvent::Verified { round, .. } => {
                in_turn(&mut o.last_verified, *round, "verified", req)?;
                o.at(req, *round).verdict = verdict(e);
                Ok(None)
            }
            DecodeEvent::Committed { round, tokens, .. } => {
                in_turn(&mut o.last_committed, *round, "committed", req)?;
                let before = o.committed;
                o.committed += tokens.len();
                if *round == 0 {
                    return Ok(None); // the prefill's first token: no round
                }
                let mut r = std::mem::take(o.at(req, *round));
                r.committed = tokens.clone();
                r.committed_before = before;
                o.last = Some(r.clone());
                Ok(Some(r))
            }
            _ => {
                if let Some(round) = e.round() {
                    match &mut o.last {
                        Some(last) if last.round == round && o.round.round != round => {
                            last.apply(e)
                        }
                        _ => o.at(req, round).apply(e),
                    }
                }
                Ok(None)
            }
        }
    }

    /// The rounds the events yield, in the order they completed; events out of order
    /// are skipped.
    pub fn rounds<'a>(events: impl IntoIterator<Item = &'a DecodeEvent>) -> Vec<Round> {
        let mut a = Assembler::default();
        events
            .into_iter()
            .filter_map(|e| a.push(e).ok().flatten())
            .collect()
    }
}

impl Open {
    /// The round `round` being gathered: a new one when the events moved on (a round
    /// cut off before its commit is dropped).
    fn at(&mut self, req: RequestId, round: usize) -> &mut Round {
        if self.round.round != round || self.round.req != req {
            self.round = Round {
                req,
                round,
                family: self.family.clone(),
                ..Round::default()
            };
        }
        &mut self.round
    }
}

impl Round {
    /// Takes in a round event other than `verified` and `committed`.
    fn apply(&mut self, e: &DecodeEvent) {
        match e {
            DecodeEvent::BlockChosen { block, reason, .. } => {
                self.chosen = Some(*block);
                self.reason = Some(reason.clone());
            }
            DecodeEvent::Drafted {
                block,
                margins,
                detail,
                risky,
                reused,
                rows,
                ..
            } => {
                self.rows = *rows;
                self.draft = Some(Draft {
                    block: block.clone(),
                    margins: margins.clone(),
                    detail: detail.clone(),
                    risky: risky.clone(),
                    reused: *reused,
                });
            }
            DecodeEvent::BranchesBuilt { branches, .. } => self.branches = branches.clone(),
            DecodeEvent::BranchResolved { outcome, .. } => self.outcome = Some(*outcome),
            DecodeEvent::Denoised {
                step,
                canvas,
                positions,
                confidence,
                ..
            } => {
                let d = self.denoise.get_or_insert_with(Denoise::default);
                d.step_of.resize(canvas.len(), 0);
                d.confidence.resize(canvas.len(), 0.0);
                for (&k, &c) in positions.iter().zip(confidence) {
                    if k < canvas.len() {
                        d.step_of[k] = *step;
                        d.confidence[k] = c;
                    }
                }
                d.canvas = canvas.clone();
                d.steps = *step;
            }
            DecodeEvent::BlockWritten {
                block, steps, ar, ..
            } => {
                self.written = Some(Written {
                    block: block.clone(),
                    steps: steps.clone(),
                    ar: ar.clone(),
                });
            }
            _ => {}
        }
    }
}

fn verdict(e: &DecodeEvent) -> Option<Verdict> {
    match e {
        DecodeEvent::Verified {
            accepted,
            first_reject,
            verifier_tokens,
            bonus,
            detail,
            ..
        } => Some(Verdict {
            accepted: *accepted,
            first_reject: *first_reject,
            verifier_tokens: verifier_tokens.clone(),
            bonus: *bonus,
            detail: detail.clone(),
        }),
        _ => None,
    }
}

/// A round `what` once, after the rounds before it.
fn in_turn(
    last: &mut Option<usize>,
    round: usize,
    what: &'static str,
    req: RequestId,
) -> Result<(), OrderError> {
    match *last {
        Some(prev) if prev == round => return Err(OrderError::Again { what, round, req }),
        Some(prev) if prev > round => {
            return Err(OrderError::Behind {
                what,
                round,
                prev,
                req,
            })
        }
        _ => {}
    }
    *last = Some(round);
    Ok(())
}

#[cfg(test)]
mod tests;
