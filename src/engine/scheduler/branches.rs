//! A drafted block's risky positions and branch rows (RecGuide's overlap): those the
//! row table asks for, each kept where the beliefs' prices say it pays at the round's
//! load, announced with the block as `Drafted`.

use super::{resolve, Plan, Scheduler};
use crate::engine::events::{DecodeEvent, EventSink, RowsPriced};
use crate::engine::options::Batching;
use crate::engine::overlap::{self, BranchKind, BranchRoom};
use crate::engine::policy::{Observation, RowKey, RowLoad};

impl Scheduler {
    /// A drafted (or reused) block's risky positions and branch rows, and its `Drafted`.
    pub(super) fn announce(&mut self, p: &mut Plan, concurrency: usize, sink: &mut dyn EventSink) {
        p.risky = overlap::risky_positions(&p.draft, self.requests[p.req].opts.risk_threshold);
        let rows = self.plan_branches(p, concurrency);
        p.announced = true;
        let r = &self.requests[p.req];
        if p.block_size > 1 {
            sink.emit(DecodeEvent::Drafted {
                req: r.id,
                round: r.round,
                block: p.block.clone(),
                margins: p.draft.iter().map(|s| s.margin).collect(),
                risky: p.risky.clone(),
                reused: p.reused,
                detail: if sink.detail() {
                    resolve::views(&p.draft)
                } else {
                    Vec::new()
                },
                rows,
            });
        }
    }

    /// Branch rows for one plan (RecGuide overlap): those the row table asks for, each
    /// kept where the policy's prices say it pays (every one without cost gating).
    fn plan_branches(&mut self, p: &mut Plan, concurrency: usize) -> Option<RowsPriced> {
        let r = &self.requests[p.req];
        if !r.opts.overlap_on() || p.block_size < 2 {
            return None;
        }
        let max_pos = self.model.config().max_position_embeddings;
        let ctx = r.cache.len();
        let mut banned = vec![self.mask];
        banned.extend_from_slice(&self.eos);
        let room = BranchRoom {
            context: max_pos - ctx,
            budget: r.opts.max_new_tokens.saturating_sub(r.out.len()),
        };
        let branches = overlap::plan_branches(
            &p.block,
            &p.draft,
            &p.risky,
            self.ablation.row_table,
            self.mask,
            &banned,
            room,
        );
        let rows: Vec<(usize, RowKey)> = branches
            .iter()
            .map(|br| {
                let margin =
                    (br.at >= 1 && br.at <= p.draft.len()).then(|| p.draft[br.at - 1].margin);
                (br, RowKey::of(br.kind, p.block_size, margin, p.risky.len()))
            })
            .collect::<Vec<_>>()
            .iter()
            .enumerate()
            .map(|(i, (br, key))| {
                // The table's second candidate at a position has its own hit rate.
                let again = branches[..i]
                    .iter()
                    .any(|b| b.kind == br.kind && b.at == br.at);
                let key = if again { key.next_alternative() } else { *key };
                (br.added_tokens(), key)
            })
            .collect();
        let load = RowLoad {
            concurrency,
            ctx,
            block: p.block_size,
            rides: self.batching == Batching::Packed,
        };
        let priced = self.ablation.prices_rows(&r.opts);
        let kinds: Vec<BranchKind> = rows.iter().map(|(_, k)| k.kind).collect();
        self.learn(Observation::RowsPlanned {
            block: p.block_size,
            kinds,
        });
        let (keep, decision) = self.beliefs.price_rows(&rows, load, priced);
        let mut keep = keep.into_iter();
        let mut keys = rows.into_iter().map(|(_, k)| k);
        let (mut kept, mut kept_keys) = (Vec::new(), Vec::new());
        for br in branches {
            let key = keys.next();
            if keep.next().unwrap_or(false) {
                kept.push(br);
                kept_keys.extend(key);
            }
        }
        p.branches = kept;
        p.row_keys = kept_keys;
        Some(decision)
    }
}
