//! A GPU's forward costs read from a measured sweep (`--cost-profile
//! b200-nld8b-measured`: the paper's B200 draft + verify times, `decoding.md` §4.4).
//! The roofline model is within 0.6–1.1× of that sweep and misses its step between
//! C = 2 and 4, where the forward turns from memory- to compute-bound; the sweep is
//! the better price list wherever it covers the shape.
//!
//! A forward of `rows` rows of `tokens` tokens at the sweep's context costs the
//! roofline's price times measured ÷ roofline at the nearest shape the sweep covers:
//! inside the sweep (rows and tokens between its points, interpolated piecewise
//! linearly in log2 rows and in tokens) the sweep itself; outside it (AR steps,
//! 4-token blocks, branch rows of 2B tokens, more rows than it measured) the
//! roofline, scaled to meet the sweep at its edge. Another context adds the
//! roofline's own difference (reading the KV cache, attending to it), not scaled by
//! that ratio: the ratio is about 1 at C = 1 and C = 128 and its excursion between
//! (up to 1.6) is the sweep's matmul step, not context; unscaled, the context price
//! stays linear, as the linear cost model can carry it.
//!
//! The block policy reasons with linear prices (a forward's fixed price, a row's, a
//! token's), and a surface with a step has none that hold at every load. So per load
//! the policy gets the tangent linear model, `CostModel::fit` to the surface around
//! that many rows (`CostModel::at_load`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

use super::roofline::{self, Geometry, Gpu};
use super::{CostModel, Profile, ProfilePoint};

/// `--cost-profile` name of the paper's NLD-8B B200 sweep.
pub const B200_NLD8B: &str = "b200-nld8b-measured";

/// Query tokens and cache lengths of the surface points a tangent model is fitted to:
/// AR steps, the blocks, and branch rows up to twice the largest block.
const FIT_TOKENS: [usize; 6] = [1, 4, 8, 16, 32, 64];
const FIT_CACHE: [usize; 3] = [256, 900, 4096];

/// Loads whose tangent models are kept once fitted (a forward has a few hundred rows
/// at most; beyond this each is fitted afresh).
const MEMO_LOADS: usize = 4096;

/// The roofline a sweep is extended by: a GPU's spec-sheet numbers and the model's
/// geometry (`roofline::forward_ms`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Roofline {
    pub gpu: String,
    /// HBM bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Dense bf16 peak, FLOP/s.
    pub bf16_flops: f64,
    pub geometry: Geometry,
}

impl Roofline {
    pub fn of(gpu: &Gpu, geometry: Geometry) -> Self {
        Self {
            gpu: gpu.name.to_string(),
            bandwidth: gpu.bandwidth,
            bf16_flops: gpu.bf16_flops,
            geometry,
        }
    }

    /// The roofline's ms of one forward.
    pub fn forward_ms(&self, rows: usize, tokens: usize, ctx: usize) -> f64 {
        let gpu = Gpu {
            name: "",
            bandwidth: self.bandwidth,
            bf16_flops: self.bf16_flops,
        };
        roofline::forward_ms(&gpu, &self.geometry, rows, tokens, ctx)
    }

    fn check(&self) -> Result<()> {
        let g = &self.geometry;
        let dims = [g.matmul_params, g.layers, g.q_dim, g.kv_dim, g.bytes];
        ensure!(
            [self.bandwidth, self.bf16_flops]
                .iter()
                .all(|x| x.is_finite() && *x > 0.0)
                && dims.iter().all(|x| x.is_finite() && *x >= 0.0),
            "a measured sweep's roofline for {} has no usable bandwidth, peak or geometry",
            self.gpu
        );
        Ok(())
    }
}

/// A measured sweep as recorded: ms of one draft plus one verify forward (the
/// paper's T_C(B)) of full buckets of `rows` requests drafting `tokens` tokens.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepTable {
    /// What was measured, where.
    pub source: String,
    /// Mean committed context of the measured forwards.
    pub context: usize,
    /// Rows per forward (C), ascending.
    pub rows: Vec<usize>,
    /// Query tokens per row (B), ascending.
    pub tokens: Vec<usize>,
    /// `round_ms[i][j]`: draft + verify ms at `rows[i]`, `tokens[j]`.
    pub round_ms: Vec<Vec<f64>>,
    pub roofline: Roofline,
}

impl SweepTable {
    /// The paper's NLD-8B B200 sweep (`roofline::PAPER_B200_8B`).
    pub fn paper_b200_8b() -> Self {
        Self {
            source: "NLD-8B on B200 (paper's measured sweep)".to_string(),
            context: roofline::PAPER_CONTEXT,
            rows: roofline::PAPER_B200_8B.iter().map(|p| p.0).collect(),
            tokens: vec![8, 16, 32],
            round_ms: roofline::PAPER_B200_8B
                .iter()
                .map(|p| p.1.to_vec())
                .collect(),
            roofline: Roofline::of(&roofline::B200, Geometry::nld_8b()),
        }
    }

    fn check(&self) -> Result<()> {
        ascending(&self.rows, "rows")?;
        ascending(&self.tokens, "tokens")?;
        ensure!(
            self.round_ms.len() == self.rows.len()
                && self.round_ms.iter().all(|r| r.len() == self.tokens.len()),
            "a measured sweep needs one time per rows × tokens ({} × {})",
            self.rows.len(),
            self.tokens.len()
        );
        ensure!(
            self.round_ms
                .iter()
                .flatten()
                .all(|ms| ms.is_finite() && *ms > 0.0),
            "a measured sweep has a time that is not a positive number of ms"
        );
        self.roofline.check()
    }
}

fn ascending(xs: &[usize], what: &str) -> Result<()> {
    ensure!(
        xs.first().is_some_and(|&x| x > 0) && xs.windows(2).all(|w| w[0] < w[1]),
        "a measured sweep's {what} must be positive and ascending: {xs:?}"
    );
    Ok(())
}

/// A checked sweep, with the tangent models fitted to it so far.
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "SweepTable", into = "SweepTable")]
pub struct MeasuredSweep {
    table: SweepTable,
    /// Tangent models by load, shared by clones (the policy prices every round).
    memo: Arc<Mutex<BTreeMap<usize, CostModel>>>,
}

impl std::fmt::Debug for MeasuredSweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeasuredSweep")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// Equal tables price alike, whatever either has memoized.
impl PartialEq for MeasuredSweep {
    fn eq(&self, other: &Self) -> bool {
        self.table == other.table
    }
}

impl TryFrom<SweepTable> for MeasuredSweep {
    type Error = anyhow::Error;

    fn try_from(table: SweepTable) -> Result<Self> {
        Self::new(table)
    }
}

impl From<MeasuredSweep> for SweepTable {
    fn from(s: MeasuredSweep) -> Self {
        s.table
    }
}

impl MeasuredSweep {
    pub fn new(table: SweepTable) -> Result<Self> {
        table.check()?;
        Ok(Self {
            table,
            memo: Arc::default(),
        })
    }

    pub fn table(&self) -> &SweepTable {
        &self.table
    }

    /// ms of one forward of `rows` rows of `tokens` tokens after `ctx` positions: at
    /// the sweep's context the roofline scaled by measured ÷ roofline at the nearest
    /// shape the sweep covers, plus the roofline's own price of the other context.
    pub fn forward_ms(&self, rows: usize, tokens: usize, ctx: usize) -> f64 {
        let t = &self.table;
        let (rows, tokens) = (rows.max(1), tokens.max(1));
        let near = |x: usize, xs: &[usize]| x.clamp(xs[0], xs[xs.len() - 1]);
        let (r, k) = (near(rows, &t.rows), near(tokens, &t.tokens));
        let roof = |ctx: usize| t.roofline.forward_ms(rows, tokens, ctx);
        let at_context =
            self.measured(r, k) * (roof(t.context) / t.roofline.forward_ms(r, k, t.context));
        at_context + (roof(ctx) - roof(t.context))
    }

    /// One forward (half of draft + verify) at the sweep's context, piecewise linear
    /// in (log2 rows, tokens) between its points.
    fn measured(&self, rows: usize, tokens: usize) -> f64 {
        let t = &self.table;
        let (i0, i1, wi) = bracket(&t.rows, rows, f64::log2);
        let (j0, j1, wj) = bracket(&t.tokens, tokens, |x| x);
        let at = |i: usize, j: usize| t.round_ms[i][j] / 2.0;
        let lo = lerp(at(i0, j0), at(i0, j1), wj);
        lerp(lo, lerp(at(i1, j0), at(i1, j1), wj), wi)
    }

    /// Surface points over every combination of the shapes given.
    pub fn profile(&self, rows: &[usize], tokens: &[usize], cache: &[usize]) -> Profile {
        let mut points = Vec::new();
        for &cache_len in cache {
            for &r in rows {
                for &k in tokens {
                    let ms = self.forward_ms(r, k, cache_len);
                    points.push(ProfilePoint {
                        cache_len,
                        rows: r,
                        tokens: k,
                        median_ms: ms,
                        min_ms: ms,
                    });
                }
            }
        }
        Profile {
            model: self.table.source.clone(),
            points,
        }
    }

    /// The linear prices at a load of `load` rows per forward, fitted to the surface
    /// around it (memoized).
    pub fn tangent(&self, load: usize) -> Result<CostModel> {
        let load = load.max(1);
        if let Some(m) = self.memo.lock().ok().and_then(|m| m.get(&load).cloned()) {
            return Ok(m);
        }
        let m = self.fit_at(load)?;
        if load <= MEMO_LOADS {
            if let Ok(mut memo) = self.memo.lock() {
                memo.insert(load, m.clone());
            }
        }
        Ok(m)
    }

    fn fit_at(&self, load: usize) -> Result<CostModel> {
        let source = format!("{} at {load} rows", self.table.source);
        let p = self.profile(&load_rows(load), &FIT_TOKENS, &FIT_CACHE);
        CostModel::fit(&p, &source)
            .with_context(|| format!("the tangent cost model at {load} rows"))
    }
}

/// Rows of the surface points a tangent model at `load` is fitted to: the load and a
/// row either side, so the fit's per-row price is the surface's slope there. Half to
/// twice the load straddles the sweep's step: its worst round was 15% off the sweep,
/// against 9.6% so (`tests::tangent_model_reproduces_the_sweep`).
fn load_rows(load: usize) -> Vec<usize> {
    let c = load.max(1);
    if c == 1 {
        vec![1, 2]
    } else {
        vec![c - 1, c, c + 1]
    }
}

/// Where `x` falls among the ascending, non-empty `xs`, clamped to their range: the
/// points either side and the weight of the upper one, linear in `f(x)`.
fn bracket(xs: &[usize], x: usize, f: fn(f64) -> f64) -> (usize, usize, f64) {
    let hi = xs.partition_point(|&p| p < x);
    if hi == 0 {
        return (0, 0, 0.0);
    }
    if hi == xs.len() {
        return (hi - 1, hi - 1, 0.0);
    }
    let (a, b) = (f(xs[hi - 1] as f64), f(xs[hi] as f64));
    (hi - 1, hi, (f(x as f64) - a) / (b - a))
}

/// Exact at both ends (a sweep point is met to the last bit).
fn lerp(a: f64, b: f64, w: f64) -> f64 {
    a * (1.0 - w) + b * w
}

/// The `b200-nld8b-measured` cost model: its linear prices the fit over every load
/// (what a reader that does not ask for a load sees), and the sweep for `at_load`.
pub fn b200_nld8b() -> Result<CostModel> {
    let sweep = MeasuredSweep::new(SweepTable::paper_b200_8b())?;
    let rows = [1, 2, 4, 8, 16, 32, 64, 128];
    let p = sweep.profile(&rows, &[1, 4, 8, 16, 32], &[256, 1024, 4096]);
    let source = sweep.table.source.clone();
    let fit = CostModel::fit(&p, &source).context("the measured B200 profile")?;
    Ok(CostModel {
        sweep: Some(sweep),
        ..fit
    })
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::engine::cost::{ForwardShape, Pricing, NAMED_PROFILES};

    fn sweep() -> MeasuredSweep {
        MeasuredSweep::new(SweepTable::paper_b200_8b()).unwrap()
    }

    /// Draft + verify (two forwards) at each of the sweep's 24 points is the sweep.
    #[test]
    fn surface_meets_every_sweep_point() {
        let s = sweep();
        let t = s.table();
        assert_eq!(t.rows.len() * t.tokens.len(), 24);
        for (i, &c) in t.rows.iter().enumerate() {
            for (j, &b) in t.tokens.iter().enumerate() {
                let two = 2.0 * s.forward_ms(c, b, t.context);
                assert_eq!(two, t.round_ms[i][j], "C={c} B={b}");
            }
        }
    }

    /// The policy's tangent model at each sweep load prices a round (draft + verify of
    /// the whole bucket) within 10% of the sweep.
    #[test]
    fn tangent_model_reproduces_the_sweep() {
        let s = sweep();
        let t = s.table();
        let mut worst = (0.0, 0, 0);
        for (i, &c) in t.rows.iter().enumerate() {
            let m = s.tangent(c).unwrap();
            for (j, &b) in t.tokens.iter().enumerate() {
                let err = m.round_ms(c, b, t.context) / t.round_ms[i][j] - 1.0;
                eprintln!("C={c:>3} B={b:>2}: {:+.1}%", 100.0 * err);
                if err.abs() > f64::abs(worst.0) {
                    worst = (err, c, b);
                }
            }
        }
        let (err, c, b) = worst;
        eprintln!("worst tangent error: {:+.1}% at C={c} B={b}", 100.0 * err);
        assert!(err.abs() < 0.10, "{:+.1}% at C={c} B={b}", 100.0 * err);
    }

    /// Where the roofline takes over (fewer tokens than the sweep's smallest block, more
    /// rows than its largest bucket) the two meet: a token or a row past the edge moves
    /// the price by the roofline's own step there, a few % where that is small.
    #[test]
    fn continuous_where_the_roofline_takes_over() {
        let s = sweep();
        let t = s.table();
        let roof = |r, k| t.roofline.forward_ms(r, k, t.context);
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 0.05;
        for c in [1, 3, 16, 100, 128] {
            let (b8, b7) = (s.forward_ms(c, 8, 900), s.forward_ms(c, 7, 900));
            let own = roof(c, 7) / roof(c, 8);
            assert!((b7 / b8 - own).abs() < 1e-9, "C={c}: {b7:.2} vs {b8:.2}");
        }
        for b in [1, 8, 20, 32, 64] {
            let (c128, c129) = (s.forward_ms(128, b, 900), s.forward_ms(129, b, 900));
            let own = roof(129, b) / roof(128, b);
            assert!(
                (c129 / c128 - own).abs() < 1e-9,
                "B={b}: {c129:.2} vs {c128:.2}"
            );
        }
        for ctx in [256, 900, 4096] {
            for c in [1, 3, 8, 16] {
                let (b8, b7) = (s.forward_ms(c, 8, ctx), s.forward_ms(c, 7, ctx));
                assert!(close(b7, b8), "C={c} ctx={ctx}: B=7 {b7:.2} vs B=8 {b8:.2}");
            }
            for b in [1, 8, 20, 32, 64] {
                let (c128, c129) = (s.forward_ms(128, b, ctx), s.forward_ms(129, b, ctx));
                assert!(close(c129, c128), "B={b} ctx={ctx}: {c129:.2} vs {c128:.2}");
            }
            let (b32, b33) = (s.forward_ms(64, 32, ctx), s.forward_ms(64, 33, ctx));
            assert!(close(b33, b32), "ctx={ctx}: B=33 {b33:.2} vs B=32 {b32:.2}");
        }
        // More context costs more; so do more rows and more tokens.
        assert!(s.forward_ms(16, 16, 4096) > s.forward_ms(16, 16, 256));
        assert!(s.forward_ms(256, 64, 900) > s.forward_ms(128, 64, 900));
        assert!(s.forward_ms(4, 1, 900) < s.forward_ms(4, 8, 900));
    }

    /// A linear profile is its own model at every load; a measured one is not, and its
    /// real forwards are priced at their rows.
    #[test]
    fn at_load_is_the_tangent_only_for_a_sweep() {
        let cpu = CostModel::builtin();
        for c in [1, 7, 128] {
            assert!(matches!(cpu.at_load(c), Cow::Borrowed(m) if std::ptr::eq(m, &cpu)));
        }
        let m = b200_nld8b().unwrap();
        let (one, many) = (m.at_load(1), m.at_load(128));
        assert!(one.sweep.is_none() && many.sweep.is_none());
        // Memory-bound at one request (its rows cost less than the forward's fixed
        // price), compute-bound at 128.
        assert!(!one.compute_bound(1, 8, 900), "{one:?}");
        assert!(many.compute_bound(128, 8, 900), "{many:?}");
        let shape = ForwardShape {
            rows: 128,
            tokens: 128 * 16,
            token_ctx: 128 * 16 * 900,
            row_ctx: 128 * 900,
            draft_tokens: 0,
        };
        assert_eq!(m.predict(&shape), many.predict(&shape));
        let paper = 76.84 / 2.0;
        assert!((m.predict(&shape) / paper - 1.0).abs() < 0.1);
    }

    /// The sweep survives a round trip through JSON (recordings embed the profile), a
    /// malformed one is refused, and a profile without one still reads.
    #[test]
    fn serializes_and_checks_the_table() {
        let m = b200_nld8b().unwrap();
        let text = serde_json::to_string(&m).unwrap();
        let back: CostModel = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        let cpu = CostModel::builtin();
        let plain = serde_json::to_string(&cpu).unwrap();
        assert!(!plain.contains("sweep"));
        assert_eq!(serde_json::from_str::<CostModel>(&plain).unwrap(), cpu);
        let mut bad = SweepTable::paper_b200_8b();
        bad.rows.swap(0, 1);
        assert!(MeasuredSweep::new(bad.clone()).is_err());
        let bad_json = serde_json::to_string(&bad).unwrap();
        assert!(serde_json::from_str::<MeasuredSweep>(&bad_json).is_err());
        let mut ragged = SweepTable::paper_b200_8b();
        ragged.round_ms[3].pop();
        assert!(MeasuredSweep::new(ragged).is_err());
    }

    #[test]
    fn profile_name_parses() {
        let p = Pricing::select(Some(B200_NLD8B)).unwrap();
        assert!(p.label.contains("measured"), "{}", p.label);
        assert!(!p.learn && p.cost.sweep.is_some());
        assert!(NAMED_PROFILES.iter().any(|(n, _)| *n == B200_NLD8B));
        // The roofline profile of the same GPU stays linear.
        assert!(Pricing::select(Some("b200-nld8b"))
            .unwrap()
            .cost
            .sweep
            .is_none());
    }
}
