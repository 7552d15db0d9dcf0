//! Branch rows, priced: which of the rows a draft's row table asks for ride in this
//! round's verify forward, and what rows are worth to a block size before it is
//! drafted. One objective with the block size (`joint`): a row earns P(hit) × the
//! draft it would spare (this request's draft row and its share of the draft
//! forward's fixed price) and costs what its tokens add to the shared forward. On a
//! GPU at C = 1 a forward is memory-bound and a row nearly free, so rows ride; as the
//! load makes forwards compute-bound the same row costs more than it can save, and
//! it is dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::cost::CostModel;
use crate::engine::events::{BranchCount, BranchKind, RowsPriced};

/// Margin below which a correction's position counts as "very risky" (its hit-rate
/// band 0): the alternative is then nearly as likely as the draft's token.
pub const CLOSE_MARGIN: f32 = 0.2;

/// Pseudo-rounds of evidence each level of the hit-rate hierarchy borrows from the
/// level above it (kind → kind × block → kind × block × band).
const SHRINK: f64 = 4.0;

/// Prior hit rate of a kind, before any round: the order of what the bundled model's
/// rows hit over the B200 sweep (P1 16–27%, P2 and later 0–12%, the continuation
/// 69–91%; the paper's correction rows hit 21.6%).
fn prior_rate(kind: BranchKind) -> f64 {
    match kind {
        BranchKind::Correction { rank: 1 } => 0.2,
        BranchKind::Correction { .. } => 0.1,
        BranchKind::Continuation => 0.7,
    }
}

/// Prior share of drafted rounds in which the row tables ask for a row of this kind.
fn prior_share(kind: BranchKind) -> f64 {
    match kind {
        BranchKind::Correction { rank: 1 } => 0.7,
        BranchKind::Correction { .. } => 0.3,
        BranchKind::Continuation => 0.6,
    }
}

/// Query tokens a row of this kind adds for a block of `b` (a correction re-drafts from
/// its risky position, on average mid-block; the continuation extends the verify row
/// by its block, `Branch::extends_verify`).
fn typical_len(kind: BranchKind, b: usize) -> usize {
    match kind {
        BranchKind::Continuation => b,
        BranchKind::Correction { .. } => b + b / 2,
    }
}

/// The kinds a row table can ask for.
const KINDS: [BranchKind; 4] = [
    BranchKind::Correction { rank: 1 },
    BranchKind::Correction { rank: 2 },
    BranchKind::Correction { rank: 3 },
    BranchKind::Continuation,
];

/// What a row's hit rate is conditioned on: its kind, the block size and a signal
/// band (a correction: its position's margin below [`CLOSE_MARGIN`], band 2 for the
/// next alternative at a position that already has one; the continuation: a draft
/// with no risky position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RowKey {
    pub kind: BranchKind,
    pub block: usize,
    pub band: u8,
}

impl RowKey {
    /// A second alternative at the same position (the table's P1 with its 3rd choice).
    pub fn next_alternative(self) -> Self {
        Self { band: 2, ..self }
    }

    /// The key of a row of `kind` for a block of `block`: `margin` is the draft's
    /// margin at a correction's position, `risky` the draft's risky positions.
    pub fn of(kind: BranchKind, block: usize, margin: Option<f32>, risky: usize) -> Self {
        let band = match kind {
            BranchKind::Correction { .. } => u8::from(margin.is_none_or(|m| m >= CLOSE_MARGIN)),
            BranchKind::Continuation => u8::from(risky > 0),
        };
        Self { kind, block, band }
    }
}

/// Hit rates of branch rows learned online (per kind, block size and band, each level
/// shrunk toward the one above), and how often the row tables ask for each kind.
#[derive(Debug, Clone, Default)]
pub struct HitRates {
    by_kind: BTreeMap<BranchKind, BranchCount>,
    by_block: BTreeMap<(BranchKind, usize), BranchCount>,
    by_band: BTreeMap<RowKey, BranchCount>,
    /// Drafted rounds per block size that asked the row table, and the rows it asked
    /// for per kind.
    planned_rounds: BTreeMap<usize, usize>,
    planned: BTreeMap<(BranchKind, usize), usize>,
    /// Judged rounds with rows, and those a row hit in.
    rounds: usize,
    hit_rounds: usize,
    /// Per concurrency: requests that held a reused block in a packed round, and those
    /// whose round skipped its draft forward (every request held one).
    spared: BTreeMap<usize, (usize, usize)>,
}

fn shrunk(c: Option<&BranchCount>, prior: f64) -> f64 {
    let c = c.cloned().unwrap_or_default();
    (c.hits as f64 + prior * SHRINK) / (c.built as f64 + SHRINK)
}

impl HitRates {
    /// P(hit) of a row of `kind` for blocks of `block`, any band.
    pub fn block_rate(&self, kind: BranchKind, block: usize) -> f64 {
        let k = shrunk(self.by_kind.get(&kind), prior_rate(kind));
        shrunk(self.by_block.get(&(kind, block)), k)
    }

    /// P(hit) of a row with this key.
    pub fn rate(&self, key: RowKey) -> f64 {
        shrunk(self.by_band.get(&key), self.block_rate(key.kind, key.block))
    }

    /// `block_rate` plus one standard error (see `optimistic`).
    pub fn block_optimistic(&self, kind: BranchKind, block: usize) -> f64 {
        let p = self.block_rate(kind, block);
        let n = self.by_block.get(&(kind, block)).map_or(0, |c| c.built) as f64;
        (p + (p * (1.0 - p) / (n + SHRINK)).sqrt()).min(1.0)
    }

    /// P(hit) a row is priced with: the estimate plus one standard error, so a key
    /// that missed a few times early is still tried now and then until its rows have
    /// said enough (a dropped row teaches nothing; optimism is the only exploration).
    pub fn optimistic(&self, key: RowKey) -> f64 {
        let p = self.rate(key);
        let n = self.by_band.get(&key).map_or(0, |c| c.built) as f64;
        (p + (p * (1.0 - p) / (n + SHRINK)).sqrt()).min(1.0)
    }

    /// Rows of `kind` the row tables ask for per drafted round of `block`.
    pub fn share(&self, kind: BranchKind, block: usize) -> f64 {
        let n = self.planned_rounds.get(&block).copied().unwrap_or(0) as f64;
        let k = self.planned.get(&(kind, block)).copied().unwrap_or(0) as f64;
        (k + prior_share(kind) * SHRINK) / (n + SHRINK)
    }

    /// Rows built and hits per kind and block size, as judged so far.
    pub fn judged(&self) -> impl Iterator<Item = (BranchKind, usize, &BranchCount)> {
        self.by_block.iter().map(|(&(k, b), c)| (k, b, c))
    }

    /// A drafted round of `block` whose row table asked for rows of `kinds`.
    pub fn record_planned(&mut self, block: usize, kinds: &[BranchKind]) {
        *self.planned_rounds.entry(block).or_default() += 1;
        for &k in kinds {
            *self.planned.entry((k, block)).or_default() += 1;
        }
    }

    /// Share of rounds that end with a reused block (a row hit), over rounds with rows.
    pub fn reuse(&self) -> f64 {
        (self.hit_rounds as f64 + 0.3 * SHRINK) / (self.rounds as f64 + SHRINK)
    }

    /// P(the round's draft forward is skipped | this request holds a reused block) at
    /// `concurrency`: measured, shrunk toward every other request holding one
    /// independently at the per-round hit rate (`reuse`^(C − 1)). 1 alone.
    pub fn skip_given_reuse(&self, concurrency: usize) -> f64 {
        let c = concurrency.max(1);
        if c == 1 {
            return 1.0;
        }
        let prior = self.reuse().powi(c as i32 - 1);
        let (n, k) = self.spared.get(&c).copied().unwrap_or((0, 0));
        (k as f64 + prior * SHRINK) / (n as f64 + SHRINK)
    }

    /// A request held a reused block in a packed round of `concurrency`; `skipped`: the
    /// round ran no draft forward.
    pub fn record_spared(&mut self, concurrency: usize, skipped: bool) {
        let e = self.spared.entry(concurrency.max(1)).or_default();
        e.0 += 1;
        e.1 += usize::from(skipped);
    }

    /// A judged round's rows (those built) and the index of the one that hit, if any
    /// (two rows of one kind can ride; only one of them hits).
    pub fn record(&mut self, built: &[RowKey], hit: Option<usize>) {
        if !built.is_empty() {
            self.rounds += 1;
            self.hit_rounds += usize::from(hit.is_some());
        }
        for (i, key) in built.iter().enumerate() {
            let won = usize::from(hit == Some(i));
            for c in [
                self.by_kind.entry(key.kind).or_default(),
                self.by_block.entry((key.kind, key.block)).or_default(),
                self.by_band.entry(*key).or_default(),
            ] {
                c.built += 1;
                c.hits += won;
            }
        }
    }
}

/// The load a row is priced at.
#[derive(Debug, Clone, Copy)]
pub struct RowLoad {
    /// Requests sharing the round's forwards.
    pub concurrency: usize,
    /// This request's committed positions.
    pub ctx: usize,
    /// Its block size this round.
    pub block: usize,
    /// Fresh drafts ride the shared forward (`Batching::Packed`).
    pub rides: bool,
}

impl RowLoad {
    /// What a hit spares: the next round's draft row of this request, and its share
    /// (1/C) of a forward's fixed price. Where fresh drafts ride the shared forward a
    /// miss costs the request a forward of drafting whatever the others do, so the
    /// share is always spared. In lockstep it is spared only when no request drafts
    /// (how often a request holding a reused block saw its round skip the draft
    /// forward, `HitRates::skip_given_reuse`); a forward spared that way took every
    /// request's hit, and crediting each hit the whole would count it C times
    /// (measured at C = 2: 2× the saving seen).
    pub fn saving_ms(&self, cost: &CostModel, hits: &HitRates) -> f64 {
        let c = self.concurrency.max(1);
        let skip = if self.rides {
            1.0
        } else {
            hits.skip_given_reuse(c)
        };
        cost.draft_row_ms(self.block, self.ctx) + cost.fixed_ms * skip / c as f64
    }

    /// This request's share of the verify forward without rows: its row and its share
    /// of the forward's fixed price (what a row's price is stated against).
    pub fn share_ms(&self, cost: &CostModel) -> f64 {
        cost.row_ms(self.block, self.ctx) + cost.fixed_ms / self.concurrency.max(1) as f64
    }

    /// What a row of `kind` adding `tokens` query tokens adds to the shared forward:
    /// a row's price, or the continuation's tokens alone (it extends the verify row).
    pub fn row_ms(&self, cost: &CostModel, kind: BranchKind, tokens: usize) -> f64 {
        if kind == BranchKind::Continuation {
            cost.tokens_ms(tokens, self.ctx)
        } else {
            cost.row_ms(tokens, self.ctx)
        }
    }
}

/// Decides which of the `rows` (their lengths and hit-rate keys, in the table's
/// order) ride: a row rides when P(hit) × the draft it spares covers what it adds to
/// the forward, or always when `priced` is off. Returns the keep mask and the record.
pub fn price_rows(
    rows: &[(usize, RowKey)],
    hits: &HitRates,
    cost: &CostModel,
    load: RowLoad,
    priced: bool,
) -> (Vec<bool>, RowsPriced) {
    let saving = load.saving_ms(cost, hits);
    let mut out = RowsPriced {
        share_ms: load.share_ms(cost),
        saving_ms: saving,
        unpriced: !priced,
        ..RowsPriced::default()
    };
    let keep = rows
        .iter()
        .map(|&(tokens, key)| {
            let p = hits.optimistic(key);
            let ms = load.row_ms(cost, key.kind, tokens);
            let pays = p * saving >= ms;
            if pays || !priced {
                out.kept.add(ms, p);
                true
            } else {
                out.dropped.add(ms, p);
                false
            }
        })
        .collect();
    (keep, out)
}

/// What the rows a block of `load.block` is expected to carry change its round's
/// price by (ms, negative: they save more than they cost), before it is drafted:
/// per kind, how often the tables ask for it × (its cost − P(hit) × the draft it
/// spares), counting only the rows that pay when `priced`.
pub fn expected_rows_ms(hits: &HitRates, cost: &CostModel, load: RowLoad, priced: bool) -> f64 {
    let saving = load.saving_ms(cost, hits);
    let (mut spent, mut saves) = (0.0, 0.0);
    for &k in &KINDS {
        // The same estimate the rows are priced with after the draft.
        let (ms, p) = (
            load.row_ms(cost, k, typical_len(k, load.block)),
            hits.block_optimistic(k, load.block),
        );
        if !priced || p * saving >= ms {
            let share = hits.share(k, load.block);
            spent += share * ms;
            saves += share * p;
        }
    }
    // At most one row of a round hits.
    spent - saves.min(1.0) * saving
}
