//! RecGuide draft–verify overlap: risky positions, correction and continuation
//! branches fused with verification, and the exact reuse rule (reference §2.2–2.5).

use serde::{Deserialize, Serialize};

pub use super::events::{BranchKind, BranchOutcome, MissReason};
use super::round::Verdict;
use super::signals::PosSignals;
use crate::model::{AttnRule, LogitSel, Row};

/// Which branch rows to build for a given number of crossings (reference §2.4). The
/// command line spells a table in kebab-case (`two-plus-new`), recordings and labels
/// in snake_case (`two_plus_new`): both derived from the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RowTable {
    /// ≤ 2 crossings: corrections + continuation; ≥ 3: P1, P2, P3.
    Multi,
    /// Up to two corrections (P1, P2) and always the continuation.
    TwoPlusNew,
    /// ≤ 2 crossings as two_plus_new; ≥ 3: P1's 2nd and 3rd candidates and P2's 2nd.
    /// The default: the most draft forwards saved on the bundled model among the
    /// reference's tables (docs/results.md, the row ablation).
    #[default]
    ConditionalRank,
    /// Like two_plus_new, but ≥ 3 crossings drop the continuation.
    NoP3,
    /// P1 only, continuation while there are at most two crossings.
    P1ConditionalNew,
    /// P1 and P2, never the continuation (the row ablation: correction rows alone).
    Corrections,
}

/// One correction to build: the `risky`-list index of its position and which
/// alternative (0: the best token other than the draft's, 1: the next one).
type Pick = (usize, usize);

impl RowTable {
    /// The name the command line and recordings use (`two_plus_new`, `conditional_rank`, ...).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// (corrections to build, build the continuation) for `crossings`.
    fn plan(self, crossings: usize) -> (Vec<Pick>, bool) {
        let first = |n: usize| (0..n.min(crossings)).map(|i| (i, 0)).collect();
        match (self, crossings) {
            (RowTable::Corrections, _) => (first(2), false),
            (_, 0) => (Vec::new(), true),
            (_, 1) => (first(1), true),
            (RowTable::P1ConditionalNew, 2) => (first(1), true),
            (_, 2) => (first(2), true),
            (RowTable::Multi, _) => (first(3), false),
            (RowTable::TwoPlusNew, _) => (first(2), true),
            (RowTable::ConditionalRank, _) => (vec![(0, 0), (0, 1), (1, 0)], false),
            (RowTable::NoP3, _) => (first(2), false),
            (RowTable::P1ConditionalNew, _) => (first(1), false),
        }
    }
}

/// Most speculative rows fused with one verify row (reference §2.4: ≤ 4 rows in all).
pub const MAX_BRANCH_ROWS: usize = 3;

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
    /// The continuation extends the verify row rather than riding as a row of its own:
    /// its causal prefix is the verified block itself, so the verify row's tokens are
    /// computed once (they attend causally and never see the block appended after them).
    pub fn extends_verify(&self) -> bool {
        self.kind == BranchKind::Continuation
    }

    /// Query tokens it adds to the verify forward: its prospective block where it
    /// extends the verify row, its whole row otherwise.
    pub fn added_tokens(&self) -> usize {
        if self.extends_verify() {
            self.tokens.len() - self.causal_len
        } else {
            self.tokens.len()
        }
    }

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
    // (rank label, block position, alternative rank)
    let (picks, new) = table.plan(risky.len());
    let corrections = picks.into_iter().map(|(i, k)| (i + 1, risky[i], k));
    let mut out = Vec::new();
    for (rank, p, k) in corrections {
        if p + b > room.context || p >= room.budget {
            continue; // keeps the rank label: P2 stays P2 if P1 was skipped
        }
        let Some((alt, _)) = draft[p - 1].alternatives(block[p], banned).nth(k) else {
            continue;
        };
        let mut tokens = block[..p].to_vec();
        tokens.push(alt);
        tokens.extend(std::iter::repeat_n(mask_id, b - 1));
        out.push(Branch {
            kind: BranchKind::Correction { rank: rank as u8 },
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
            // Corrections at q (two when a table builds a second candidate there);
            // ar[q − 1] is the verifier's token for position q.
            let mut at_q = branches
                .iter()
                .enumerate()
                .filter(|(_, b)| matches!(b.kind, BranchKind::Correction { .. }) && b.at == q)
                .peekable();
            if at_q.peek().is_some() {
                let want = Some(verdict.verifier_tokens[q - 1]);
                return match at_q.find(|(_, b)| b.alt == want) {
                    Some((i, br)) => BranchOutcome::Hit {
                        index: i,
                        kind: br.kind,
                    },
                    None => miss(MissReason::WrongCandidate),
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

    /// A miss is stated against the positions of the correction rows built, which may
    /// be fewer than the risky positions: for every reject position of a block whose
    /// risky positions outnumber its rows, the reason names rows, and it is "after"
    /// exactly when the reject is past the last row's position.
    #[test]
    fn miss_reasons_name_the_rows_built_not_every_risky_position() {
        let block: Vec<u32> = (10..18).collect();
        let draft: Vec<PosSignals> = (1..8)
            .map(|i| sig(block[i], 40 + i as u32, [2, 3, 6].contains(&i)))
            .collect();
        let risky = risky_positions(&draft, 0.5);
        assert_eq!(risky, vec![2, 3, 6]);
        let br = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::NoP3,
            MASK,
            &[MASK],
            room(),
        );
        let last_row = br
            .iter()
            .filter(|b| b.alt.is_some())
            .map(|b| b.at)
            .max()
            .unwrap();
        assert_eq!(last_row, 3, "two correction rows for three risky positions");
        for q in 1..8usize {
            let mut v = block[1..].to_vec();
            v.push(99);
            v[q - 1] = 77; // the verifier's token at position q differs from every alt
            let verdict = verify(&block, &v);
            let BranchOutcome::Miss { reason } = resolve(&br, &verdict, None) else {
                continue;
            };
            if reason == MissReason::WrongCandidate {
                continue; // a row at the reject, with another token
            }
            assert!(
                reason.describe().contains("correction row"),
                "{q}: {reason:?}"
            );
            assert_eq!(reason == MissReason::After, q > last_row, "{q}: {reason:?}");
        }
    }

    /// The corrections-only table (the row ablation) never builds the continuation.
    #[test]
    fn the_corrections_table_builds_no_continuation() {
        let (block, draft, risky) = setup();
        let br = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::Corrections,
            MASK,
            &[MASK, 7],
            room(),
        );
        let kinds: Vec<String> = br.iter().map(|b| b.kind.label()).collect();
        assert_eq!(kinds, ["P1", "P2"]);
        for n in 0..5 {
            assert!(!RowTable::Corrections.plan(n).1, "{n} crossings");
        }
        assert_eq!(RowTable::Corrections.name(), "corrections");
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

    /// Signals with these exact probabilities over a 100-token vocabulary.
    fn probs(ps: &[(u32, f32)]) -> PosSignals {
        let mut row = vec![-30.0f32; 100];
        for &(id, p) in ps {
            row[id as usize] = p.ln();
        }
        signals_of(&row, MASK)
    }

    #[test]
    fn conditional_rank_and_two_candidates_at_one_position() {
        let block = [10, 11, 12, 13, 14];
        let draft = vec![
            probs(&[(11, 0.5), (21, 0.3), (31, 0.2)]),
            probs(&[(12, 0.5), (22, 0.4)]),
            probs(&[(13, 0.5), (23, 0.4)]),
            probs(&[(14, 0.99)]),
        ];
        let risky = risky_positions(&draft, 0.5);
        assert_eq!(risky, vec![1, 2, 3]);
        let br = plan_branches(
            &block,
            &draft,
            &risky,
            RowTable::ConditionalRank,
            MASK,
            &[MASK],
            room(),
        );
        let got: Vec<(usize, Option<u32>)> = br.iter().map(|b| (b.at, b.alt)).collect();
        assert_eq!(got, vec![(1, Some(21)), (1, Some(31)), (2, Some(22))]);
        // The verifier's 31 at position 1 hits the second row at that position (both
        // rows re-draft from the first crossing, so both are P1).
        assert_eq!(
            resolve(&br, &verify(&block, &[31, 0, 0, 0, 0]), None),
            BranchOutcome::Hit {
                index: 1,
                kind: BranchKind::Correction { rank: 1 }
            }
        );
        assert_eq!(
            resolve(&br, &verify(&block, &[41, 0, 0, 0, 0]), None),
            BranchOutcome::Miss {
                reason: MissReason::WrongCandidate
            }
        );
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
