//! RecGuide draft–verify overlap: risky positions, correction and continuation
//! branches fused with verification, and the exact reuse rule (reference §2.2–2.5).

use serde::{Deserialize, Serialize};

use super::round::Verdict;
use super::signals::PosSignals;
use crate::model::{AttnRule, LogitSel, Row};

/// Which branch rows to build for a given number of crossings (reference §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RowTable {
    /// ≤ 2 crossings: corrections + continuation; ≥ 3: P1, P2, P3.
    Multi,
    /// Up to two corrections (P1, P2) and always the continuation.
    #[default]
    TwoPlusNew,
    /// Like two_plus_new, but ≥ 3 crossings drop the continuation.
    NoP3,
    /// P1 only, continuation while there are at most two crossings.
    P1ConditionalNew,
}

impl RowTable {
    /// (correction ranks to build, build the continuation) for `crossings`.
    fn plan(self, crossings: usize) -> (usize, bool) {
        match (self, crossings) {
            (_, 0) => (0, true),
            (_, 1) => (1, true),
            (RowTable::P1ConditionalNew, 2) => (1, true),
            (_, 2) => (2, true),
            (RowTable::Multi, _) => (3, false),
            (RowTable::TwoPlusNew, _) => (2, true),
            (RowTable::NoP3, _) => (2, false),
            (RowTable::P1ConditionalNew, _) => (1, false),
        }
    }
}

/// Kind of a speculative next-draft branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum BranchKind {
    /// Re-draft from the `rank`-th risky position with the alternative token.
    Correction { rank: u8 },
    /// Draft the next block assuming this one is fully accepted.
    Continuation,
}

impl BranchKind {
    /// Short label: P1, P2, P3 or new.
    pub fn label(self) -> String {
        match self {
            BranchKind::Correction { rank } => format!("P{rank}"),
            BranchKind::Continuation => "new".to_string(),
        }
    }
}

/// One branch row: `tokens[..causal_len]` is the causal draft prefix, the rest is the
/// prospective next block `[alt | MASK, MASK × (B − 1)]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    pub kind: BranchKind,
    /// Block position the branch re-drafts from (B for the continuation).
    pub at: usize,
    /// The alternative token placed at `at` (corrections only).
    pub alt: Option<u32>,
    pub causal_len: usize,
    pub tokens: Vec<u32>,
}

impl Branch {
    /// The row to fuse with verification: read-only, LoRA and logits on the block.
    pub fn row(&self, cache: usize) -> Row {
        let block = self.tokens.len() - self.causal_len;
        Row::new(
            cache,
            self.tokens.clone(),
            AttnRule::CausalThenBlock {
                causal_len: self.causal_len,
            },
        )
        .lora_from(self.causal_len)
        .logits(LogitSel::Range {
            start: self.causal_len,
            len: block,
        })
    }
}

/// Block positions 1..B whose draft margin is below `threshold` (strictly), in order.
/// `draft[i]` holds the signals of block position i + 1; position 0 (the seed) never
/// counts.
pub fn risky_positions(draft: &[PosSignals], threshold: f32) -> Vec<usize> {
    draft
        .iter()
        .enumerate()
        .filter(|(_, s)| s.margin < threshold)
        .map(|(i, _)| i + 1)
        .collect()
}

/// Limits on what a branch may cover.
#[derive(Debug, Clone, Copy)]
pub struct BranchRoom {
    /// Positions left in the context after the committed cache.
    pub context: usize,
    /// Tokens the request may still emit.
    pub budget: usize,
}

/// Builds the branch rows for a draft block per `table`. `banned` holds the mask and
/// EOS ids (never an alternative).
pub fn plan_branches(
    block: &[u32],
    draft: &[PosSignals],
    risky: &[usize],
    table: RowTable,
    mask_id: u32,
    banned: &[u32],
    room: BranchRoom,
) -> Vec<Branch> {
    let b = block.len();
    let (ranks, new) = table.plan(risky.len());
    let mut out = Vec::new();
    for (rank, &p) in risky.iter().enumerate().take(ranks) {
        if p + b > room.context || p >= room.budget {
            continue; // keeps the rank label: P2 stays P2 if P1 was skipped
        }
        let Some(alt) = draft[p - 1].alternative(block[p], banned) else {
            continue;
        };
        let mut tokens = block[..p].to_vec();
        tokens.push(alt);
        tokens.extend(std::iter::repeat_n(mask_id, b - 1));
        out.push(Branch {
            kind: BranchKind::Correction {
                rank: rank as u8 + 1,
            },
            at: p,
            alt: Some(alt),
            causal_len: p,
            tokens,
        });
    }
    if new && 2 * b <= room.context && room.budget > b {
        let mut tokens = block.to_vec();
        tokens.extend(std::iter::repeat_n(mask_id, b));
        out.push(Branch {
            kind: BranchKind::Continuation,
            at: b,
            alt: None,
            causal_len: b,
            tokens,
        });
    }
    out
}

/// Why no branch was reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissReason {
    /// No branch row was built this round.
    NoBranches,
    /// The first reject came before the first correction position.
    Before,
    /// The first reject fell between two correction positions.
    Between,
    /// The first reject came after the last correction position (or there was none).
    After,
    /// Reject at a correction position, but the verifier chose another token.
    WrongCandidate,
    /// Full block accepted but the continuation predicted another first token.
    ContinuationMiss,
    /// Full block accepted and no continuation was built.
    ContinuationAbsent,
}

/// The fate of this round's branches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum BranchOutcome {
    Hit { index: usize, kind: BranchKind },
    Miss { reason: MissReason },
}

/// Exact reuse rule (reference §2.5). `continuation_first` is the continuation's
/// predicted token at its block position 0, when built.
pub fn resolve(
    branches: &[Branch],
    verdict: &Verdict,
    continuation_first: Option<u32>,
) -> BranchOutcome {
    let miss = |reason| BranchOutcome::Miss { reason };
    if branches.is_empty() {
        return miss(MissReason::NoBranches);
    }
    match verdict.first_reject {
        Some(q) => {
            if let Some((i, br)) = branches
                .iter()
                .enumerate()
                .find(|(_, b)| matches!(b.kind, BranchKind::Correction { .. }) && b.at == q)
            {
                // ar[q − 1] is the verifier's token for position q.
                return if Some(verdict.verifier_tokens[q - 1]) == br.alt {
                    BranchOutcome::Hit {
                        index: i,
                        kind: br.kind,
                    }
                } else {
                    miss(MissReason::WrongCandidate)
                };
            }
            let ats: Vec<usize> = branches
                .iter()
                .filter(|b| matches!(b.kind, BranchKind::Correction { .. }))
                .map(|b| b.at)
                .collect();
            match (ats.iter().min(), ats.iter().max()) {
                (Some(&lo), _) if q < lo => miss(MissReason::Before),
                (_, Some(&hi)) if q < hi => miss(MissReason::Between),
                _ => miss(MissReason::After),
            }
        }
        None => match branches
            .iter()
            .position(|b| b.kind == BranchKind::Continuation)
        {
            Some(i) if continuation_first == Some(verdict.bonus) => BranchOutcome::Hit {
                index: i,
                kind: BranchKind::Continuation,
            },
            Some(_) => miss(MissReason::ContinuationMiss),
            None => miss(MissReason::ContinuationAbsent),
        },
    }
}

/// The next round's draft block from a hit: position 0 is the new seed.
pub fn reused_block(branch: &Branch, predicted: &[u32], seed: u32) -> Vec<u32> {
    let mut block = vec![seed];
    block.extend_from_slice(&predicted[1..]);
    debug_assert!(branch.alt.is_none_or(|a| a == seed));
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::round::verify;
    use crate::engine::signals::signals_of;

    const MASK: u32 = 99;

    /// Signals whose top two are `(a, pa)`, `(b, pb)` over a 100-token vocabulary.
    fn sig(a: u32, b: u32, margin_small: bool) -> PosSignals {
        let mut row = vec![-10.0f32; 100];
        row[a as usize] = 5.0;
        row[b as usize] = if margin_small { 4.9 } else { 0.0 };
        signals_of(&row, MASK)
    }

    fn room() -> BranchRoom {
        BranchRoom {
            context: 1000,
            budget: 1000,
        }
    }

    /// Block [10, 11, 12, 13, 14]; positions 2 and 4 risky with alternatives 22 and 24.
    fn setup() -> (Vec<u32>, Vec<PosSignals>, Vec<usize>) {
        let block = vec![10, 11, 12, 13, 14];
        let draft = vec![
            sig(11, 21, false),
            sig(12, 22, true),
            sig(13, 23, false),
            sig(14, 24, true),
        ];
        let risky = risky_positions(&draft, 0.5);
        (block, draft, risky)
    }

    #[test]
    fn risky_positions_and_rows() {
        let (block, draft, risky) = setup();
        assert_eq!(risky, vec![2, 4]);
        let br = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::TwoPlusNew,
            MASK,
            &[MASK, 7],
            room(),
        );
        assert_eq!(br.len(), 3);
        assert_eq!(br[0].tokens, vec![10, 11, 22, MASK, MASK, MASK, MASK]);
        assert_eq!((br[0].at, br[0].causal_len, br[0].alt), (2, 2, Some(22)));
        assert_eq!(br[1].kind, BranchKind::Correction { rank: 2 });
        assert_eq!(
            br[2].tokens,
            vec![10, 11, 12, 13, 14, MASK, MASK, MASK, MASK, MASK]
        );
        let row = br[0].row(3);
        assert_eq!(row.rule, AttnRule::CausalThenBlock { causal_len: 2 });
        assert_eq!(
            (row.lora_from, row.logits.clone()),
            (Some(2), LogitSel::Range { start: 2, len: 5 })
        );
        // Tables differ at three crossings.
        let three = [1, 2, 3];
        let d3 = vec![
            sig(11, 21, true),
            sig(12, 22, true),
            sig(13, 23, true),
            sig(14, 24, false),
        ];
        let kinds = |t| plan_branches(&block, &d3, &three, t, MASK, &[MASK], room()).len();
        assert_eq!(kinds(RowTable::Multi), 3);
        assert_eq!(kinds(RowTable::TwoPlusNew), 3);
        assert_eq!(kinds(RowTable::NoP3), 2);
        assert_eq!(kinds(RowTable::P1ConditionalNew), 1);
        // The alternative skips EOS when EOS is second.
        let d = vec![sig(11, 7, true)];
        let b = plan_branches(
            &[10, 11],
            &d,
            &[1],
            RowTable::TwoPlusNew,
            MASK,
            &[MASK, 7],
            room(),
        );
        assert_ne!(b[0].alt, Some(7));
        // No room: nothing beyond the context.
        let tight = BranchRoom {
            context: 6,
            budget: 1000,
        };
        let b = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::TwoPlusNew,
            MASK,
            &[MASK],
            tight,
        );
        assert!(b
            .iter()
            .all(|x| x.tokens.len() <= 6 + x.causal_len && x.at + 5 <= 6));
    }

    #[test]
    fn every_reuse_case() {
        let (block, draft, risky) = setup();
        let br = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::TwoPlusNew,
            MASK,
            &[MASK],
            room(),
        );
        let out =
            |verifier: &[u32], cont: Option<u32>| resolve(&br, &verify(&block, verifier), cont);
        // Hit: reject at 2, verifier says 22 (ar[1]).
        assert_eq!(
            out(&[11, 22, 0, 0, 0], None),
            BranchOutcome::Hit {
                index: 0,
                kind: BranchKind::Correction { rank: 1 }
            }
        );
        // Hit at P2.
        assert_eq!(
            out(&[11, 12, 13, 24, 0], None),
            BranchOutcome::Hit {
                index: 1,
                kind: BranchKind::Correction { rank: 2 }
            }
        );
        // Wrong candidate at P1.
        assert_eq!(
            out(&[11, 30, 0, 0, 0], None),
            BranchOutcome::Miss {
                reason: MissReason::WrongCandidate
            }
        );
        // Before P1 (reject at 1), between (reject at 3), after (none after 4 possible: use
        // a table with only P1).
        assert_eq!(
            out(&[30, 0, 0, 0, 0], None),
            BranchOutcome::Miss {
                reason: MissReason::Before
            }
        );
        assert_eq!(
            out(&[11, 12, 30, 0, 0], None),
            BranchOutcome::Miss {
                reason: MissReason::Between
            }
        );
        let p1 = plan_branches(
            &block,
            &draft,
            &risky[..1],
            RowTable::P1ConditionalNew,
            MASK,
            &[MASK],
            room(),
        );
        let after = resolve(&p1, &verify(&block, &[11, 12, 30, 0, 0]), None);
        assert_eq!(
            after,
            BranchOutcome::Miss {
                reason: MissReason::After
            }
        );
        // Continuation hit and miss on a full block (bonus 50).
        assert_eq!(
            out(&[11, 12, 13, 14, 50], Some(50)),
            BranchOutcome::Hit {
                index: 2,
                kind: BranchKind::Continuation
            }
        );
        assert_eq!(
            out(&[11, 12, 13, 14, 50], Some(51)),
            BranchOutcome::Miss {
                reason: MissReason::ContinuationMiss
            }
        );
        // Full block without a continuation.
        let no_new = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::NoP3,
            MASK,
            &[MASK],
            room(),
        );
        assert_eq!(no_new.len(), 3, "two crossings still build new");
        let only_corr: Vec<Branch> = no_new
            .into_iter()
            .filter(|b| b.kind != BranchKind::Continuation)
            .collect();
        let full = resolve(&only_corr, &verify(&block, &[11, 12, 13, 14, 50]), None);
        assert_eq!(
            full,
            BranchOutcome::Miss {
                reason: MissReason::ContinuationAbsent
            }
        );
        assert_eq!(
            resolve(&[], &verify(&block, &[0; 5]), None),
            BranchOutcome::Miss {
                reason: MissReason::NoBranches
            }
        );
    }
}
