//! Rounds read back from an event stream (a run's sink or a recording): one record per
//! verified block with what the analyses need (acceptance, the first rejection and the
//! draft's view of it, the branch outcome), from the rounds [`Assembler`] yields.
//! `eval` and `plot` are built on it.

use std::collections::HashMap;

use super::assemble::{Assembler, Draft, Round};
use super::{BranchKind, BranchOutcome, DecodeEvent, RequestId};

/// One verified round.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub req: RequestId,
    /// The request's prompt family, when it was given one.
    pub family: Option<String>,
    pub round: usize,
    /// Block size B (1: an AR step).
    pub block: usize,
    /// Tokens advanced: accepted drafts + the bonus token, up to the answer's end.
    pub advance: usize,
    /// The answer ended inside this block (EOS among the accepted drafts, or the
    /// token budget): the verifier's verdict on the positions after the end is not
    /// part of it, so the round is neither full nor rejected there.
    pub ended: bool,
    /// The first rejected block position (1-based; `None`: the whole block passed).
    pub first_reject: Option<usize>,
    /// The draft's margin at the first rejection (drafts recorded with detail, or
    /// margins, only).
    pub margin_at_reject: Option<f32>,
    /// At the first rejection, the verifier's token is the draft's second choice
    /// (drafts recorded with their top-k only).
    pub second_choice_right: Option<bool>,
    /// At the first rejection, the draft's token is misplaced: it repeats the drafted
    /// token before it, or is the request's own token one or two positions on (the
    /// draft knew the words, not their places). One pass drafts every position from
    /// the seed alone, so nothing stops two positions from taking the same token.
    pub misplaced: Option<bool>,
    /// The draft positions the verifier judged (1 up to the first rejection, or the
    /// whole block): the draft's top probability there and whether its top choice
    /// was the verifier's token (drafts recorded with detail only).
    pub judged: Vec<(f32, bool)>,
    /// Positions the draft flagged risky.
    pub risky: Vec<usize>,
    /// The block came from a branch of the previous round.
    pub reused: Option<BranchKind>,
    /// Branch rows fused with this round's verification.
    pub built: Vec<BranchKind>,
    /// What became of this round's branches, if it built any.
    pub branches: Option<BranchOutcome>,
}

impl RoundRecord {
    /// The round kept `kept` tokens of its verdict: when fewer than it advanced, the
    /// answer ended inside the block and what the verifier said after that is dropped
    /// (`Committed` is cut at EOS and at the budget; `Verified` is the whole block's).
    fn end_after(&mut self, kept: usize) {
        if !crate::engine::round::ended_inside(kept, self.advance) {
            return;
        }
        self.ended = true;
        self.advance = kept;
        if self.branches.is_some() {
            // (Recordings before event version 3 judged branches past the end.)
            self.branches = Some(BranchOutcome::Miss {
                reason: super::MissReason::Ended,
            });
        }
        self.first_reject = None;
        self.margin_at_reject = None;
        self.second_choice_right = None;
        self.misplaced = None;
        // Block position k holds the k-th kept token (position 0 is the seed).
        self.judged.truncate(kept);
        self.risky.retain(|&q| q <= kept);
    }

    /// The record of a verified round, and the rejected token whose `misplaced` needs
    /// the tokens committed after it: `(its position in the request's output, the
    /// token drafted there)`. `None` for a diffusion round (nothing verified).
    fn of(r: &Round) -> Option<(RoundRecord, Option<(usize, u32)>)> {
        let v = r.verdict.as_ref()?;
        let empty = Draft::default();
        let d = r.draft.as_ref().unwrap_or(&empty); // an AR step has no draft
        let at = |q: usize| q.checked_sub(1);
        let margin_at_reject = v
            .first_reject
            .and_then(at)
            .and_then(|i| d.margins.get(i).copied());
        let second_choice_right = v.first_reject.and_then(at).and_then(|i| {
            let pos = d.detail.get(i)?;
            let verifier = v.verifier_tokens.get(i)?;
            Some(pos.top.get(1).is_some_and(|t| t.0 == *verifier))
        });
        // A repeat is known now; the tokens on from the rejection once the request
        // has committed them (block position 0 is the seed, the last token committed
        // before this round).
        let mut misplaced = None;
        let mut due = None;
        if let Some(q) = v.first_reject.filter(|&q| q > 0 && q < d.block.len()) {
            let repeat = d.block[q] == d.block[q - 1];
            misplaced = Some(repeat);
            if let (Some(seed_at), false) = (r.committed_before.checked_sub(1), repeat) {
                due = Some((seed_at + q, d.block[q]));
            }
        }
        let judged_len = v.first_reject.unwrap_or(d.detail.len()).min(d.detail.len());
        let judged = d.detail[..judged_len]
            .iter()
            .zip(&v.verifier_tokens)
            .filter_map(|(pos, t)| pos.top.first().map(|top| (top.1, top.0 == *t)))
            .collect();
        let mut rec = RoundRecord {
            req: r.req,
            family: r.family.clone(),
            round: r.round,
            block: d.block.len().max(1),
            advance: v.accepted + 1,
            ended: false,
            first_reject: v.first_reject,
            margin_at_reject,
            second_choice_right,
            misplaced,
            judged,
            risky: d.risky.clone(),
            reused: d.reused,
            built: r.branches.iter().map(|b| b.kind).collect(),
            branches: r.outcome,
        };
        rec.end_after(r.committed.len());
        Some((rec, due))
    }
}

/// Every verified round in `events` that committed, in order ([`Assembler`] reads
/// them). Requests may interleave.
pub fn round_records<'a>(events: impl IntoIterator<Item = &'a DecodeEvent>) -> Vec<RoundRecord> {
    let mut rounds = Assembler::default();
    let mut out: Vec<RoundRecord> = Vec::new();
    // Each request's committed tokens, and the rejections whose `misplaced` needs the
    // tokens committed after them: (index in `out`, position of the rejected token in
    // the request's output, the token drafted there).
    let mut committed: HashMap<RequestId, Vec<u32>> = HashMap::new();
    let mut pending: Vec<(usize, usize, u32)> = Vec::new();
    for e in events {
        if let DecodeEvent::Committed { req, tokens, .. } = e {
            committed.entry(*req).or_default().extend(tokens);
        }
        let Some((rec, due)) = rounds
            .push(e)
            .ok()
            .flatten()
            .as_ref()
            .and_then(RoundRecord::of)
        else {
            continue;
        };
        if let Some((at, token)) = due {
            pending.push((out.len(), at, token));
        }
        out.push(rec);
    }
    for (i, at, token) in pending {
        if out[i].first_reject.is_none() {
            continue; // the rejection fell after the answer's end
        }
        let later = committed.get(&out[i].req).map_or(&[][..], Vec::as_slice);
        if later.iter().skip(at + 1).take(2).any(|&t| t == token) {
            out[i].misplaced = Some(true);
        } else if later.len() < at + 3 {
            out[i].misplaced = None; // the answer ended before it could be due
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::PosView;

    /// `request_started` (the assembler reads no round of a request before it).
    fn started(req: RequestId, family: Option<&str>) -> DecodeEvent {
        DecodeEvent::RequestStarted {
            req,
            mode: crate::engine::Mode::Linear,
            blocks: crate::engine::Blocks::Fixed(4),
            overlap: false,
            prompt_tokens: 3,
            max_new_tokens: 8,
            family: family.map(str::to_string),
        }
    }

    fn pos(top: &[(u32, f32)]) -> PosView {
        PosView {
            margin: top[0].1 - top.get(1).map_or(0.0, |t| t.1),
            confidence: top[0].1,
            entropy: 0.0,
            top: top.to_vec(),
        }
    }

    #[test]
    fn rounds_pair_drafts_with_verdicts_per_request() {
        let drafted = |req, block: Vec<u32>, detail: Vec<PosView>| DecodeEvent::Drafted {
            req,
            round: 1,
            margins: detail.iter().map(|p| p.margin).collect(),
            block,
            risky: vec![2],
            reused: None,
            detail,
            rows: None,
        };
        let events = vec![
            started(1, Some("math")),
            started(2, None),
            drafted(
                1,
                vec![5, 6, 7, 8],
                vec![
                    pos(&[(6, 0.9)]),
                    pos(&[(7, 0.5), (9, 0.4)]),
                    pos(&[(8, 0.9)]),
                ],
            ),
            drafted(2, vec![5, 6], vec![pos(&[(6, 0.9)])]),
            DecodeEvent::Verified {
                req: 2,
                round: 1,
                accepted: 1,
                first_reject: None,
                verifier_tokens: vec![6, 3],
                bonus: 3,
                detail: vec![],
            },
            DecodeEvent::Verified {
                req: 1,
                round: 1,
                accepted: 1,
                first_reject: Some(2),
                verifier_tokens: vec![6, 9, 1],
                bonus: 9,
                detail: vec![],
            },
        ];
        // A round counts once it has committed (a recording may stop between).
        assert!(round_records(&events).is_empty());
        let mut events = events;
        for (req, tokens) in [(2, vec![6, 3]), (1, vec![6, 9])] {
            events.push(DecodeEvent::Committed {
                req,
                round: 1,
                tokens,
                origins: vec![],
                text: String::new(),
            });
        }
        let r = round_records(&events);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].req, r[0].block, r[0].advance), (2, 2, 2));
        assert_eq!(r[0].family, None);
        assert_eq!(r[1].family.as_deref(), Some("math"));
        assert_eq!(
            (r[1].block, r[1].advance, r[1].first_reject),
            (4, 2, Some(2))
        );
        assert_eq!(
            r[1].second_choice_right,
            Some(true),
            "9 was the draft's second"
        );
        assert!((r[1].margin_at_reject.unwrap() - 0.1).abs() < 1e-6);
        assert_eq!(
            r[0].judged,
            vec![(0.9, true)],
            "a full block: every position"
        );
        assert_eq!(
            r[1].judged,
            vec![(0.9, true), (0.5, false)],
            "up to the first rejection, not past it"
        );
    }

    #[test]
    fn a_rejected_token_is_misplaced_when_repeated_or_due_later() {
        let commit = |round, tokens: &[u32]| DecodeEvent::Committed {
            req: 1,
            round,
            tokens: tokens.to_vec(),
            origins: vec![],
            text: String::new(),
        };
        let round = |round, block: Vec<u32>, q: usize| {
            [
                DecodeEvent::Drafted {
                    req: 1,
                    round,
                    margins: vec![0.9; block.len() - 1],
                    block,
                    risky: vec![],
                    reused: None,
                    detail: vec![],
                    rows: None,
                },
                DecodeEvent::Verified {
                    req: 1,
                    round,
                    accepted: q - 1,
                    first_reject: Some(q),
                    verifier_tokens: vec![],
                    bonus: 0,
                    detail: vec![],
                },
            ]
        };
        // The request's tokens: 10 11 12 13 14 15 16 17 18.
        let mut events = vec![started(1, None), commit(0, &[10])];
        events.extend(round(1, vec![10, 11, 11, 12], 2)); // repeats 11
        events.push(commit(1, &[11, 12]));
        events.extend(round(2, vec![12, 14, 15], 1)); // 14 is due one place on
        events.push(commit(2, &[13]));
        events.extend(round(3, vec![13, 14, 9, 16], 2)); // 9 is nowhere near
        events.push(commit(3, &[14, 15]));
        events.extend(round(4, vec![15, 16, 17, 5], 3)); // right until 3, 5 not due yet
        events.push(commit(4, &[16, 17, 18]));
        // Until two more tokens are out, whether 5 was due is not known.
        let r = round_records(&events);
        assert_eq!(r[3].misplaced, None);
        events.push(commit(5, &[19, 20]));
        let r = round_records(&events);
        let misplaced: Vec<_> = r.iter().map(|r| r.misplaced).collect();
        assert_eq!(
            misplaced,
            [Some(true), Some(true), Some(false), Some(false)]
        );
    }

    #[test]
    fn a_round_the_answer_ends_in_counts_up_to_the_end() {
        // B = 6: the draft has EOS (2) at position 2 and the verifier agrees; it also
        // agrees with positions 3 and 4 and rejects 5, after the answer's end.
        let detail = |c: f32| pos(&[(7, c), (8, 0.9 - c)]);
        let events = vec![
            started(1, None),
            DecodeEvent::Committed {
                req: 1,
                round: 0,
                tokens: vec![5],
                origins: vec![],
                text: String::new(),
            },
            DecodeEvent::Drafted {
                req: 1,
                round: 1,
                margins: vec![0.9; 5],
                block: vec![5, 6, 2, 1, 1, 9],
                risky: vec![2, 5],
                reused: None,
                detail: (0..5).map(|_| detail(0.95)).collect(),
                rows: None,
            },
            DecodeEvent::Verified {
                req: 1,
                round: 1,
                accepted: 4,
                first_reject: Some(5),
                verifier_tokens: vec![6, 2, 1, 1, 4, 3],
                bonus: 4,
                detail: vec![],
            },
            // As a recording before event version 3 has it: judged past the end.
            DecodeEvent::BranchResolved {
                req: 1,
                round: 1,
                outcome: BranchOutcome::Hit {
                    index: 0,
                    kind: BranchKind::Continuation,
                },
            },
            DecodeEvent::Committed {
                req: 1,
                round: 1,
                tokens: vec![6, 2],
                origins: vec![],
                text: String::new(),
            },
        ];
        let r = round_records(&events);
        assert_eq!(
            (r[0].advance, r[0].ended, r[0].first_reject),
            (2, true, None)
        );
        assert_eq!(
            (r[0].margin_at_reject, r[0].misplaced),
            (None, None),
            "the rejection after the end is not one"
        );
        assert_eq!(r[0].judged.len(), 2);
        assert_eq!(r[0].risky, vec![2]);
        assert_eq!(
            r[0].branches,
            Some(BranchOutcome::Miss {
                reason: crate::engine::events::MissReason::Ended
            })
        );
        // A round that keeps all it advanced has not ended.
        let mut whole = events.clone();
        whole[5] = DecodeEvent::Committed {
            req: 1,
            round: 1,
            tokens: vec![6, 2, 1, 1, 4],
            origins: vec![],
            text: String::new(),
        };
        let r = round_records(&whole);
        assert_eq!(
            (r[0].advance, r[0].ended, r[0].first_reject),
            (5, false, Some(5))
        );
    }
}
