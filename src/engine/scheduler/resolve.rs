//! Applying the verifier's verdict to a request: acceptance (`round::verify`), the
//! cache crop, the committed tokens, the branch outcome (`overlap::resolve`), the
//! history the block policy reads and the round's tally.

use super::{Pending, Plan, Scheduler};
use crate::engine::events::{BranchView, DecodeEvent, EventSink, Origin, PosView, RoundTally};
use crate::engine::overlap::{self, BranchKind, BranchOutcome};
use crate::engine::policy::{verify_entropy, Observation, RoundOutcome};
use crate::engine::round;
use crate::engine::signals::PosSignals;

/// A branch row's logits, as the verify forward gave them.
pub(super) type Predicted = (Vec<PosSignals>, Vec<u32>);

impl Scheduler {
    /// Applies the verdict on one plan: acceptance, crop, emit, branch reuse, history,
    /// statistics.
    pub(super) fn resolve(
        &mut self,
        p: Plan,
        vsig: Vec<PosSignals>,
        vtok: Vec<u32>,
        predicted: Vec<Predicted>,
        detail: bool,
        sink: &mut dyn EventSink,
    ) -> anyhow::Result<()> {
        let (i, b) = (p.req, p.block_size);
        let verdict = round::verify(&p.block, &vtok);
        // The history before this round, for the policy's calibration of its tables.
        let before = (p.drafted && self.requests[i].opts.adaptive_blocks().is_some())
            .then(|| self.requests[i].history.clone());
        let r = &mut self.requests[i];
        let (id, rnd) = (r.id, r.round);
        let ctx = r.cache.len() - p.verify_len();
        // The verify forward wrote the whole block: keeping a prefix of it cannot fail
        // unless the cache and the plan disagree, a bug worth stopping for.
        r.cache
            .truncate(ctx + verdict.advance())
            .map_err(|e| anyhow::anyhow!("request {id}, round {rnd}: {e}"))?;
        let budget = r.opts.max_new_tokens.saturating_sub(r.out.len());
        let (kept, _) = round::truncate_emitted(verdict.emitted(), &self.eos, budget);
        let origins: Vec<Origin> = (0..kept.len())
            .map(|k| match (k < verdict.accepted, p.reused.is_some()) {
                (true, true) => Origin::Reused,
                (true, false) => Origin::Draft,
                _ => Origin::Bonus,
            })
            .collect();
        r.history.push(RoundOutcome {
            block: b,
            advance: verdict.advance(),
            full: verdict.first_reject.is_none(),
            verify_entropy: verify_entropy(
                &vsig.iter().map(|s| s.entropy).collect::<Vec<_>>(),
                verdict.accepted,
            ),
        });
        r.seed = verdict.bonus;
        emit_verdict(sink, id, rnd, &p, &predicted, &verdict, &vsig, detail);
        // The answer ended inside the block (an accepted eos, or the budget): past its
        // end the verifier judged nothing of it. It `ends` also when its last token
        // is the round's own.
        let ended = round::ended_inside(kept.len(), verdict.advance());
        let ends = ended || kept.last().is_some_and(|t| self.eos.contains(t));
        if let Some(h) = before.filter(|_| !ended) {
            self.learn(Observation::advanced(b, &h, verdict.advance()));
        }
        let hit = self.resolve_branches(i, &p, &predicted, &verdict, (ended, ends), sink);
        let r = &mut self.requests[i];
        r.stats.tally.record_round(&RoundTally {
            block: b,
            // What the answer got: the verdict cut at EOS and the budget.
            advance: kept.len(),
            ended,
            drafted: p.drafted,
            reused: p.reused.is_some(),
            branches: p.branches.iter().map(|br| br.kind).collect(),
            branch_tokens: p.branches.iter().map(|br| br.added_tokens()).sum(),
            hit,
        });
        self.commit(i, rnd, &kept, &origins, sink);
        Ok(())
    }

    /// The branch outcome of plan `p` (a miss when the answer `ended` inside the
    /// block): a hit's block becomes the request's pending draft unless the answer
    /// `ends` here, the row tables learn from it, and `branch_resolved` says so.
    fn resolve_branches(
        &mut self,
        i: usize,
        p: &Plan,
        predicted: &[Predicted],
        verdict: &round::Verdict,
        (ended, ends): (bool, bool),
        sink: &mut dyn EventSink,
    ) -> Option<BranchKind> {
        if p.branches.is_empty() {
            return None;
        }
        let r = &mut self.requests[i];
        let cont_first = p
            .branches
            .iter()
            .position(|br| br.kind == BranchKind::Continuation)
            .map(|k| predicted[k].1[0]);
        let outcome = if ended {
            BranchOutcome::Miss {
                reason: overlap::MissReason::Ended,
            }
        } else {
            overlap::resolve(&p.branches, verdict, cont_first)
        };
        let mut hit = None;
        let mut hit_row = None;
        if let BranchOutcome::Hit { index, kind } = outcome {
            hit = Some(kind);
            hit_row = Some(index);
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
            req: r.id,
            round: r.round,
            outcome,
        });
        if !ended {
            self.learn(Observation::RowsJudged {
                built: p.row_keys.clone(),
                hit: hit_row,
            });
        }
        hit
    }
}

/// `branches_built` (the rows fused with this verification, with what each drafted)
/// and `verified`.
#[allow(clippy::too_many_arguments)] // one round's verdict, as the events carry it
fn emit_verdict(
    sink: &mut dyn EventSink,
    id: u64,
    rnd: usize,
    p: &Plan,
    predicted: &[Predicted],
    verdict: &round::Verdict,
    vsig: &[PosSignals],
    detail: bool,
) {
    if !p.branches.is_empty() {
        sink.emit(DecodeEvent::BranchesBuilt {
            req: id,
            round: rnd,
            branches: p
                .branches
                .iter()
                .zip(predicted)
                .map(|(br, (_, tok))| BranchView {
                    kind: br.kind,
                    at: br.at,
                    alt: br.alt,
                    tokens: br.added_tokens(),
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
        detail: if detail { views(vsig) } else { Vec::new() },
    });
}

/// Per-position detail for the screen's inspector.
pub(super) fn views(sig: &[PosSignals]) -> Vec<PosView> {
    sig.iter()
        .map(|s| PosView {
            margin: s.margin,
            confidence: s.confidence,
            entropy: s.entropy,
            top: s.top.iter().take(5).copied().collect(),
        })
        .collect()
}
