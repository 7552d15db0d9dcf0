//! `trace compare`: the same acceptance figures from any recordings — an imported NLD
//! log, the bundled model's, the simulator's — each read through the confidence-trace
//! rows `trace export` writes, so every source is measured one way.

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::Result;
use serde::Serialize;

use super::export::confidence_rows;
use crate::trace::{Summary, Trace};

/// One recording's acceptance figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Acceptance {
    /// What the figures come from (the file, and whether imported, decoded or simulated).
    pub source: String,
    pub block_sizes: Vec<usize>,
    pub rounds: usize,
    pub tokens: usize,
    /// Decode-only tokens per forward (`trace summary`'s TPF).
    pub tpf: f64,
    /// Rounds whose forwards the log does not count (two each are assumed).
    pub forwards_assumed: usize,
    /// Tokens a round emitted, accepted drafts and the verifier's token.
    pub tokens_per_round: f64,
    /// Rounds that emitted their whole block.
    pub full_blocks: f64,
    /// The draft's confidence in its accepted tokens (every accepted position), and in
    /// the first rejected one: `None` where the source holds none.
    pub accepted_confidence: Option<f64>,
    pub rejected_confidence: Option<f64>,
    /// The verifier's token's rank in the draft at the first rejection: rounds with a
    /// known rank, and their shares at rank 1, 2, 3 and 4 or worse.
    pub ranked: usize,
    pub rank_shares: [f64; 4],
    /// Rounds by tokens emitted, whole blocks apart (the figure's bars).
    #[serde(skip)]
    pub hist: crate::plot::data::Hist,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The figures of one recording; `source` labels them and `short` its figure panel.
pub fn acceptance(trace: &Trace, source: String, short: String) -> Result<Acceptance> {
    let rows = confidence_rows(trace)?;
    let summary = Summary::of(trace.events.iter().map(|s| &s.event));
    let mut blocks = BTreeMap::new();
    let (mut full, mut acc, mut rej) = (0usize, Vec::new(), Vec::new());
    let mut ranks = [0usize; 4];
    let mut hist = crate::plot::data::Hist {
        label: short,
        ..Default::default()
    };
    for r in &rows {
        let (b, e) = (r.block_size.unwrap_or(0), r.emitted_tokens.unwrap_or(0));
        hist.add(e, b > 0 && e >= b);
        *blocks.entry(b).or_insert(0usize) += 1;
        full += usize::from(b > 0 && e >= b);
        acc.extend(r.accepted_draft_confidences.iter().flatten().copied());
        rej.extend(r.rejected_draft_confidence);
        // Past a recorded top-k of 3 or more the rank is known to be 4 or worse.
        let beyond = r
            .specscope
            .as_ref()
            .and_then(|x| x.get("rank_beyond_top")?.as_u64())
            .filter(|k| *k >= 3)
            .map(|_| 4);
        if let Some(k) = r.rejected_correct_token_rank.or(beyond) {
            ranks[k.clamp(1, 4) - 1] += 1;
        }
    }
    let ranked: usize = ranks.iter().sum();
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    Ok(Acceptance {
        source,
        block_sizes: blocks.into_keys().collect(),
        rounds: rows.len(),
        tokens: summary.tally.new_tokens,
        tpf: summary.tpf(),
        forwards_assumed: super::forwards_assumed(trace),
        tokens_per_round: summary.tally.mean_accept(),
        full_blocks: share(full, rows.len()),
        accepted_confidence: mean(&acc),
        rejected_confidence: mean(&rej),
        ranked,
        rank_shares: ranks.map(|n| share(n, ranked)),
        hist,
    })
}

/// The figures side by side, a markdown table.
pub fn table(all: &[Acceptance]) -> String {
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let opt = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.3}"));
    let mut s = String::from(
        "| source | B | rounds | tokens per round | full blocks | TPF | accepted confidence | first-rejected confidence | verifier's token rank 1 / 2 / 3 / ≥4 (rounds) |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for a in all {
        let b: Vec<String> = a.block_sizes.iter().map(usize::to_string).collect();
        let ranks = if a.ranked == 0 {
            "—".to_string()
        } else {
            let r: Vec<String> = a.rank_shares.iter().map(|x| pct(*x)).collect();
            format!("{} ({})", r.join(" / "), a.ranked)
        };
        let mark = if a.forwards_assumed > 0 { "*" } else { "" };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {} | {:.2}{mark} | {} | {} | {} |",
            a.source,
            b.join(","),
            a.rounds,
            a.tokens_per_round,
            pct(a.full_blocks),
            a.tpf,
            opt(a.accepted_confidence),
            opt(a.rejected_confidence),
            ranks
        );
    }
    if all.iter().any(|a| a.forwards_assumed > 0) {
        s.push_str(
            "\n\\* the log counts no forwards: two a round (LinearSpec's draft and verify), as SGLang's decode-only TPF counts them.\n",
        );
    }
    s
}
