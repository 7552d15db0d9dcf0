//! The assembler on hand-made event sequences: each round, its order errors.

use super::*;
use crate::engine::{Blocks, Mode};

fn started(req: RequestId) -> DecodeEvent {
    DecodeEvent::RequestStarted {
        req,
        mode: Mode::Recguide,
        blocks: Blocks::Fixed(4),
        overlap: true,
        prompt_tokens: 3,
        max_new_tokens: 16,
        family: Some("math".into()),
    }
}

fn drafted(req: RequestId, round: usize, block: Vec<u32>) -> DecodeEvent {
    DecodeEvent::Drafted {
        req,
        round,
        margins: vec![0.5; block.len() - 1],
        block,
        risky: vec![1],
        reused: None,
        detail: vec![],
        rows: None,
    }
}

fn verified(req: RequestId, round: usize, accepted: usize, tokens: Vec<u32>) -> DecodeEvent {
    DecodeEvent::Verified {
        req,
        round,
        accepted,
        first_reject: (accepted + 1 < tokens.len()).then_some(accepted + 1),
        bonus: tokens[accepted],
        verifier_tokens: tokens,
        detail: vec![],
    }
}

fn committed(req: RequestId, round: usize, tokens: Vec<u32>) -> DecodeEvent {
    DecodeEvent::Committed {
        req,
        round,
        tokens,
        origins: vec![],
        text: String::new(),
    }
}

/// Interleaved requests each get their rounds whole, at their commits, with what
/// the request had committed before; the prefill's commit is no round.
#[test]
fn rounds_complete_at_their_commit_per_request() {
    let branch = BranchView {
        kind: BranchKind::Continuation,
        at: 4,
        alt: None,
        tokens: 4,
        block: vec![1, 2, 3, 4],
    };
    let events = [
        started(1),
        started(2),
        committed(1, 0, vec![7]),
        committed(2, 0, vec![8]),
        drafted(1, 1, vec![7, 1, 2, 3]),
        drafted(2, 1, vec![8, 1, 2, 3]),
        DecodeEvent::BranchesBuilt {
            req: 1,
            round: 1,
            branches: vec![branch.clone()],
        },
        verified(2, 1, 1, vec![1, 5, 6, 6]),
        verified(1, 1, 3, vec![1, 2, 3, 9]),
        DecodeEvent::BranchResolved {
            req: 1,
            round: 1,
            outcome: BranchOutcome::Hit {
                index: 0,
                kind: BranchKind::Continuation,
            },
        },
        committed(1, 1, vec![1, 2, 3, 9]),
        committed(2, 1, vec![1, 5]),
    ];
    let mut a = Assembler::default();
    let rounds: Vec<Round> = events.iter().filter_map(|e| a.push(e).unwrap()).collect();
    assert_eq!(rounds.len(), 2);
    let (r1, r2) = (&rounds[0], &rounds[1]);
    assert_eq!((r1.req, r1.round, r1.committed_before), (1, 1, 1));
    assert_eq!(r1.family.as_deref(), Some("math"));
    assert_eq!(r1.branches, vec![branch]);
    let t = r1.tally();
    assert_eq!(
        (t.block, t.advance, t.ended, t.drafted),
        (4, 4, false, true)
    );
    assert_eq!(t.hit, Some(BranchKind::Continuation));
    assert_eq!((t.branches.len(), t.branch_tokens), (1, 4));
    assert_eq!((r2.req, r2.verdict_advance(), r2.tally().hit), (2, 2, None));
    assert!(
        r2.branches.is_empty(),
        "request 1's rows are not request 2's"
    );
    assert_eq!(Assembler::rounds(&events), rounds);
}

/// A round whose answer ends inside it counts what it committed, and has ended.
#[test]
fn a_round_cut_at_the_answers_end_has_ended() {
    let events = [
        started(1),
        drafted(1, 1, vec![7, 1, 2, 3]),
        verified(1, 1, 3, vec![1, 2, 3, 9]),
        committed(1, 1, vec![1, 2]),
    ];
    let r = &Assembler::rounds(&events)[0];
    assert!(r.ended());
    assert_eq!((r.tally().advance, r.tally().ended), (2, true));
}

/// Rounds out of turn are errors (and dropped); a round cut off before its commit
/// gives way to the next; a request that never started has no rounds.
#[test]
fn the_round_order_is_checked() {
    let mut a = Assembler::default();
    a.push(&started(1)).unwrap();
    a.push(&verified(1, 2, 0, vec![5, 6])).unwrap();
    assert_eq!(
        a.push(&verified(1, 2, 0, vec![5, 6])),
        Err(OrderError::Again {
            what: "verified",
            round: 2,
            req: 1
        })
    );
    assert_eq!(
        a.push(&verified(1, 1, 0, vec![5, 6])),
        Err(OrderError::Behind {
            what: "verified",
            round: 1,
            prev: 2,
            req: 1
        })
    );
    // Round 2 never committed: round 3 starts afresh.
    a.push(&drafted(1, 3, vec![5, 6, 7])).unwrap();
    a.push(&verified(1, 3, 2, vec![6, 7, 8])).unwrap();
    let r = a.push(&committed(1, 3, vec![6, 7, 8])).unwrap().unwrap();
    assert_eq!(
        (r.round, r.draft.map(|d| d.block)),
        (3, Some(vec![5, 6, 7]))
    );
    assert_eq!(
        a.push(&committed(1, 3, vec![1])),
        Err(OrderError::Again {
            what: "committed",
            round: 3,
            req: 1
        })
    );
    assert_eq!(
        a.push(&drafted(9, 1, vec![1, 2])),
        Err(OrderError::NotStarted(9))
    );
    let refused = DecodeEvent::Error {
        req: Some(9),
        message: "refused".into(),
    };
    assert_eq!(
        a.push(&refused),
        Ok(None),
        "a refused submission never started"
    );
    assert_eq!(
        OrderError::NotStarted(9).to_string(),
        "request 9 has no `request_started` before this line"
    );
}

/// The round being gathered is there to show before it completes; an adopting
/// assembler (the screen's) takes in a request whose start it did not see.
#[test]
fn the_open_round_shows_before_its_commit() {
    let mut a = Assembler::default();
    a.push(&started(1)).unwrap();
    a.push(&drafted(1, 1, vec![7, 1, 2])).unwrap();
    let open = a.round(1, 1).unwrap();
    assert_eq!((open.round, open.verdict.is_none()), (1, true));
    assert_eq!(open.draft.as_ref().map(|d| d.block.len()), Some(3));
    a.push(&verified(1, 1, 2, vec![1, 2, 5])).unwrap();
    let bonus = |a: &Assembler| {
        a.round(1, 1)
            .and_then(|r| r.verdict.as_ref())
            .map(|v| v.bonus)
    };
    assert_eq!(bonus(&a), Some(5));
    // Committed, it is still there, and an event of its round after the commit (an
    // older recording's order) reaches it.
    a.push(&committed(1, 1, vec![1, 2, 5])).unwrap();
    assert_eq!(bonus(&a), Some(5));
    let resolved = DecodeEvent::BranchResolved {
        req: 1,
        round: 1,
        outcome: BranchOutcome::Miss {
            reason: crate::engine::events::MissReason::Ended,
        },
    };
    a.push(&resolved).unwrap();
    assert!(a.round(1, 1).unwrap().outcome.is_some());
    assert!(a.round(1, 2).is_none());
    let mut screen = Assembler::adopting();
    assert_eq!(screen.push(&drafted(4, 2, vec![1, 2])), Ok(None));
    assert_eq!(screen.round(4, 2).map(|r| r.round), Some(2));
}

/// A diffusion round is its denoising steps and the block written; it counts as a
/// block, by what it committed and how much of it AR would have emitted.
#[test]
fn a_diffusion_round_counts_as_a_block() {
    let events = [
        started(1),
        DecodeEvent::Denoised {
            req: 1,
            round: 1,
            step: 1,
            canvas: vec![Some(4), None],
            positions: vec![0],
            confidence: vec![0.9],
        },
        DecodeEvent::BlockWritten {
            req: 1,
            round: 1,
            block: vec![4, 5],
            steps: vec![1, 2],
            ar: vec![4, 6],
        },
        committed(1, 1, vec![4, 5]),
    ];
    let r = &Assembler::rounds(&events)[0];
    assert!(r.verdict.is_none());
    let d = r.denoise.as_ref().unwrap();
    assert_eq!(
        (d.steps, d.step_of.clone(), d.canvas.len()),
        (1, vec![1, 0], 2)
    );
    let mut t = Tally::default();
    r.count_in(&mut t);
    assert_eq!((t.ar_judged, t.ar_agree), (2, 1));
    assert_eq!(t.denoise_forwards, 2);
}
