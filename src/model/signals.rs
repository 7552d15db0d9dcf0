//! Per-position statistics of the logits, computed once per forward and reused by
//! acceptance, risk, branch building, block-size history and the screen. All the
//! vocabulary-wide work of decoding lives here, computed where the logits are: on the
//! CPU in one pass over each row in host memory (`signals_of`); on a GPU with tensor
//! ops (`device_signals`), so that only the top-k, the maximum and two sums per
//! position cross to the host, or with the fused kernel of `kernels/` where it passed
//! its check (`crate::model::kernels`). They belong to the model layer: the kernel
//! and the host path it replaces live side by side, and the engine (`engine::signals`
//! re-exports this module) reads them from below.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use candle_core::{DType, Tensor};
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

/// Bytes read out of logits tensors into host memory since the process started (the
/// statistics' whole cost in transfers, for `run --json` and `profile`).
static BYTES_TO_HOST: AtomicU64 = AtomicU64::new(0);
/// Logits positions (rows) whose statistics were computed.
static POSITIONS: AtomicU64 = AtomicU64::new(0);

/// What the statistics have read into host memory so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostReads {
    pub bytes: u64,
    pub positions: u64,
}

impl HostReads {
    /// The counters now.
    pub fn now() -> Self {
        Self {
            bytes: BYTES_TO_HOST.load(Ordering::Relaxed),
            positions: POSITIONS.load(Ordering::Relaxed),
        }
    }

    /// What was read since `before`.
    pub fn since(before: Self) -> Self {
        let now = Self::now();
        Self {
            bytes: now.bytes.saturating_sub(before.bytes),
            positions: now.positions.saturating_sub(before.positions),
        }
    }

    pub fn per_position(&self) -> f64 {
        if self.positions > 0 {
            self.bytes as f64 / self.positions as f64
        } else {
            0.0
        }
    }
}

/// `SPECSCOPE_SIGNALS=tensor`: the device path (tensor ops, O(k) numbers per position
/// to the host) on the CPU too, to measure what a GPU would transfer.
fn tensor_path_forced() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| std::env::var("SPECSCOPE_SIGNALS").is_ok_and(|v| v == "tensor"))
}

pub(crate) fn count_bytes(n: usize) {
    BYTES_TO_HOST.fetch_add(n as u64, Ordering::Relaxed);
}

/// Logits a forward gave no finite maximum: the weights or the config's numbers
/// are broken, and greedy decoding would emit token 0 for ever.
fn non_finite() -> anyhow::Error {
    anyhow::anyhow!(
        "the model produced non-finite logits (NaN or infinity): its weights hold NaN/inf values, or config.json's numbers (rms_norm_eps, rope parameters) are unusable"
    )
}

/// Which path computes the statistics for logits on `device` (for reports).
pub fn path(device: &candle_core::Device) -> &'static str {
    use crate::model::kernels::{state, KernelState};
    if device.is_cpu() && !tensor_path_forced() {
        "host: whole logits rows read on the CPU"
    } else if state() == KernelState::Passed {
        "fused kernel: 2k+3 floats per position"
    } else {
        "tensor ops: 2k+3 numbers per position"
    }
}

/// Signals for every row of a `(n, vocab)` logits tensor, where the logits are.
pub fn signals(logits: &Tensor, mask_id: u32) -> Result<Vec<PosSignals>> {
    POSITIONS.fetch_add(logits.dim(0)? as u64, Ordering::Relaxed);
    if !logits.device().is_cpu() || tensor_path_forced() {
        let raw = match crate::model::kernels::fused_signals(logits, mask_id)? {
            Some(raw) => raw,
            None => device_raw(logits, mask_id)?,
        };
        return raw.iter().map(RawStats::finish).collect();
    }
    let rows: Vec<Vec<f32>> = logits.to_dtype(DType::F32)?.to_vec2()?;
    count_bytes(rows.iter().map(|r| r.len() * 4).sum());
    let sig: Vec<PosSignals> = rows.iter().map(|r| signals_of(r, mask_id)).collect();
    if sig
        .iter()
        .any(|s| !(s.entropy.is_finite() && s.confidence.is_finite() && s.confidence > 0.0))
    {
        return Err(non_finite());
    }
    Ok(sig)
}

/// Logits below this are treated as this (−∞ and the mask's column included), so the
/// sums stay finite: e^(FLOOR − max) is 0 and 0 · FLOOR is 0.
const FLOOR: f64 = -1e30;

/// What crosses to the host per position when the statistics are computed on the
/// device: the top-k logits (raw, best first, with their ids), the maximum m,
/// S = Σ e^(x−m) and T = Σ e^(x−m)·(x−m), mask excluded. Both device paths (tensor ops
/// and the fused kernel) produce it; `finish` turns it into `PosSignals`.
#[derive(Debug, Clone, PartialEq)]
pub struct RawStats {
    pub top: Vec<(u32, f32)>,
    pub max: f32,
    pub sum: f64,
    pub tilt: f64,
}

/// Floats per position that cross to the host on the device paths: k logits, k ids,
/// m, S and T (4 bytes each).
pub const fn raw_floats(k: usize) -> usize {
    2 * k + 3
}

impl RawStats {
    /// Probabilities, margin, confidence and entropy, as `signals_of` computes them.
    pub fn finish(&self) -> Result<PosSignals> {
        let (max, sum, tilt) = (self.max, self.sum, self.tilt);
        let usable = max.is_finite() && max > FLOOR as f32 && sum > 0.0 && tilt.is_finite();
        if !usable {
            bail!(non_finite());
        }
        let top: Vec<(u32, f32)> = self
            .top
            .iter()
            .filter(|(_, x)| *x > FLOOR as f32 / 2.0)
            .map(|&(i, x)| (i, ((x - max).exp() as f64 / sum) as f32))
            .collect();
        let p1 = top.first().map_or(0.0, |t| t.1);
        let p2 = top.get(1).map_or(0.0, |t| t.1);
        Ok(PosSignals {
            argmax: top.first().map_or(0, |t| t.0),
            margin: p1 - p2,
            confidence: p1,
            entropy: (sum.ln() - tilt / sum) as f32,
            top,
        })
    }
}

/// The statistics with tensor ops on the logits' device (the reference for the fused
/// kernel, and its fallback): see `device_raw`.
pub fn device_signals(logits: &Tensor, mask_id: u32) -> Result<Vec<PosSignals>> {
    device_raw(logits, mask_id)?
        .iter()
        .map(RawStats::finish)
        .collect()
}

/// The maximum, Σ e^(x−max) and Σ e^(x−max)·(x−max), and the top-k by repeated
/// argmax, with tensor ops where the logits are; only those (k + 3 floats and k ids per
/// position) come to the host.
pub fn device_raw(logits: &Tensor, mask_id: u32) -> Result<Vec<RawStats>> {
    let raw = device_raw_uncounted(logits, mask_id)?;
    count_bytes(raw.len() * raw_floats(TOP_K) * 4);
    Ok(raw)
}

/// `device_raw` without counting the bytes (the kernels' self-check).
pub(crate) fn device_raw_uncounted(logits: &Tensor, mask_id: u32) -> Result<Vec<RawStats>> {
    let (n, v) = logits.dims2()?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let dev = logits.device();
    let mut keep = vec![1f32; v];
    let mut bias = vec![0f32; v];
    if let Some(m) = keep.get_mut(mask_id as usize) {
        *m = 0.0;
        bias[mask_id as usize] = FLOOR as f32;
    }
    let keep = Tensor::from_vec(keep, (1, v), dev)?;
    let bias = Tensor::from_vec(bias, (1, v), dev)?;
    let x = logits
        .to_dtype(DType::F32)?
        .maximum(FLOOR)?
        .broadcast_mul(&keep)?
        .broadcast_add(&bias)?;
    let max = x.max_keepdim(1)?;
    let d = x.broadcast_sub(&max)?;
    let e = d.exp()?;
    let sum = e.sum_keepdim(1)?;
    let tilt = (d * &e)?.sum_keepdim(1)?;
    let k = TOP_K.min(v.saturating_sub(1)).max(1);
    let mut xs = x;
    let (mut ids, mut vals) = (Vec::with_capacity(k), Vec::with_capacity(k));
    let sink = Tensor::full(FLOOR as f32, (n, 1), dev)?;
    for _ in 0..k {
        let i = xs.argmax_keepdim(1)?;
        vals.push(xs.gather(&i, 1)?);
        xs = xs.scatter_add(&i, &sink, 1)?;
        ids.push(i);
    }
    let mut cols = vals;
    cols.extend([max, sum, tilt]);
    let floats: Vec<Vec<f32>> = Tensor::cat(&cols, 1)?.to_vec2()?;
    let ids: Vec<Vec<u32>> = Tensor::cat(&ids, 1)?.to_vec2()?;
    Ok(floats
        .iter()
        .zip(&ids)
        .map(|(f, id)| RawStats {
            top: id.iter().copied().zip(f[..k].iter().copied()).collect(),
            max: f[k],
            sum: f[k + 1] as f64,
            tilt: f[k + 2] as f64,
        })
        .collect())
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

    /// The tensor-op path (what a GPU runs) equals the host path on the CPU.
    #[test]
    fn device_path_equals_host_path() {
        let mut rng = crate::rng::Rng::new(3);
        let (n, v) = (13, 300);
        let mut data: Vec<f32> = (0..n * v).map(|_| (rng.normal() * 3.0) as f32).collect();
        data[5] = f32::NEG_INFINITY; // a −∞ logit
        data[v + 7] = 40.0; // the mask's column wins in row 1, and is skipped
        let t = Tensor::from_vec(data.clone(), (n, v), &candle_core::Device::Cpu).unwrap();
        let dev = device_signals(&t, 7).unwrap();
        for (r, d) in data.chunks(v).zip(&dev) {
            let h = signals_of(r, 7);
            assert_eq!(h.argmax, d.argmax);
            assert_eq!(
                h.top.iter().map(|x| x.0).collect::<Vec<_>>(),
                d.top.iter().map(|x| x.0).collect::<Vec<_>>()
            );
            for (a, b) in h.top.iter().zip(&d.top) {
                assert!((a.1 - b.1).abs() < 1e-5, "{a:?} {b:?}");
            }
            assert!(
                (h.entropy - d.entropy).abs() < 1e-4,
                "{} {}",
                h.entropy,
                d.entropy
            );
            assert!((h.margin - d.margin).abs() < 1e-5);
        }
        assert_ne!(dev[1].argmax, 7, "the mask never wins");
    }

    #[test]
    fn non_finite_logits_are_an_error_naming_the_cause() {
        let t = Tensor::from_vec(vec![f32::NAN; 8], (2, 4), &candle_core::Device::Cpu).unwrap();
        for r in [signals(&t, 0), device_signals(&t, 0)] {
            let e = r.unwrap_err().to_string();
            assert!(
                e.contains("non-finite logits") && e.contains("rms_norm_eps"),
                "{e}"
            );
        }
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
    let sig = signals(logits, mask_id)?;
    let choices = if sampling.temperature > 0.0 {
        // Sampling needs the whole distribution: the one case where the logits come to
        // the host whole on a GPU (greedy decoding, the lossless setting, never does).
        let rows: Vec<Vec<f32>> = logits.to_dtype(DType::F32)?.to_vec2()?;
        if !logits.device().is_cpu() {
            count_bytes(rows.iter().map(|r| r.len() * 4).sum());
        }
        rows.iter()
            .map(|r| sample(r, mask_id, sampling.temperature, rng))
            .collect()
    } else {
        sig.iter().map(|s| s.argmax).collect()
    };
    Ok((sig, choices))
}
