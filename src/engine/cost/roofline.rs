//! A GPU's forward costs for the real NLD geometry from a roofline model, as a cost
//! profile the block policy can decide from on any machine (`--cost-profile
//! b200-nld8b`): what RecGuide would choose on that GPU, shown on a CPU.
//!
//! A forward of `rows` rows of `t` query tokens after `ctx` committed positions costs
//!
//!   launch floor + bytes read / (bandwidth · η_mem) + FLOPs / (peak · η_flop)
//!
//! with bytes = the projection weights (bf16, read once per forward) + every row's KV
//! cache, and FLOPs = 2 · matmul params per token + the attention's 4 · layers · ctx ·
//! q_dim per token. The two terms add rather than overlap (the sum matched the paper's
//! B200 sweep better than the maximum). The efficiencies are rules of thumb; the
//! launch floor is the one number set from the paper's table (its C = 1, B = 8
//! point). `tests` compares the model with the paper's 24 B200 points.

use serde::{Deserialize, Serialize};

use super::{Profile, ProfilePoint};
use crate::model::Config;

/// Share of HBM bandwidth a bf16 GEMV-like forward reaches.
pub const MEMORY_EFFICIENCY: f64 = 0.7;
/// Share of dense bf16 peak a GEMM of a few hundred rows reaches.
pub const COMPUTE_EFFICIENCY: f64 = 0.5;
/// Kernel launches, synchronisation and the small ops of a forward (ms), set so the
/// model meets the paper's 8B B200 draft + verify at C = 1, B = 8 (9.96 ms).
pub const LAUNCH_FLOOR_MS: f64 = 2.0;

/// A GPU's spec-sheet numbers.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Gpu {
    pub name: &'static str,
    /// HBM bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Dense bf16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
}

pub const B200: Gpu = Gpu {
    name: "B200",
    bandwidth: 8.0e12,
    bf16_flops: 2.25e15,
};

pub const H200: Gpu = Gpu {
    name: "H200",
    bandwidth: 4.8e12,
    bf16_flops: 0.989e15,
};

/// H100 SXM: the GPU the device check may be lent, to compare its measurements with.
pub const H100: Gpu = Gpu {
    name: "H100",
    bandwidth: 3.35e12,
    bf16_flops: 0.989e15,
};

/// Every GPU above, for `specscope profile --roofline`.
pub const GPUS: &[Gpu] = &[B200, H200, H100];

/// A GPU of `GPUS` by name, case-insensitive (`h100`).
pub fn gpu(name: &str) -> Option<Gpu> {
    GPUS.iter()
        .find(|g| g.name.eq_ignore_ascii_case(name))
        .copied()
}

/// What a forward reads and computes, from the model's shapes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Geometry {
    /// Parameters of every matmul (projections and the head; not the embedding, which
    /// a forward only gathers from).
    pub matmul_params: f64,
    pub layers: f64,
    /// Query width (heads · head_dim).
    pub q_dim: f64,
    /// Key (= value) width (kv heads · head_dim).
    pub kv_dim: f64,
    /// Bytes per weight and per cached value (2: bf16).
    pub bytes: f64,
}

impl Geometry {
    pub fn of(cfg: &Config) -> Self {
        Self::dims(
            cfg.hidden_size as f64,
            cfg.intermediate_size as f64,
            cfg.vocab_size as f64,
            cfg.num_hidden_layers as f64,
            (cfg.num_attention_heads * cfg.head_dim()) as f64,
            (cfg.num_kv_heads() * cfg.head_dim()) as f64,
        )
    }

    /// Nemotron-Labs-Diffusion 8B: vocab 131072, hidden 4096, 34 layers, 32 heads of
    /// 128, 8 KV heads, intermediate 14336 (`../shared/reference/model.md`).
    pub fn nld_8b() -> Self {
        Self::dims(4096.0, 14336.0, 131072.0, 34.0, 4096.0, 1024.0)
    }

    /// From hidden `h`, intermediate `i`, vocabulary `v`, layer count, query width `q`
    /// and key width `kv`: q, k, v, o, the SwiGLU's three and the untied head, in bf16.
    fn dims(h: f64, i: f64, v: f64, layers: f64, q: f64, kv: f64) -> Self {
        Self {
            matmul_params: layers * (2.0 * h * q + 2.0 * h * kv + 3.0 * h * i) + v * h,
            layers,
            q_dim: q,
            kv_dim: kv,
            bytes: 2.0,
        }
    }
}

/// Modeled ms of one forward of `rows` rows of `tokens` query tokens after `ctx`.
pub fn forward_ms(gpu: &Gpu, g: &Geometry, rows: usize, tokens: usize, ctx: usize) -> f64 {
    let (r, t, c) = (rows as f64, tokens as f64, ctx as f64);
    let weights = g.matmul_params * g.bytes;
    let kv = r * c * g.layers * 2.0 * g.kv_dim * g.bytes;
    let flops = r * t * (2.0 * g.matmul_params + 4.0 * g.layers * c * g.q_dim);
    LAUNCH_FLOOR_MS
        + 1e3 * (weights + kv) / (gpu.bandwidth * MEMORY_EFFICIENCY)
        + 1e3 * flops / (gpu.bf16_flops * COMPUTE_EFFICIENCY)
}

/// Profile points over the shapes decoding uses, for `CostModel::fit`.
pub fn profile(gpu: &Gpu, g: &Geometry, model: &str) -> Profile {
    let mut points = Vec::new();
    for cache_len in [256, 1024, 4096] {
        for rows in [1, 2, 4, 8, 16, 32, 64, 128] {
            for tokens in [1, 4, 8, 16, 32] {
                let ms = forward_ms(gpu, g, rows, tokens, cache_len);
                points.push(ProfilePoint {
                    cache_len,
                    rows,
                    tokens,
                    median_ms: ms,
                    min_ms: ms,
                });
            }
        }
    }
    Profile {
        model: format!("{model} on {} (roofline model)", gpu.name),
        points,
    }
}

/// The shipped GPU profiles by name.
pub const NAMED: &[(&str, Gpu)] = &[
    ("b200-nld8b", B200),
    ("h200-nld8b", H200),
    ("h100-nld8b", H100),
];

/// The named roofline profile (`b200-nld8b`, `h200-nld8b`), if `name` is one.
pub fn named(name: &str) -> Option<Profile> {
    NAMED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, gpu)| profile(gpu, &Geometry::nld_8b(), "NLD-8B"))
}

/// The paper's 8B B200 draft + verify ms per full-C bucket (`decoding.md` §4.4):
/// `(C, [B8, B16, B32])`, mean context about 900 tokens.
pub const PAPER_B200_8B: &[(usize, [f64; 3])] = &[
    (1, [9.96, 10.24, 11.17]),
    (2, [10.96, 12.26, 13.16]),
    (4, [16.57, 17.10, 18.95]),
    (8, [17.11, 18.74, 21.48]),
    (16, [21.94, 24.39, 29.30]),
    (32, [22.49, 28.95, 41.79]),
    (64, [30.73, 43.55, 70.74]),
    (128, [48.55, 76.84, 132.45]),
];

/// Mean context of the paper's sweep (prompt + response prefixes, 790–940 tokens).
pub const PAPER_CONTEXT: usize = 900;

/// Modeled over paper ms for each of the paper's points: `(C, B, modeled, paper)`.
pub fn cross_check() -> Vec<(usize, usize, f64, f64)> {
    let g = Geometry::nld_8b();
    let mut out = Vec::new();
    for &(c, ms) in PAPER_B200_8B {
        for (b, paper) in [8, 16, 32].into_iter().zip(ms) {
            // Draft and verify: two forwards of C rows of B tokens.
            let model = 2.0 * forward_ms(&B200, &g, c, b, PAPER_CONTEXT);
            out.push((c, b, model, paper));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cost::CostModel;

    /// The model's geometry is the real 8B's: about 8 billion matmul parameters.
    #[test]
    fn nld_8b_geometry() {
        let g = Geometry::nld_8b();
        assert!(
            (7.9e9..8.0e9).contains(&g.matmul_params),
            "{}",
            g.matmul_params
        );
    }

    /// Within a factor 0.6–1.1 of every point of the paper's B200 sweep (the C = 4–16
    /// step of the real system is what the model misses most).
    #[test]
    fn cross_check_against_the_paper() {
        let pts = cross_check();
        assert_eq!(pts.len(), 24);
        // The range the docs quote: `cargo test --lib cross_check -- --nocapture`.
        let ratios = pts.iter().map(|(_, _, m, p)| m / p);
        let (lo, hi) = ratios.fold((f64::MAX, 0f64), |(l, h), r| (l.min(r), h.max(r)));
        eprintln!("roofline / paper over the 24 B200 points: {lo:.2}–{hi:.2}");
        for (c, b, model, paper) in pts {
            let r = model / paper;
            assert!(
                (0.6..1.1).contains(&r),
                "C={c} B={b}: {model:.1} vs {paper}"
            );
        }
    }

    /// The linear cost model fitted to the roofline points stays close to them, and
    /// prices what matters for the decisions: on a GPU a B = 32 round of one request
    /// costs little more than one AR step, unlike on a CPU.
    #[test]
    fn fitted_profile_keeps_the_gpu_shape() {
        let p = named("b200-nld8b").unwrap();
        let m = CostModel::fit(&p, "b200").unwrap();
        let worst = p
            .points
            .iter()
            .map(|pt| {
                let fit = m.forward_ms(pt.rows, pt.tokens, pt.cache_len);
                (fit / pt.median_ms - 1.0).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 0.25, "fit error {worst}");
        let ar = m.round_ms(1, 1, 1024);
        let b32 = m.round_ms(1, 32, 1024);
        assert!(
            b32 < 2.5 * ar,
            "B32 round {b32:.2} ms vs AR step {ar:.2} ms"
        );
        let cpu = CostModel::builtin();
        assert!(cpu.round_ms(1, 32, 256) > 4.0 * cpu.round_ms(1, 1, 256));
        assert!(named("nope").is_none());
    }
}
