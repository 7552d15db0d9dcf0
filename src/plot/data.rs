//! The series each figure draws, from the inputs and nothing else (no drawing here, so
//! the numbers are tested directly).

use std::collections::BTreeMap;

use crate::bench::sweep::BenchResult;
use crate::engine::cost::{CostModel, Profile};
use crate::engine::events::{BranchKind, BranchOutcome, RoundRecord};
use crate::engine::Mode;

/// Rounds by tokens advanced, split into full blocks and the rest: `full[a]`,
/// `partial[a]` = rounds that advanced `a` tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hist {
    pub label: String,
    pub full: Vec<usize>,
    pub partial: Vec<usize>,
}

impl Hist {
    /// Counts a round that advanced `advance` tokens, whole block (`full`) or not.
    pub fn add(&mut self, advance: usize, full: bool) {
        self.add_n(advance, full, 1);
    }

    /// Counts `n` such rounds at once (a histogram's cell is a count, not a loop).
    pub fn add_n(&mut self, advance: usize, full: bool, n: usize) {
        if n == 0 {
            return;
        }
        let len = self.full.len().max(self.partial.len()).max(advance + 1);
        self.full.resize(len, 0);
        self.partial.resize(len, 0);
        let v = if full {
            &mut self.full
        } else {
            &mut self.partial
        };
        v[advance] = v[advance].saturating_add(n);
    }

    pub fn rounds(&self) -> usize {
        self.full.iter().chain(&self.partial).sum()
    }

    /// Share of rounds advancing more than `k` tokens.
    pub fn share_above(&self, k: usize) -> f64 {
        let above: usize = (k + 1..self.full.len())
            .map(|a| self.full[a] + self.partial[a])
            .sum();
        ratio(above, self.rounds())
    }

    /// Share of rounds whose first rejection is at positions 1..=k (a rejection at
    /// position q advances q tokens: the q − 1 accepted drafts and the correction).
    pub fn share_failing_within(&self, k: usize) -> f64 {
        let failed: usize = self.partial.iter().take(k + 1).sum();
        ratio(failed, self.rounds())
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    crate::engine::events::ratio(a as f64, b as f64)
}

/// Figure 1: tokens advanced per round, per prompt family.
#[derive(Debug, Clone, PartialEq)]
pub struct Acceptance {
    /// What decoded: a bench configuration and concurrency, or the recording's options.
    pub what: String,
    pub families: Vec<Hist>,
}

impl Acceptance {
    /// All families together.
    pub fn total(&self) -> Hist {
        let mut t = Hist {
            label: "all".into(),
            ..Hist::default()
        };
        for h in &self.families {
            for (a, (&f, &p)) in h.full.iter().zip(&h.partial).enumerate() {
                t.add_n(a, true, f);
                t.add_n(a, false, p);
            }
        }
        t
    }
}

/// The result figure 1 reads from a bench: `config` at its lowest concurrency, or the
/// largest fixed LinearSS block at the lowest concurrency.
pub fn pick_result<'a>(
    results: &'a [BenchResult],
    config: Option<&str>,
) -> Option<&'a BenchResult> {
    let lowest = |name: &str| {
        results
            .iter()
            .filter(|r| r.config == name)
            .min_by_key(|r| r.concurrency)
    };
    if let Some(c) = config {
        return lowest(c);
    }
    let linear = results
        .iter()
        .filter_map(|r| Some((r.linear_block()?, r)))
        .max_by_key(|(b, r)| (*b, std::cmp::Reverse(r.concurrency)))
        .map(|(_, r)| r);
    linear
        .map(|r| r.config.clone())
        .and_then(|c| lowest(&c))
        .or_else(|| results.iter().min_by_key(|r| r.concurrency))
}

/// Figure 1 from a bench result (a fixed block: advancing B tokens is a full block).
pub fn acceptance_from_bench(r: &BenchResult) -> Acceptance {
    let block = r.fixed_block();
    let families = r
        .accept_hist_by_family
        .iter()
        .map(|(f, counts)| {
            let mut h = Hist {
                label: f.clone(),
                ..Hist::default()
            };
            for (a, &n) in counts.iter().enumerate() {
                h.add_n(a, Some(a) == block, n);
            }
            h
        })
        .collect();
    Acceptance {
        what: format!("{} at C = {}", r.config, r.concurrency),
        families,
    }
}

/// Figure 1 from a recording's rounds (each round's own block size marks it full).
pub fn acceptance_from_rounds(rounds: &[RoundRecord], what: &str) -> Acceptance {
    let mut by: BTreeMap<String, Hist> = BTreeMap::new();
    for r in rounds.iter().filter(|r| r.block > 1) {
        let f = r.family.clone().unwrap_or_else(|| "chat".into());
        let h = by.entry(f.clone()).or_insert_with(|| Hist {
            label: f,
            ..Hist::default()
        });
        h.add(r.advance, r.first_reject.is_none() && !r.ended);
    }
    Acceptance {
        what: what.to_string(),
        families: by.into_values().collect(),
    }
}

/// Figure 2: P(position i accepted | reached) for one block size.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionCurve {
    pub block: usize,
    /// `(position, probability, rounds that reached it)`, positions 1..B−1.
    pub points: Vec<(usize, f64, usize)>,
}

/// Per-position acceptance from `accepted[k]` = rounds that accepted exactly k drafts
/// and were judged at the next position, and `ended[k]` = rounds the answer ended in
/// after k accepted drafts (nothing after them judged: they count as reaching and
/// passing positions 1..=k only).
pub fn position_curve(block: usize, accepted: &[usize], ended: &[usize]) -> PositionCurve {
    let from = |h: &[usize], k: usize| h.iter().skip(k).sum::<usize>();
    let points = (1..block)
        .filter_map(|i| {
            let reached = from(accepted, i - 1) + from(ended, i);
            let passed = from(accepted, i) + from(ended, i);
            (reached > 0).then(|| (i, ratio(passed, reached), reached))
        })
        .collect();
    PositionCurve { block, points }
}

/// Figure 2 from a bench: each fixed LinearSS block at its lowest concurrency.
pub fn positions_from_bench(results: &[BenchResult]) -> Vec<PositionCurve> {
    let mut by_block: BTreeMap<usize, &BenchResult> = BTreeMap::new();
    for r in results {
        if let Some(b) = r.linear_block() {
            let e = by_block.entry(b).or_insert(r);
            if r.concurrency < e.concurrency {
                *e = r;
            }
        }
    }
    by_block
        .into_iter()
        .filter(|(b, _)| *b > 1)
        .map(|(b, r)| {
            // accept_hist counts tokens advanced (accepted + 1) and ended_hist those of
            // them the answer ended in (every advanced token an accepted draft).
            let t = &r.tally;
            let ended = |a: usize| t.ended_hist.get(a).copied().unwrap_or(0);
            let accepted: Vec<usize> = (1..t.accept_hist.len())
                .map(|a| t.accept_hist[a].saturating_sub(ended(a)))
                .collect();
            position_curve(b, &accepted, &t.ended_hist)
        })
        .collect()
}

/// Figure 2 from a recording: every block size its rounds used.
pub fn positions_from_rounds(rounds: &[RoundRecord]) -> Vec<PositionCurve> {
    let mut by: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for r in rounds.iter().filter(|r| r.block > 1) {
        let (accepted, ended) = by.entry(r.block).or_default();
        // A round the answer ended in accepted every position it kept.
        match r.ended {
            true => crate::engine::events::count_in(ended, r.advance),
            false => crate::engine::events::count_in(accepted, r.advance - 1),
        }
    }
    by.into_iter()
        .map(|(b, (acc, ended))| position_curve(b, &acc, &ended))
        .collect()
}

/// Figure 3: measured forward times and the fitted cost model, at one cache length.
#[derive(Debug, Clone)]
pub struct Latency {
    pub cache_len: usize,
    /// `(rows, [(tokens, median ms)])`.
    pub measured: Vec<(usize, Vec<(usize, f64)>)>,
    pub fitted: CostModel,
}

/// Figure 3 at the profile's middle cache length.
pub fn latency(profile: &Profile, fitted: CostModel) -> Option<Latency> {
    let mut caches: Vec<usize> = profile.points.iter().map(|p| p.cache_len).collect();
    caches.sort_unstable();
    caches.dedup();
    let cache_len = *caches.get(caches.len() / 2)?;
    let mut by: BTreeMap<usize, Vec<(usize, f64)>> = BTreeMap::new();
    for p in profile.points.iter().filter(|p| p.cache_len == cache_len) {
        by.entry(p.rows).or_default().push((p.tokens, p.median_ms));
    }
    for v in by.values_mut() {
        v.sort_by_key(|x| x.0);
    }
    Some(Latency {
        cache_len,
        measured: by.into_iter().collect(),
        fitted,
    })
}

/// One configuration over concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct ConcurrencySeries {
    pub config: String,
    /// `(C, tokens/s, TPF, modeled tokens/s)`.
    pub points: Vec<(usize, f64, f64, f64)>,
}

/// Figure 4: tokens/s and TPF against concurrency, one series per configuration, plus
/// "best LinearSS" (the best fixed block at each C, by each panel's own measure: the
/// modeled panel's best is the best modeled, not the best on this machine).
pub fn throughput(results: &[BenchResult]) -> Vec<ConcurrencySeries> {
    let mut by: BTreeMap<String, Vec<(usize, f64, f64, f64)>> = BTreeMap::new();
    let mut best: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
    for r in results {
        let p = (
            r.concurrency,
            r.tokens_per_sec,
            r.tpf,
            r.modeled_tokens_per_sec,
        );
        by.entry(r.config.clone()).or_default().push(p);
        if r.linear_block().is_some() {
            let e = best.entry(r.concurrency).or_insert((0.0, 0.0, 0.0));
            *e = (
                e.0.max(r.tokens_per_sec),
                e.1.max(r.tpf),
                e.2.max(r.modeled_tokens_per_sec),
            );
        }
    }
    let mut out: Vec<ConcurrencySeries> = by
        .into_iter()
        .map(|(config, mut points)| {
            points.sort_by_key(|p| p.0);
            ConcurrencySeries { config, points }
        })
        .collect();
    if !best.is_empty() {
        out.push(ConcurrencySeries {
            config: "best LinearSS".into(),
            points: best
                .into_iter()
                .map(|(c, (t, f, m))| (c, t, f, m))
                .collect(),
        });
    }
    out
}

/// TPF against agreement with AR at the bench's lowest concurrency: per block
/// diffusion canvas length, one point per threshold (`(label, [(TPF, share)])`), and
/// one point per lossless configuration at its measured share (1 where its tokens
/// were AR's for every prompt). Empty without a diffusion configuration.
pub fn faithfulness(results: &[BenchResult]) -> Vec<(String, Vec<(f64, f64)>)> {
    let Some(c) = results.iter().map(|r| r.concurrency).min() else {
        return Vec::new();
    };
    let at: Vec<&BenchResult> = results.iter().filter(|r| r.concurrency == c).collect();
    let mut diffusion: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
    let mut out = Vec::new();
    for r in &at {
        if r.tally.ar_judged > 0 {
            if let Some(l) = r.diffusion_canvas() {
                diffusion
                    .entry(l)
                    .or_default()
                    .push((r.tpf, r.tally.ar_agreement()));
            }
        } else if r.identical_to_ar == Some(true) {
            out.push((r.config.clone(), vec![(r.tpf, 1.0)]));
        }
    }
    if diffusion.is_empty() {
        return Vec::new();
    }
    for (l, mut pts) in diffusion {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.push((format!("diffusion L={l} (τ from high to low)"), pts));
    }
    out
}

/// RecGuide's modeled tokens/s over each fixed LinearSS block's, per concurrency: one
/// series per block size, `(C, ratio)`. Empty without a RecGuide configuration (the
/// paper preset, `recguide`, else the first RecGuide one) or modeled times.
pub fn speedup(results: &[BenchResult]) -> Vec<(String, Vec<(usize, f64)>)> {
    let Some(rg) = results
        .iter()
        .find(|r| r.is_paper_recguide())
        .or_else(|| results.iter().find(|r| r.options.mode == Mode::Recguide))
        .map(|r| r.config.clone())
    else {
        return Vec::new();
    };
    let mut by: BTreeMap<usize, Vec<(usize, f64)>> = BTreeMap::new();
    for lin in results {
        let (Some(b), Some(r)) = (
            lin.linear_block(),
            results
                .iter()
                .find(|r| r.config == rg && r.concurrency == lin.concurrency),
        ) else {
            continue;
        };
        if lin.modeled_tokens_per_sec > 0.0 && r.modeled_tokens_per_sec > 0.0 {
            by.entry(b).or_default().push((
                lin.concurrency,
                r.modeled_tokens_per_sec / lin.modeled_tokens_per_sec,
            ));
        }
    }
    by.into_iter()
        .map(|(b, mut pts)| {
            pts.sort_by_key(|p| p.0);
            (format!("{rg} ÷ LinearSS B={b}"), pts)
        })
        .collect()
}

/// Figure 5: the share of rounds at each block size, per concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockShares {
    pub config: String,
    /// `(C, [(block, share of rounds)])`.
    pub by_c: Vec<(usize, Vec<(usize, f64)>)>,
    /// The paper's shares (of requests) at the loads it gives, drawn beside ours where
    /// the bench ran the simulated NLD-8B.
    pub paper: Vec<(usize, Vec<(usize, f64)>)>,
}

/// Figure 5 from a bench: the first configuration that chose more than one size (else
/// the first RecGuide one).
pub fn block_shares(results: &[BenchResult]) -> Option<BlockShares> {
    let adaptive = results
        .iter()
        .find(|r| r.tally.blocks.len() > 1)
        .or_else(|| results.iter().find(|r| r.options.mode == Mode::Recguide))?;
    let config = adaptive.config.clone();
    let mut by_c: Vec<(usize, Vec<(usize, f64)>)> = results
        .iter()
        .filter(|r| r.config == config)
        .map(|r| {
            let total: usize = r.tally.blocks.values().sum();
            let shares = r
                .tally
                .blocks
                .iter()
                .map(|(&b, &n)| (b, ratio(n, total)))
                .collect();
            (r.concurrency, shares)
        })
        .collect();
    by_c.sort_by_key(|x| x.0);
    Some(BlockShares {
        config,
        by_c,
        paper: Vec::new(),
    })
}

/// Figure 5 from a recording: each round's block size in session order, by request.
pub fn block_timeline(rounds: &[RoundRecord]) -> Vec<(u64, Vec<(usize, usize)>)> {
    let mut by: BTreeMap<u64, Vec<(usize, usize)>> = BTreeMap::new();
    for (i, r) in rounds.iter().enumerate() {
        by.entry(r.req).or_default().push((i, r.block));
    }
    by.into_iter().collect()
}

/// Figure 6: branch rows built and reused, by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Branches {
    pub what: String,
    /// `(kind label, built, hits)`.
    pub kinds: Vec<(String, usize, usize)>,
}

fn kind_label(k: &BranchKind) -> String {
    match k {
        BranchKind::Correction { .. } => format!("{k} (correction)"),
        BranchKind::Continuation => format!("{k} (continuation)"),
    }
}

/// Figure 6 from a bench result's tally.
pub fn branches_from_bench(r: &BenchResult) -> Branches {
    Branches {
        what: format!("{} at C = {}", r.config, r.concurrency),
        kinds: r
            .tally
            .branches
            .iter()
            .map(|(k, c)| (kind_label(k), c.built, c.hits))
            .collect(),
    }
}

/// Figure 6 from a recording's rounds.
pub fn branches_from_rounds(rounds: &[RoundRecord], what: &str) -> Branches {
    let mut by: BTreeMap<BranchKind, (usize, usize)> = BTreeMap::new();
    for r in rounds {
        for k in &r.built {
            by.entry(*k).or_default().0 += 1;
        }
        if let Some(BranchOutcome::Hit { kind, .. }) = &r.branches {
            by.entry(*kind).or_default().1 += 1;
        }
    }
    Branches {
        what: what.to_string(),
        kinds: by
            .iter()
            .map(|(k, (b, h))| (kind_label(k), *b, *h))
            .collect(),
    }
}

/// Figure 6 (second panel): the draft at its first rejection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirstReject {
    /// Margins at the first rejection where the verifier took the draft's second
    /// choice, and where it took something else.
    pub second_right: Vec<f32>,
    pub second_wrong: Vec<f32>,
}

impl FirstReject {
    pub fn rejects(&self) -> usize {
        self.second_right.len() + self.second_wrong.len()
    }

    pub fn second_share(&self) -> f64 {
        ratio(self.second_right.len(), self.rejects())
    }

    pub fn below(&self, threshold: f32) -> f64 {
        let n = self
            .second_right
            .iter()
            .chain(&self.second_wrong)
            .filter(|&&m| m < threshold)
            .count();
        ratio(n, self.rejects())
    }
}

/// Figure 6's second panel from a recording (drafts recorded with their top-k).
pub fn first_reject(rounds: &[RoundRecord]) -> FirstReject {
    let mut f = FirstReject::default();
    for r in rounds {
        if let (Some(m), Some(right)) = (r.margin_at_reject, r.second_choice_right) {
            if right {
                f.second_right.push(m);
            } else {
                f.second_wrong.push(m);
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_acceptance_is_conditional_on_reaching() {
        // B = 4: 2 rounds accept 0 drafts, 1 accepts 1, 1 accepts all 3.
        let c = position_curve(4, &[2, 1, 0, 1], &[]);
        // One round more that ended after 2 accepted drafts: it passed 1 and 2 and
        // says nothing of 3.
        let e = position_curve(4, &[2, 1, 0, 1], &[0, 0, 1]);
        assert_eq!(e.points[0], (1, 0.6, 5));
        assert_eq!(e.points[1], (2, 2.0 / 3.0, 3));
        assert_eq!(e.points[2], (3, 1.0, 1));
        assert_eq!(c.points.len(), 3);
        assert_eq!(c.points[0], (1, 0.5, 4));
        assert_eq!(c.points[1], (2, 0.5, 2));
        assert_eq!(c.points[2], (3, 1.0, 1));
    }

    #[test]
    fn histogram_shares() {
        let mut h = Hist::default();
        for (a, full) in [(2, false), (8, false), (20, false), (32, true)] {
            h.add(a, full);
        }
        assert_eq!(h.rounds(), 4);
        assert!((h.share_above(16) - 0.5).abs() < 1e-12);
        assert!((h.share_failing_within(8) - 0.5).abs() < 1e-12);
    }

    fn modeled(config: &str, c: usize, tps: f64, modeled: f64) -> BenchResult {
        BenchResult {
            tokens_per_sec: tps,
            modeled_tokens_per_sec: modeled,
            ..BenchResult::empty(&crate::bench::sweep::named_config(config), c, 1)
        }
    }

    #[test]
    fn speedup_per_fixed_block_and_the_best_by_each_measure() {
        let results = [
            modeled("linear B=8", 1, 100.0, 10.0),
            modeled("linear B=32", 1, 50.0, 20.0),
            modeled("recguide", 1, 40.0, 22.0),
            modeled("linear B=8", 4, 100.0, 40.0),
            modeled("recguide", 4, 40.0, 30.0),
        ];
        let up = speedup(&results);
        assert_eq!(up.len(), 2);
        assert_eq!(up[0].0, "recguide ÷ LinearSS B=8");
        assert_eq!(up[0].1, vec![(1, 2.2), (4, 0.75)]);
        assert_eq!(up[1].1, vec![(1, 1.1)]);
        // "best LinearSS" on the modeled panel is the best modeled (B = 32 at C = 1),
        // though B = 8 measured faster here.
        let best = throughput(&results)
            .into_iter()
            .find(|s| s.config == "best LinearSS")
            .unwrap();
        assert_eq!(best.points[0], (1, 100.0, 0.0, 20.0));
        assert!(speedup(&results[..2]).is_empty());
    }
}
