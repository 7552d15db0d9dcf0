//! The survival tables of RecGuide's adaptive block size (reference §3.2): for each B
//! and each bin of the history signal (mean verifier entropy over the last two
//! rounds), per stratum of the previous round's (B, full/partial), the curve
//! S_B(k) = P(A_B ≥ k). V_B(s) = Σ_k S_B(k) is the expected tokens a round of B advances.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Survival tables measured on the bundled model (`specscope survival --skip 10`: the
/// prompts after the ones `bench --limit 10` runs).
const BUILTIN_TABLES: &str = include_str!("../../../assets/survival_tables.json");

/// What a finished round tells the policy (verifier-side only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundOutcome {
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
    rounds: VecDeque<RoundOutcome>,
    /// The previous round's outcome is not read (no stratum): the entropy alone.
    entropy_only: bool,
}

impl History {
    /// Whether the previous round's outcome is read beside the entropy
    /// (`Ablation::outcome_signal`).
    pub fn read_outcome(&mut self, on: bool) {
        self.entropy_only = !on;
    }

    pub fn push(&mut self, r: RoundOutcome) {
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
        if self.entropy_only {
            return None;
        }
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
        let text = crate::read_bounded(path, 16 << 20)
            .with_context(|| format!("cannot read survival tables {}", path.display()))?;
        let t: Self = serde_json::from_str(&text)
            .with_context(|| format!("invalid survival tables {}", path.display()))?;
        t.check()
            .with_context(|| format!("invalid survival tables {}", path.display()))?;
        Ok(t)
    }

    /// What `specscope survival` writes, field by field: the signal it bins, ascending
    /// finite edges, an `all` stratum, and for each block size of 2 to 256 one curve
    /// per bin of exactly B survival probabilities in 0..1, non-increasing (a chance
    /// of advancing at least k tokens cannot grow with k).
    pub fn check(&self) -> Result<()> {
        use anyhow::ensure;
        ensure!(
            self.signal == "verify_entropy_ma2",
            "field `signal` is {:?}: the tables are binned by \"verify_entropy_ma2\"",
            self.signal
        );
        ensure!(
            self.edges.len() <= 1024,
            "field `edges`: more than 1024 bins"
        );
        for w in self.edges.windows(2) {
            ensure!(
                w[0].is_finite() && w[1].is_finite() && w[0] < w[1],
                "field `edges` must rise: {} then {}",
                w[0],
                w[1]
            );
        }
        ensure!(
            self.edges.iter().all(|e| e.is_finite()),
            "field `edges` holds a number that is not finite"
        );
        ensure!(
            self.strata.contains_key("all"),
            "field `strata` has no `all` stratum (the fallback of every other)"
        );
        for (name, by_b) in &self.strata {
            ensure!(!by_b.is_empty(), "stratum `{name}` is empty");
            for (&b, curves) in by_b {
                ensure!(
                    (2..=crate::engine::options::MAX_BLOCK).contains(&b),
                    "stratum `{name}`: block size {b} is outside 2 to 256"
                );
                ensure!(
                    !curves.is_empty() && curves.len() <= self.edges.len() + 1,
                    "stratum `{name}`, B = {b}: {} curves for {} bins",
                    curves.len(),
                    self.edges.len() + 1
                );
                for (i, c) in curves.iter().enumerate() {
                    ensure!(
                        c.len() == b,
                        "stratum `{name}`, B = {b}, bin {i}: {} values, expected {b}",
                        c.len()
                    );
                    for (k, w) in c.windows(2).enumerate() {
                        ensure!(
                            w[1] <= w[0] + 1e-9,
                            "stratum `{name}`, B = {b}, bin {i}: S({}) = {} rises above S({}) = {}",
                            k + 2,
                            w[1],
                            k + 1,
                            w[0]
                        );
                    }
                    ensure!(
                        c.iter().all(|x| x.is_finite() && (0.0..=1.0).contains(x)),
                        "stratum `{name}`, B = {b}, bin {i}: a survival probability outside 0..1"
                    );
                }
            }
        }
        Ok(())
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

    /// The signal's bin (`None`: no signal yet).
    pub fn bin(&self, s: Option<f32>) -> Option<usize> {
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
        self.curve(block, signal, stratum)
            .map_or(1.0, |c| c.iter().sum())
    }

    /// S_B(k) for k = 1..=B in the cell (the stratum's table where it has B, else
    /// `all`; a missing signal gets the mean over bins).
    fn curve(&self, block: usize, signal: Option<f32>, stratum: Option<&str>) -> Option<Vec<f64>> {
        let table = stratum
            .and_then(|s| self.strata.get(s))
            .filter(|t| t.contains_key(&block))
            .or_else(|| self.strata.get("all"));
        let curves = table.and_then(|t| t.get(&block))?;
        match self.bin(signal) {
            Some(b) if b < curves.len() => Some(curves[b].clone()),
            _ => {
                let n = curves.len().max(1) as f64;
                Some(
                    (0..block)
                        .map(|k| {
                            curves
                                .iter()
                                .map(|c| c.get(k).copied().unwrap_or(0.0))
                                .sum::<f64>()
                                / n
                        })
                        .collect(),
                )
            }
        }
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

    /// Every way a tables file can say what no `survival` run writes: refused, naming
    /// the field; the shipped tables and the reference marginal pass.
    #[test]
    fn tables_files_are_checked_field_by_field() {
        SurvivalTables::builtin().check().unwrap();
        SurvivalTables::marginal_reference().check().unwrap();
        let good: serde_json::Value = serde_json::from_str(BUILTIN_TABLES).unwrap();
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 9] = [
            ("signal", |v| v["signal"] = "temperature".into()),
            ("edges", |v| v["edges"] = serde_json::json!([0.5, 0.1])),
            ("`all`", |v| {
                v["strata"].as_object_mut().unwrap().remove("all");
            }),
            ("empty", |v| v["strata"]["all"] = serde_json::json!({})),
            ("outside 0..1", |v| {
                v["strata"]["all"]["8"][0][0] = 5.0.into()
            }),
            ("outside 0..1", |v| {
                let c = v["strata"]["all"]["8"][0].as_array_mut().unwrap();
                let n = c.len();
                c[n - 1] = (-1.0).into();
            }),
            ("values", |v| {
                v["strata"]["all"]["8"][0].as_array_mut().unwrap().pop();
            }),
            ("rises", |v| v["strata"]["all"]["8"][0][3] = 1.0.into()),
            ("block size", |v| {
                let c = v["strata"]["all"]["8"].clone();
                v["strata"]["all"]["1000"] = c;
            }),
        ];
        for (needle, edit) in edits {
            let mut v = good.clone();
            edit(&mut v);
            let t: SurvivalTables = match serde_json::from_value(v) {
                Ok(t) => t,
                Err(e) => panic!("{needle}: {e}"),
            };
            let e = t.check().unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
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
    fn history_signal_is_ma2() {
        let mut h = History::default();
        for e in [3.0, 1.0, 2.0] {
            h.push(RoundOutcome {
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
