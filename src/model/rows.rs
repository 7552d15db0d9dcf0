//! What one forward computes: rows of new tokens, each with its own attention rule.

/// How a row's tokens attend over `[committed prefix | row tokens]`. Every rule sees the
/// whole committed prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnRule {
    /// Token t sees row tokens 0..=t (AR prefill, AR decode, verification).
    Causal,
    /// Every token sees every row token (the diffusion draft of a block).
    Bidirectional,
    /// Tokens before `causal_len` are causal; the tokens from `causal_len` on form a
    /// block that sees the whole row (RecGuide correction and continuation rows).
    CausalThenBlock { causal_len: usize },
}

impl AttnRule {
    /// May row token `t` see row token `u`?
    pub fn allows(self, t: usize, u: usize) -> bool {
        match self {
            AttnRule::Causal => u <= t,
            AttnRule::Bidirectional => true,
            AttnRule::CausalThenBlock { causal_len } => t >= causal_len || u <= t,
        }
    }

    /// True when no row token is hidden from any other (no mask needed).
    pub fn is_unmasked(self, row_len: usize) -> bool {
        match self {
            AttnRule::Causal => row_len <= 1,
            AttnRule::Bidirectional => true,
            AttnRule::CausalThenBlock { causal_len } => causal_len == 0 || row_len <= 1,
        }
    }
}

/// Which positions of a row get logits (the head is vocabulary-wide, so ask sparingly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogitSel {
    None,
    Last,
    All,
    /// Row-local positions `start..start + len`.
    Range {
        start: usize,
        len: usize,
    },
}

impl LogitSel {
    /// The row-local indices selected for a row of `row_len` tokens.
    pub fn indices(&self, row_len: usize) -> Vec<usize> {
        match *self {
            LogitSel::None => vec![],
            LogitSel::Last => vec![row_len - 1],
            LogitSel::All => (0..row_len).collect(),
            LogitSel::Range { start, len } => (start..(start + len).min(row_len)).collect(),
        }
    }
}

/// One run of new tokens at positions `cache.len() ..` of the request whose cache is
/// `caches[cache]` in the forward call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub cache: usize,
    pub tokens: Vec<u32>,
    pub rule: AttnRule,
    /// Append this row's keys and values to the cache after the forward. At most one
    /// committing row per cache per forward.
    pub commit: bool,
    /// Apply the draft-only LoRA to row tokens from this index on.
    pub lora_from: Option<usize>,
    pub logits: LogitSel,
}

impl Row {
    /// A read-only row with no LoRA and no logits; refine with the builder methods.
    pub fn new(cache: usize, tokens: Vec<u32>, rule: AttnRule) -> Self {
        Self {
            cache,
            tokens,
            rule,
            commit: false,
            lora_from: None,
            logits: LogitSel::None,
        }
    }

    pub fn commit(mut self) -> Self {
        self.commit = true;
        self
    }

    pub fn lora_from(mut self, from: usize) -> Self {
        self.lora_from = Some(from);
        self
    }

    pub fn logits(mut self, sel: LogitSel) -> Self {
        self.logits = sel;
        self
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// All rows of one forward, possibly of different requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowBatch {
    pub rows: Vec<Row>,
}

impl RowBatch {
    pub fn new(rows: Vec<Row>) -> Self {
        Self { rows }
    }

    pub fn single(row: Row) -> Self {
        Self { rows: vec![row] }
    }

    /// Total query tokens in the forward.
    pub fn num_tokens(&self) -> usize {
        self.rows.iter().map(Row::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_follow_the_design() {
        assert!(AttnRule::Causal.allows(2, 2) && !AttnRule::Causal.allows(1, 2));
        assert!(AttnRule::Bidirectional.allows(0, 5));
        let r = AttnRule::CausalThenBlock { causal_len: 3 };
        assert!(!r.allows(1, 2) && r.allows(2, 1) && r.allows(3, 7) && r.allows(5, 3));
        assert!(AttnRule::CausalThenBlock { causal_len: 0 }.is_unmasked(8));
        assert!(!AttnRule::Causal.is_unmasked(2));
    }

    #[test]
    fn logit_selection() {
        assert_eq!(LogitSel::Last.indices(4), vec![3]);
        assert_eq!(LogitSel::Range { start: 2, len: 5 }.indices(4), vec![2, 3]);
        assert!(LogitSel::None.indices(4).is_empty());
    }
}
