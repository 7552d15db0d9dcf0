//! What one request does in a round: its block, its draft, its branch rows, and the
//! rows it puts in the round's forwards.

use crate::engine::overlap::{Branch, BranchKind};
use crate::engine::policy::RowKey;
use crate::engine::signals::PosSignals;
use crate::model::{AttnRule, LogitSel, Row};

/// What one request does this round.
pub(super) struct Plan {
    pub(super) req: usize,
    pub(super) block_size: usize,
    pub(super) block: Vec<u32>,
    pub(super) draft: Vec<PosSignals>,
    /// A draft forward ran for it.
    pub(super) drafted: bool,
    pub(super) reused: Option<BranchKind>,
    pub(super) risky: Vec<usize>,
    pub(super) branches: Vec<Branch>,
    /// The hit-rate key of each branch row (what the policy learns from its fate).
    pub(super) row_keys: Vec<RowKey>,
    /// Its `Drafted` went out (its risky positions and rows are planned).
    pub(super) announced: bool,
}

impl Plan {
    /// It has no draft yet: a fresh block still to draft.
    pub(super) fn needs_draft(&self) -> bool {
        self.block_size > 1 && self.reused.is_none() && !self.drafted
    }

    /// The verify row (committing, logits everywhere), extended by the continuation's
    /// block when it has one (`Branch::extends_verify`), and which branch that is.
    pub(super) fn verify_row(&self, slot: usize) -> (Row, Option<usize>) {
        match self.branches.iter().position(Branch::extends_verify) {
            Some(k) => (
                self.branches[k].row(slot).commit().logits(LogitSel::All),
                Some(k),
            ),
            None => (
                Row::new(slot, self.block.clone(), AttnRule::Causal)
                    .commit()
                    .logits(LogitSel::All),
                None,
            ),
        }
    }

    /// Positions the verify row writes to the cache (the block, and an extending
    /// continuation's), of which the verdict keeps a prefix.
    pub(super) fn verify_len(&self) -> usize {
        self.block.len()
            + self
                .branches
                .iter()
                .find(|br| br.extends_verify())
                .map_or(0, |br| br.added_tokens())
    }

    /// The bidirectional draft row of a fresh block: `[seed, MASK × (B − 1)]` after the
    /// committed context, through the draft adapter, in cache slot `slot`.
    pub(super) fn draft_row(&self, slot: usize, mask: u32) -> Row {
        let b = self.block_size;
        let mut tokens = vec![self.block[0]];
        tokens.extend(std::iter::repeat_n(mask, b - 1));
        Row::new(slot, tokens, AttnRule::Bidirectional)
            .lora_from(0)
            .logits(LogitSel::Range {
                start: 1,
                len: b - 1,
            })
    }
}
