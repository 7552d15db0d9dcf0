//! One draft/verify round in pure functions: the acceptance rule, the one-position
//! shift between draft and verify logits, EOS and budget truncation.

use serde::{Deserialize, Serialize};

/// What the verifier made of a draft block `[seed, d1 .. d(B-1)]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// m: leading drafts that match the verifier.
    pub accepted: usize,
    /// q = m + 1, the first rejected block position; `None` when every draft matched.
    pub first_reject: Option<usize>,
    /// ar[i] = the verifier's token for block position i + 1.
    pub verifier_tokens: Vec<u32>,
    /// ar[m]: the correction (after a reject) or the bonus (after a full block).
    pub bonus: u32,
}

impl Verdict {
    /// Tokens advanced this round: the m matched drafts plus the bonus.
    pub fn advance(&self) -> usize {
        self.accepted + 1
    }

    /// The emitted tokens ar[0..=m] (the matched drafts equal ar[0..m]).
    pub fn emitted(&self) -> &[u32] {
        &self.verifier_tokens[..=self.accepted]
    }
}

/// Greedy exact-match acceptance. `block[0]` is the seed; `verifier[i]` predicts
/// `block[i + 1]` (causal logits are shifted by one, draft logits are not).
pub fn verify(block: &[u32], verifier: &[u32]) -> Verdict {
    assert_eq!(
        block.len(),
        verifier.len(),
        "one verifier token per block position"
    );
    let b = block.len();
    let accepted = (0..b.saturating_sub(1))
        .take_while(|&i| verifier[i] == block[i + 1])
        .count();
    Verdict {
        accepted,
        first_reject: (accepted + 1 < b).then_some(accepted + 1),
        verifier_tokens: verifier.to_vec(),
        bonus: verifier[accepted],
    }
}

/// The answer ended inside the block: the round kept fewer tokens than its verdict
/// advances (`truncate_emitted` cut them at an accepted EOS or at the budget), and
/// what the verifier said past the end is no part of the answer.
pub fn ended_inside(kept: usize, advance: usize) -> bool {
    kept < advance
}

/// Cuts emitted tokens after the first EOS and at the remaining budget; returns the
/// kept tokens and whether generation must stop (EOS seen or budget used up).
pub fn truncate_emitted(emitted: &[u32], eos: &[u32], budget_left: usize) -> (Vec<u32>, bool) {
    let mut kept = Vec::with_capacity(emitted.len());
    for &t in emitted.iter().take(budget_left) {
        kept.push(t);
        if eos.contains(&t) {
            return (kept, true);
        }
    }
    let done = kept.len() >= budget_left;
    (kept, done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptance_is_the_longest_matching_prefix_plus_bonus() {
        // block: seed 5, drafts 6 7 8; verifier says 6 7 9 | 4.
        let v = verify(&[5, 6, 7, 8], &[6, 7, 9, 4]);
        assert_eq!((v.accepted, v.first_reject, v.bonus), (2, Some(3), 9));
        assert_eq!(v.emitted(), &[6, 7, 9]);
        assert_eq!(v.advance(), 3);
        // Immediate reject: one token per round, the verifier's.
        let v = verify(&[5, 6, 7, 8], &[1, 7, 8, 4]);
        assert_eq!(
            (v.accepted, v.first_reject, v.emitted()),
            (0, Some(1), &[1u32][..])
        );
        // Full block: B − 1 drafts plus the bonus from the last position.
        let v = verify(&[5, 6, 7, 8], &[6, 7, 8, 4]);
        assert_eq!(
            (v.accepted, v.first_reject, v.emitted()),
            (3, None, &[6, 7, 8, 4][..])
        );
    }

    #[test]
    fn the_shift_compares_verifier_i_with_block_i_plus_1() {
        // A verifier that repeats the block unshifted accepts nothing.
        let v = verify(&[5, 6, 7], &[5, 6, 7]);
        assert_eq!(v.accepted, 0);
        assert_eq!(v.bonus, 5);
    }

    #[test]
    fn block_of_one_is_ar() {
        let v = verify(&[5], &[9]);
        assert_eq!(
            (v.accepted, v.first_reject, v.emitted()),
            (0, None, &[9u32][..])
        );
    }

    #[test]
    fn eos_and_budget_truncate() {
        assert_eq!(
            truncate_emitted(&[1, 2, 3, 4], &[3], 10),
            (vec![1, 2, 3], true)
        );
        assert_eq!(truncate_emitted(&[1, 2, 3, 4], &[9], 2), (vec![1, 2], true));
        assert_eq!(truncate_emitted(&[1, 2], &[9], 5), (vec![1, 2], false));
        // EOS beyond the budget is not reached.
        assert_eq!(truncate_emitted(&[1, 2, 3], &[3], 2), (vec![1, 2], true));
    }
}
