//! Rotary tables (plain or YaRN, transformers v5 semantics) and the Llama-4 query scale.

use anyhow::Result;
use candle_core::{Device, Tensor};

use super::config::Config;

/// Inverse frequencies and the cos/sin multiplier, computed once from the config.
#[derive(Debug, Clone)]
pub struct Rope {
    /// One per channel pair: `head_dim / 2` values.
    pub inv_freq: Vec<f64>,
    /// YaRN attention factor multiplying cos and sin (1.0 for NLD's mscale settings).
    pub attention_factor: f64,
    /// `(beta, original_max)` of the Llama-4 query temperature, when configured.
    pub query_scale: Option<(f64, usize)>,
}

/// Parameters of the YaRN rule, in the names of `rope_parameters`.
#[derive(Debug, Clone, Copy)]
pub struct Yarn {
    pub base: f64,
    pub factor: f64,
    pub original_max: usize,
    pub beta_fast: f64,
    pub beta_slow: f64,
    pub truncate: bool,
}

/// Plain RoPE: `1 / base^(2i/dim)`.
pub fn default_inv_freq(dim: usize, base: f64) -> Vec<f64> {
    (0..dim / 2)
        .map(|i| 1.0 / base.powf(2.0 * i as f64 / dim as f64))
        .collect()
}

/// YaRN inverse frequencies (reference/model.md §3.4).
pub fn yarn_inv_freq(dim: usize, y: Yarn) -> Vec<f64> {
    let correction_dim = |rotations: f64| {
        dim as f64 * (y.original_max as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * y.base.ln())
    };
    let (mut low, mut high) = (correction_dim(y.beta_fast), correction_dim(y.beta_slow));
    if y.truncate {
        low = low.floor();
        high = high.ceil();
    }
    low = low.max(0.0);
    high = high.min(dim as f64 - 1.0);
    if low == high {
        high += 0.001;
    }
    (0..dim / 2)
        .map(|i| {
            let pos_freq = y.base.powf(2.0 * i as f64 / dim as f64);
            let extrapolated = 1.0 / pos_freq;
            let interpolated = 1.0 / (y.factor * pos_freq);
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            interpolated * ramp + extrapolated * (1.0 - ramp)
        })
        .collect()
}

fn get_mscale(scale: f64, m: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * m * scale.ln() + 1.0
    }
}

/// Llama-4 query temperature `1 + beta · ln(1 + floor(pos / original_max))`.
pub fn query_scale(pos: usize, beta: f64, original_max: usize) -> f64 {
    1.0 + beta * (1.0 + (pos / original_max.max(1)) as f64).ln()
}

impl Rope {
    pub fn new(cfg: &Config) -> Self {
        let p = cfg.rope();
        let dim = cfg.head_dim();
        let base = cfg.rope_theta();
        let original_max = p
            .original_max_position_embeddings
            .unwrap_or(cfg.max_position_embeddings);
        let (inv_freq, attention_factor) = if p.rope_type == "yarn" {
            let implied = cfg.max_position_embeddings as f64 / original_max as f64;
            // transformers v5: an explicit factor wins over max/original.
            let factor = p.factor.unwrap_or(implied);
            let y = Yarn {
                base,
                factor,
                original_max,
                beta_fast: p.beta_fast.unwrap_or(32.0),
                beta_slow: p.beta_slow.unwrap_or(1.0),
                truncate: p.truncate.unwrap_or(true),
            };
            let attn = p
                .attention_factor
                .unwrap_or_else(|| match (p.mscale, p.mscale_all_dim) {
                    (Some(m), Some(ma)) => get_mscale(factor, m) / get_mscale(factor, ma),
                    _ => get_mscale(factor, 1.0),
                });
            (yarn_inv_freq(dim, y), attn)
        } else {
            (default_inv_freq(dim, base), 1.0)
        };
        let query_scale = p.llama_4_scaling_beta.map(|b| (b, original_max));
        Self {
            inv_freq,
            attention_factor,
            query_scale,
        }
    }

    /// cos, sin: (positions.len(), head_dim / 2), f32, for arbitrary absolute positions.
    pub fn cos_sin(&self, positions: &[usize], device: &Device) -> Result<(Tensor, Tensor)> {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &pos in positions {
            for &f in &self.inv_freq {
                let angle = pos as f64 * f;
                cos.push((angle.cos() * self.attention_factor) as f32);
                sin.push((angle.sin() * self.attention_factor) as f32);
            }
        }
        let shape = (positions.len(), half);
        Ok((
            Tensor::from_vec(cos, shape, device)?,
            Tensor::from_vec(sin, shape, device)?,
        ))
    }

    /// Per-position query multipliers, or `None` when every position scales by exactly 1.
    pub fn query_scales(&self, positions: &[usize]) -> Option<Vec<f32>> {
        let (beta, original_max) = self.query_scale?;
        if positions.iter().all(|&p| p < original_max) {
            return None;
        }
        Some(
            positions
                .iter()
                .map(|&p| query_scale(p, beta, original_max) as f32)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yarn(base: f64, factor: f64) -> Vec<f64> {
        yarn_inv_freq(
            128,
            Yarn {
                base,
                factor,
                original_max: 16384,
                beta_fast: 32.0,
                beta_slow: 1.0,
                truncate: true,
            },
        )
    }

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() < 2e-6
    }

    /// Test vectors of reference/model.md §3.4.
    #[test]
    fn yarn_matches_reference_vectors() {
        type Case = (f64, f64, [(usize, f64); 6]);
        let cases: [Case; 2] = [
            (
                1e6,
                16.0,
                [
                    (0, 1.0),
                    (1, 8.058422e-1),
                    (20, 1.333521e-2),
                    (30, 6.907023e-4),
                    (40, 1.111425e-5),
                    (63, 7.755861e-8),
                ],
            ),
            (
                1e9,
                16.0,
                [
                    (0, 1.0),
                    (1, 7.233942e-1),
                    (20, 6.977792e-4),
                    (30, 3.776852e-6),
                    (40, 1.482109e-7),
                    (63, 8.639826e-11),
                ],
            ),
        ];
        for (base, factor, points) in cases {
            let f = yarn(base, factor);
            for (i, want) in points {
                assert!(close(f[i], want), "θ={base} i={i}: {} vs {want}", f[i]);
            }
        }
        // The factor trap of §1.4: θ = 1e6, f = 0.25.
        let f = yarn(1e6, 0.25);
        assert!(close(f[40], 7.113118e-4), "{}", f[40]);
        assert!(close(f[63], 4.963751e-6), "{}", f[63]);
    }

    /// Query scale values of reference/model.md §3.1.
    #[test]
    fn llama4_query_scale_matches_reference() {
        assert_eq!(query_scale(16383, 0.1, 16384), 1.0);
        assert!((query_scale(16384, 0.1, 16384) - 1.0693147).abs() < 1e-7);
        assert!((query_scale(32767, 0.1, 16384) - 1.0693147).abs() < 1e-7);
        assert!((query_scale(32768, 0.1, 16384) - 1.1098612).abs() < 1e-7);
        assert!((query_scale(65536, 0.1, 16384) - 1.1609438).abs() < 1e-7);
        assert!((query_scale(262143, 0.1, 16384) - 1.2772589).abs() < 1e-7);
    }

    #[test]
    fn nld_mscale_gives_unit_attention_factor() {
        assert_eq!(get_mscale(16.0, 1.0) / get_mscale(16.0, 1.0), 1.0);
        assert!(get_mscale(16.0, 1.0) > 1.2);
    }
}
