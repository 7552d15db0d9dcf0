//! RecGuide verification-guided adaptive block size (reference §3.2): per request and
//! round, B from verifier-only history via survival tables, maximising expected
//! accepted tokens per ms of measured forward cost. The reference's action space is
//! {8, 16, 32}; ours adds 4 and 1 (an AR step: no draft, one token exactly, no table
//! needed), which the rule takes only where this machine's costs grow with the block
//! (a compute-bound CPU), never under flat GPU-like costs. Packed rounds choose their
//! requests' sizes together (`round_blocks`); this per-request rule serves the
//! reference's buckets and reused drafts.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::cost::CostModel;
use super::events::{BlockCandidate, BlockReason};

/// The reference's action space.
pub const REFERENCE_BLOCKS: [usize; 3] = [8, 16, 32];

/// The default action space: the reference's plus 4 and 1 (see the module comment).
pub const DEFAULT_BLOCKS: [usize; 5] = [1, 4, 8, 16, 32];

/// Survival tables measured on the bundled model (`specscope survival --skip 10`: the
/// prompts after the ones `bench --limit 10` runs).
const BUILTIN_TABLES: &str = include_str!("../../assets/survival_tables.json");

/// What a finished round tells the policy (verifier-side only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub block: usize,
    /// Tokens advanced (accepted drafts + 1).
    pub advance: usize,
    /// Every draft accepted.
    pub full: bool,
    /// Mean verifier entropy over the first min(7, m + 1) positions.
    pub verify_entropy: f32,
}

/// The last rounds of one request.
#[derive(Debug, Clone, Default)]
pub struct History {
    rounds: VecDeque<RoundRecord>,
}

impl History {
    pub fn push(&mut self, r: RoundRecord) {
        self.rounds.push_back(r);
        if self.rounds.len() > 2 {
            self.rounds.pop_front();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rounds.is_empty()
    }

    /// Mean verifier entropy over the last two rounds (`verify_entropy_ma2`).
    pub fn signal(&self) -> Option<f32> {
        if self.rounds.is_empty() {
            return None;
        }
        Some(self.rounds.iter().map(|r| r.verify_entropy).sum::<f32>() / self.rounds.len() as f32)
    }

    /// Stratum of the previous round: `b{B}_{full|partial}`.
    pub fn stratum(&self) -> Option<String> {
        self.rounds.back().map(|r| stratum(r.block, r.full))
    }
}

pub fn stratum(block: usize, full: bool) -> String {
    format!("b{block}_{}", if full { "full" } else { "partial" })
}

/// Mean verifier entropy over the first min(7, valid) positions; positions after the
/// first reject are conditioned on a wrong prefix and are left out.
pub fn verify_entropy(entropies: &[f32], accepted: usize) -> f32 {
    let n = (accepted + 1).min(7).min(entropies.len()).max(1);
    entropies.iter().take(n).sum::<f32>() / n as f32
}

/// Cold start without history: the reference's mapping from concurrency to B.
pub fn cold_start(concurrency: usize) -> usize {
    match concurrency {
        0..=4 => 32,
        5..=32 => 16,
        _ => 8,
    }
}

/// Survival curves S_B(k | bin) = P(A_B ≥ k), per stratum, per B, per signal bin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SurvivalTables {
    /// Which signal the bins are over.
    pub signal: String,
    /// Upper edges of the bins (ascending); the last bin is open.
    pub edges: Vec<f32>,
    /// stratum -> B -> bin -> S(k) for k = 1..=B. `all` is always present.
    pub strata: BTreeMap<String, BTreeMap<usize, Vec<Vec<f64>>>>,
    /// Rounds the tables were estimated from.
    pub samples: usize,
    pub source: String,
}

/// One round evaluated at every B from the same prefix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SurvivalSample {
    pub signal: Option<f32>,
    pub stratum: Option<String>,
    /// B -> tokens advanced A_B.
    pub advance: BTreeMap<usize, usize>,
}

impl SurvivalTables {
    /// Tables shipped for the bundled model (`specscope survival`); the reference
    /// marginal if they cannot be read.
    pub fn builtin() -> Self {
        serde_json::from_str(BUILTIN_TABLES).unwrap_or_else(|_| Self::marginal_reference())
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read survival tables {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("invalid survival tables {}", path.display()))
    }

    /// Flat tables with NLD-8B's same-state mean acceptance (A8 5.78, A16 8.53,
    /// A32 11.36; reference §3.3) as geometric survival curves, for when no data exists.
    pub fn marginal_reference() -> Self {
        let mut by_b = BTreeMap::new();
        for (b, mean) in [(8usize, 5.78f64), (16, 8.53), (32, 11.36)] {
            // Find the per-position survival q with Σ_{k=1..B} q^(k-1) = mean.
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            for _ in 0..60 {
                let q = (lo + hi) / 2.0;
                let v: f64 = (0..b).map(|k| q.powi(k as i32)).sum();
                if v < mean {
                    lo = q;
                } else {
                    hi = q;
                }
            }
            let curve: Vec<f64> = (0..b).map(|k| lo.powi(k as i32)).collect();
            by_b.insert(b, vec![curve]);
        }
        let mut strata = BTreeMap::new();
        strata.insert("all".to_string(), by_b);
        Self {
            signal: "verify_entropy_ma2".to_string(),
            edges: vec![],
            strata,
            samples: 0,
            source: "reference marginal (NLD-8B)".to_string(),
        }
    }

    fn bin(&self, s: Option<f32>) -> Option<usize> {
        let s = s?;
        Some(
            self.edges
                .iter()
                .position(|&e| s <= e)
                .unwrap_or(self.edges.len()),
        )
    }

    /// Block sizes the tables hold curves for.
    pub fn blocks(&self) -> Vec<usize> {
        self.strata
            .get("all")
            .map(|t| t.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Whether the rule can value B: tabled, or B = 1 (always exactly one token).
    pub fn covers(&self, block: usize) -> bool {
        block == 1
            || self
                .strata
                .get("all")
                .is_some_and(|t| t.contains_key(&block))
    }

    /// V_B(s) = Σ_k S_B(k): expected tokens advanced per round at B.
    pub fn value(&self, block: usize, signal: Option<f32>, stratum: Option<&str>) -> f64 {
        if block == 1 {
            return 1.0;
        }
        let table = stratum
            .and_then(|s| self.strata.get(s))
            .filter(|t| t.contains_key(&block))
            .or_else(|| self.strata.get("all"));
        let Some(curves) = table.and_then(|t| t.get(&block)) else {
            return 1.0;
        };
        let curve = match self.bin(signal) {
            Some(b) if b < curves.len() => &curves[b],
            // Missing signal: the marginal (mean over bins).
            _ => {
                return curves.iter().map(|c| c.iter().sum::<f64>()).sum::<f64>()
                    / curves.len().max(1) as f64;
            }
        };
        curve.iter().sum()
    }

    /// Estimates tables from counterfactual rounds: weighted-quantile bins of the signal,
    /// empirical survival per bin, made monotone across bins (PAVA, lower entropy never
    /// predicts less) and non-increasing in k. Strata with fewer than `min_stratum`
    /// rounds fall back to `all`.
    pub fn estimate(
        samples: &[SurvivalSample],
        bins: usize,
        min_stratum: usize,
        source: &str,
    ) -> Self {
        let mut signals: Vec<f32> = samples.iter().filter_map(|s| s.signal).collect();
        signals.sort_by(f32::total_cmp);
        let bins = bins.max(1).min(signals.len().max(1));
        let edges: Vec<f32> = (1..bins)
            .map(|i| {
                signals[(i * signals.len() / bins)
                    .saturating_sub(1)
                    .min(signals.len() - 1)]
            })
            .collect();
        let mut edges = edges;
        edges.dedup();
        let nbins = edges.len() + 1;
        let bin_of =
            |s: Option<f32>| s.map(|s| edges.iter().position(|&e| s <= e).unwrap_or(edges.len()));
        let mut groups: BTreeMap<String, Vec<&SurvivalSample>> = BTreeMap::new();
        for s in samples {
            groups.entry("all".into()).or_default().push(s);
            if let Some(st) = &s.stratum {
                groups.entry(st.clone()).or_default().push(s);
            }
        }
        let blocks: std::collections::BTreeSet<usize> = samples
            .iter()
            .flat_map(|s| s.advance.keys().copied())
            .collect();
        let mut strata = BTreeMap::new();
        for (name, group) in groups {
            if name != "all" && group.len() < min_stratum {
                continue;
            }
            let mut by_b = BTreeMap::new();
            for &b in &blocks {
                let mut counts = vec![0f64; nbins];
                let mut surv = vec![vec![0f64; b]; nbins];
                for s in &group {
                    let (Some(bin), Some(&a)) = (bin_of(s.signal), s.advance.get(&b)) else {
                        continue;
                    };
                    counts[bin] += 1.0;
                    for k in 1..=a.min(b) {
                        surv[bin][k - 1] += 1.0;
                    }
                }
                // Empty bins take the pooled curve.
                let total: f64 = counts.iter().sum();
                let pooled: Vec<f64> = (0..b)
                    .map(|k| {
                        if total > 0.0 {
                            surv.iter().map(|c| c[k]).sum::<f64>() / total
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let mut curves: Vec<Vec<f64>> = (0..nbins)
                    .map(|i| {
                        if counts[i] > 0.0 {
                            surv[i].iter().map(|x| x / counts[i]).collect()
                        } else {
                            pooled.clone()
                        }
                    })
                    .collect();
                for k in 0..b {
                    let column: Vec<f64> = curves.iter().map(|c| c[k]).collect();
                    let weights: Vec<f64> = counts.iter().map(|c| c.max(1e-9)).collect();
                    let fitted = pava_non_increasing(&column, &weights);
                    for (c, v) in curves.iter_mut().zip(fitted) {
                        c[k] = v;
                    }
                }
                for c in curves.iter_mut() {
                    for k in 1..b {
                        c[k] = c[k].min(c[k - 1]);
                    }
                }
                by_b.insert(b, curves);
            }
            strata.insert(name, by_b);
        }
        Self {
            signal: "verify_entropy_ma2".to_string(),
            edges,
            strata,
            samples: samples.len(),
            source: source.to_string(),
        }
    }
}

/// Weighted isotonic regression, non-increasing (pool adjacent violators).
pub fn pava_non_increasing(y: &[f64], w: &[f64]) -> Vec<f64> {
    // Blocks of (mean, weight, count).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for (&yi, &wi) in y.iter().zip(w) {
        blocks.push((yi, wi, 1));
        while blocks.len() > 1 {
            let n = blocks.len();
            if blocks[n - 2].0 >= blocks[n - 1].0 {
                break;
            }
            let (m2, w2, c2) = blocks.pop().unwrap_or_default();
            let (m1, w1, c1) = blocks.pop().unwrap_or_default();
            let w = w1 + w2;
            blocks.push(((m1 * w1 + m2 * w2) / w, w, c1 + c2));
        }
    }
    blocks
        .into_iter()
        .flat_map(|(m, _, c)| std::iter::repeat_n(m, c))
        .collect()
}

/// The ratio rule over the action space `blocks`: argmax_B V_B(s) / T_C(B); ties go to
/// the smaller B. Before a request has history (cold start) the reference's mapping
/// from concurrency to B is the largest B allowed, and within it the rule runs on the
/// tables' marginal values (no signal yet): with flat forward costs, as on the
/// reference's GPUs, that is the reference's choice; where a 32-token forward costs
/// several 8-token ones, as on a CPU, the first round is not spent on a block the
/// costs do not justify. Sizes the tables cannot value are left out; when none is
/// left, the smallest requested size is taken (`untabled`).
pub fn choose_block(
    history: &History,
    tables: &SurvivalTables,
    cost: &CostModel,
    blocks: &[usize],
    concurrency: usize,
    ctx: usize,
) -> (usize, BlockReason) {
    let (rule, cap) = if history.is_empty() {
        ("cold_start", cold_start(concurrency))
    } else {
        ("ratio", usize::MAX)
    };
    let signal = history.signal();
    let stratum = history.stratum();
    let candidates: Vec<BlockCandidate> = blocks
        .iter()
        .filter(|&&b| b <= cap && tables.covers(b))
        .map(|&b| BlockCandidate {
            block: b,
            value: tables.value(b, signal, stratum.as_deref()),
            cost_ms: cost.round_ms(concurrency, b, ctx),
        })
        .collect();
    let best = candidates.iter().reduce(|best, c| {
        if c.value / c.cost_ms > best.value / best.cost_ms + 1e-12
            || (c.value / c.cost_ms > best.value / best.cost_ms - 1e-12 && c.block < best.block)
        {
            c
        } else {
            best
        }
    });
    let (block, rule) = match best {
        Some(c) => (c.block, rule),
        None => (blocks.iter().copied().min().unwrap_or(1), "untabled"),
    };
    (
        block,
        BlockReason {
            rule: rule.into(),
            signal,
            candidates,
            rate: None,
            measured: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(signal: f32, a8: usize, a16: usize, a32: usize) -> SurvivalSample {
        SurvivalSample {
            signal: Some(signal),
            stratum: Some(stratum(16, false)),
            advance: [(8, a8), (16, a16), (32, a32)].into_iter().collect(),
        }
    }

    #[test]
    fn survival_estimate_is_empirical_and_monotone() {
        // Low entropy: long acceptances; high entropy: short.
        let mut samples = Vec::new();
        for i in 0..40 {
            samples.push(sample(0.1, 8, 16, 20 + i % 5));
            samples.push(sample(2.0, 2, 2, 2 + i % 2));
        }
        let t = SurvivalTables::estimate(&samples, 2, 10, "test");
        assert_eq!(t.edges.len(), 1);
        let low = t.value(32, Some(0.1), None);
        let high = t.value(32, Some(2.0), None);
        assert!((low - 22.0).abs() < 1e-9, "mean of 20..24 = 22, got {low}");
        assert!((high - 2.5).abs() < 1e-9, "{high}");
        assert!((t.value(8, Some(0.1), None) - 8.0).abs() < 1e-9);
        // S(k) never increases with k.
        for curves in t.strata["all"].values() {
            for c in curves {
                assert!(c.windows(2).all(|w| w[1] <= w[0]));
            }
        }
        assert!(t.strata.contains_key("b16_partial"));
        // Missing signal: the marginal.
        assert!((t.value(32, None, None) - (22.0 + 2.5) / 2.0).abs() < 1e-9);
    }

    #[test]
    fn shipped_tables_are_measured_and_monotone_in_block_value() {
        let t = SurvivalTables::builtin();
        assert!(t.samples > 100, "{}", t.source);
        assert!(t.strata.contains_key("all"));
        assert!(t.value(8, None, None) <= t.value(32, None, None));
    }

    #[test]
    fn pava_pools_violations() {
        let out = pava_non_increasing(&[0.5, 0.9, 0.2, 0.3], &[1.0, 1.0, 1.0, 1.0]);
        assert_eq!(out, vec![0.7, 0.7, 0.25, 0.25]);
    }

    #[test]
    fn ratio_rule_weighs_value_against_cost() {
        let mut t = SurvivalTables::marginal_reference();
        let cost = CostModel {
            fixed_ms: 0.0,
            per_row_ms: 1.0,
            per_token_ms: 0.1,
            per_token_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: "test".into(),
        };
        let mut h = History::default();
        // Cold start: with flat costs, the reference's mapping (32 up to C = 4, 16 up to
        // C = 32, then 8); with costs that grow with B, the rule within that cap.
        let flat = CostModel {
            per_token_ms: 0.0,
            ..cost.clone()
        };
        let rb = &REFERENCE_BLOCKS;
        for (c, want) in [(1, 32), (4, 32), (16, 16), (64, 8)] {
            let (b, why) = choose_block(&h, &t, &flat, rb, c, 0);
            assert_eq!((b, why.rule.as_str()), (want, "cold_start"), "C = {c}");
        }
        let steep = CostModel {
            per_token_ms: 1.0,
            ..cost.clone()
        };
        assert_eq!(choose_block(&h, &t, &steep, rb, 1, 0).0, 8);
        assert_eq!(
            choose_block(&h, &t, &steep, rb, 16, 0).1.candidates.len(),
            2
        );
        h.push(RoundRecord {
            block: 16,
            advance: 3,
            full: false,
            verify_entropy: 0.5,
        });
        // V: 5.78 / 8.53 / 11.36; T ∝ 1 + 0.1·B: 1.8, 2.6, 4.2 -> ratios 3.21, 3.28, 2.70.
        let (b, why) = choose_block(&h, &t, &cost, rb, 1, 0);
        assert_eq!((b, why.rule.as_str()), (16, "ratio"));
        assert_eq!(why.candidates.len(), 3);
        // The order of the action space does not matter.
        assert_eq!(choose_block(&h, &t, &cost, &[32, 16, 8], 1, 0).0, 16);
        // Make B = 32 worth much more: it wins.
        t.strata
            .get_mut("all")
            .unwrap()
            .insert(32, vec![vec![1.0; 32]]);
        assert_eq!(choose_block(&h, &t, &cost, rb, 1, 0).0, 32);
    }

    #[test]
    fn small_blocks_and_ar_steps_win_only_where_tokens_are_expensive() {
        let mut t = SurvivalTables::marginal_reference();
        // V_4 = 3.7 against the geometric V_8 = 5.78.
        t.strata
            .get_mut("all")
            .unwrap()
            .insert(4, vec![vec![1.0, 0.95, 0.9, 0.85]]);
        let mut h = History::default();
        h.push(RoundRecord {
            block: 8,
            advance: 3,
            full: false,
            verify_entropy: 0.5,
        });
        let all = [1, 4, 8, 16, 32];
        assert!(t.covers(1) && t.covers(4) && !t.covers(64));
        assert_eq!(t.value(1, None, None), 1.0, "an AR step advances one token");
        // GPU-like: a forward costs about the same whatever its size; the largest wins.
        let flat = CostModel {
            fixed_ms: 1.0,
            per_row_ms: 0.1,
            per_token_ms: 0.001,
            per_token_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: "test".into(),
        };
        assert_eq!(choose_block(&h, &t, &flat, &all, 1, 0).0, 32);
        // Per-token costs: at C = 1 the fixed cost still pays for a small draft.
        // V / T: B = 1 1 / 1.5 = 0.667, B = 4 3.7 / 5.4 = 0.685, B = 8 5.78 / 8.6 = 0.672.
        let cpu = CostModel {
            fixed_ms: 1.0,
            per_row_ms: 0.1,
            per_token_ms: 0.4,
            per_token_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: "test".into(),
        };
        let (b, why) = choose_block(&h, &t, &cpu, &all, 1, 0);
        assert_eq!(b, 4, "{why:?}");
        // One forward, no draft: T(1) is one 1-token forward.
        assert_eq!(why.candidates[0].cost_ms, cpu.forward_ms(1, 1, 0));
        // With many requests the fixed cost is shared and the AR step wins.
        assert_eq!(choose_block(&h, &t, &cpu, &all, 32, 0).0, 1);
        // Sizes the tables cannot value are left out; none left: the smallest asked.
        let (b, why) = choose_block(&h, &t, &cpu, &[64, 48], 1, 0);
        assert_eq!(
            (b, why.rule.as_str(), why.candidates.len()),
            (48, "untabled", 0)
        );
    }

    #[test]
    fn history_signal_is_ma2() {
        let mut h = History::default();
        for e in [3.0, 1.0, 2.0] {
            h.push(RoundRecord {
                block: 8,
                advance: 8,
                full: true,
                verify_entropy: e,
            });
        }
        assert_eq!(h.signal(), Some(1.5));
        assert_eq!(h.stratum().as_deref(), Some("b8_full"));
        assert_eq!(verify_entropy(&[1.0, 2.0, 3.0, 9.0], 1), 1.5);
        assert_eq!(verify_entropy(&[1.0; 32], 31), 1.0);
    }
}
