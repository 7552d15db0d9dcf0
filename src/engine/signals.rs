//! Per-position statistics of a logits row, computed once per forward and reused by
//! acceptance, risk, branch building, block-size history and the screen. All the
//! vocabulary-wide work of decoding lives here (the CUDA kernel replaces exactly this).

use anyhow::Result;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

/// How many candidates each position keeps (enough to skip draft, mask and EOS ids).
pub const TOP_K: usize = 8;

/// Softmax statistics of one position, with the mask token excluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PosSignals {
    /// Highest-probability token other than the mask.
    pub argmax: u32,
    /// Top candidates `(id, probability)`, best first.
    pub top: Vec<(u32, f32)>,
    /// p1 − p2: small margins are risky draft positions.
    pub margin: f32,
    /// p1.
    pub confidence: f32,
    /// Entropy (nats) of the mask-excluded distribution.
    pub entropy: f32,
}

impl PosSignals {
    /// Candidates that are neither `exclude` nor in `banned` (the draft's own token, the
    /// mask and EOS for a correction branch's alternative), best first, with their
    /// probabilities.
    pub fn alternatives<'a>(
        &'a self,
        exclude: u32,
        banned: &'a [u32],
    ) -> impl Iterator<Item = (u32, f32)> + 'a {
        self.top
            .iter()
            .copied()
            .filter(move |(id, _)| *id != exclude && !banned.contains(id))
    }

    /// The best of `alternatives`.
    pub fn alternative(&self, exclude: u32, banned: &[u32]) -> Option<u32> {
        self.alternatives(exclude, banned).next().map(|t| t.0)
    }
}

/// Signals of one logits row (`vocab` values), mask token excluded.
pub fn signals_of(row: &[f32], mask_id: u32) -> PosSignals {
    let mask = mask_id as usize;
    // Pass 1: the maximum and the top-k logits (a bounded insertion list: O(V·k) with
    // k tiny; ties keep the lower id first).
    let mut max = f32::NEG_INFINITY;
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(TOP_K + 1);
    for (i, &x) in row.iter().enumerate() {
        if i == mask {
            continue;
        }
        max = max.max(x);
        if top.len() < TOP_K || x > top[top.len() - 1].1 {
            let at = top.iter().position(|&(_, y)| x > y).unwrap_or(top.len());
            top.insert(at, (i as u32, x));
            top.truncate(TOP_K);
        }
    }
    // Pass 2, one exp per logit: S = Σ e^(x−max) and T = Σ e^(x−max)·(x−max), so that
    // log Z = max + ln S and the entropy is ln S − T / S.
    let (before, after) = row.split_at(mask.min(row.len()));
    let after = after.get(1..).unwrap_or(&[]);
    let (mut sum, mut tilt) = (0f64, 0f64);
    for &x in before.iter().chain(after) {
        let d = x - max;
        let e = d.exp();
        if e > 0.0 {
            sum += e as f64;
            tilt += (e * d) as f64; // e·d is NaN for a −∞ logit, whose share is 0
        }
    }
    let entropy = if sum > 0.0 {
        sum.ln() - tilt / sum
    } else {
        0.0
    };
    let top: Vec<(u32, f32)> = top
        .into_iter()
        .map(|(id, x)| (id, ((x - max).exp() as f64 / sum) as f32))
        .collect();
    let p1 = top.first().map_or(0.0, |t| t.1);
    let p2 = top.get(1).map_or(0.0, |t| t.1);
    PosSignals {
        argmax: top.first().map_or(0, |t| t.0),
        margin: p1 - p2,
        confidence: p1,
        entropy: entropy as f32,
        top,
    }
}

/// Signals for every row of a `(n, vocab)` logits tensor.
pub fn signals(logits: &Tensor, mask_id: u32) -> Result<Vec<PosSignals>> {
    let rows: Vec<Vec<f32>> = logits.to_vec2()?;
    Ok(rows.iter().map(|r| signals_of(r, mask_id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_is_excluded_and_stats_are_consistent() {
        // Mask (id 1) has the largest logit but never wins.
        let row = [0.0f32, 9.0, 2.0, 1.0, 2.0];
        let s = signals_of(&row, 1);
        assert_eq!(s.argmax, 2, "ties go to the lower id");
        assert_eq!(
            s.top.iter().map(|t| t.0).collect::<Vec<_>>(),
            vec![2, 4, 3, 0]
        );
        let total: f32 = s.top.iter().map(|t| t.1).sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert!(s.margin.abs() < 1e-6, "equal top two: zero margin");
        let uniform = signals_of(&[1.0; 4], 9);
        assert!((uniform.entropy - 4f32.ln()).abs() < 1e-5);
        assert!((uniform.confidence - 0.25).abs() < 1e-6);
    }

    #[test]
    fn alternative_skips_draft_mask_and_eos() {
        let s = signals_of(&[5.0, 4.0, 3.0, 2.0, 1.0], 99);
        assert_eq!(s.alternative(0, &[]), Some(1));
        assert_eq!(s.alternative(0, &[1]), Some(2));
        assert_eq!(s.alternative(1, &[0]), Some(2));
    }
}

/// Temperature sampling over the mask-excluded distribution of one logits row.
pub fn sample(row: &[f32], mask_id: u32, temperature: f32, rng: &mut crate::rng::Rng) -> u32 {
    let mask = mask_id as usize;
    let t = temperature.max(1e-6) as f64;
    let max = row
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != mask)
        .fold(f32::NEG_INFINITY, |m, (_, &x)| m.max(x)) as f64;
    let weights: Vec<f64> = row
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            if i == mask {
                0.0
            } else {
                ((x as f64 - max) / t).exp()
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.uniform() * total;
    for (i, w) in weights.iter().enumerate() {
        u -= w;
        if u <= 0.0 && *w > 0.0 {
            return i as u32;
        }
    }
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u32
}

/// How tokens are chosen from logits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 = greedy (the lossless setting).
    pub temperature: f32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            seed: 0,
        }
    }
}

/// Signals of every row of `logits` and the token chosen at each: the argmax when
/// greedy, a sample otherwise.
pub fn signals_and_choices(
    logits: &Tensor,
    mask_id: u32,
    sampling: Sampling,
    rng: &mut crate::rng::Rng,
) -> Result<(Vec<PosSignals>, Vec<u32>)> {
    let rows: Vec<Vec<f32>> = logits.to_vec2()?;
    let sig: Vec<PosSignals> = rows.iter().map(|r| signals_of(r, mask_id)).collect();
    let choices = if sampling.temperature > 0.0 {
        rows.iter()
            .map(|r| sample(r, mask_id, sampling.temperature, rng))
            .collect()
    } else {
        sig.iter().map(|s| s.argmax).collect()
    };
    Ok((sig, choices))
}
