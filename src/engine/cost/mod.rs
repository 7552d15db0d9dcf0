//! Forward cost: the one price list. A linear model fitted to `specscope profile`
//! points (this machine's, or a shipped one such as the GPU roofline profile), refitted
//! online from the run's own forwards (`online`); the block policy and the cost-aware
//! overlap ask it what a forward, a row and a round cost.

pub mod measured;
mod online;
mod pricing;
pub mod roofline;
pub mod timing;

pub use measured::MeasuredSweep;
pub use online::OnlineCost;
pub use pricing::{default_path, Clock, Pricing, DEFAULT_PROFILE, NAMED_PROFILES};

use std::borrow::Cow;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

/// The profile measured on the development CPU with the bundled model (`specscope profile
/// --rows 1,2,4,8,16 --tokens 1,4,8,16,32,64 --cache 64,256,512 --repeats 15 --json …`).
const BUILTIN_PROFILE: &str = include_str!("../../../assets/cost_profile_cpu.json");

/// One measured forward: `rows` rows of `tokens` query tokens after `cache_len`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfilePoint {
    pub cache_len: usize,
    pub rows: usize,
    pub tokens: usize,
    pub median_ms: f64,
    #[serde(default)]
    pub min_ms: f64,
}

/// `specscope profile --json` output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    pub model: String,
    pub points: Vec<ProfilePoint>,
}

/// ms = fixed + Σ_rows (per_row + per_row_ctx·ctx + per_token·t + per_token_ctx·t·ctx),
/// plus per_draft_token·t for a draft row (bidirectional, through the draft LoRA).
/// per_row_ctx prices reading a row's cached context once per forward (what bounds a
/// GPU's few-token forwards), per_token_ctx attending to it from every query token
/// (what bounds a CPU's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CostModel {
    pub fixed_ms: f64,
    pub per_row_ms: f64,
    pub per_token_ms: f64,
    pub per_token_ctx_ms: f64,
    /// Absent from profiles fitted before it existed (then 0).
    #[serde(default)]
    pub per_row_ctx_ms: f64,
    /// Not in a profile (which times verify rows); learned online (`OnlineCost`).
    #[serde(default)]
    pub per_draft_token_ms: f64,
    /// The scheduler's own work per round outside the forwards (planning, acceptance,
    /// bookkeeping): paid once a round whatever it decides, so it weighs on AR steps,
    /// which take a round per token. Not in a profile; learned online.
    #[serde(default)]
    pub per_round_ms: f64,
    /// Where the numbers come from (a file, or "built-in").
    pub source: String,
    /// A measured sweep the prices come from (`b200-nld8b-measured`): the linear prices
    /// above are then its fit over every load, and `at_load` its fit at one load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<MeasuredSweep>,
}

impl CostModel {
    /// Least-squares fit of the relative error to profile points (negative coefficients
    /// are clamped to 0). Relative, so that a 2 ms forward is fitted as closely as a
    /// 200 ms one: the decisions at low concurrency compare small forwards.
    ///
    /// Only the terms the points can tell apart are fitted: with one row count the
    /// per-row cost goes into the fixed cost, with one token count the per-token cost
    /// into the per-row cost, with one cache length the context term into the
    /// per-token cost; `notes` says which.
    pub fn fit(profile: &Profile, source: &str) -> Result<Self> {
        Ok(Self::fit_noting(profile, source)?.0)
    }

    /// [`fit`] and what it could not separate.
    pub fn fit_noting(profile: &Profile, source: &str) -> Result<(Self, Vec<String>)> {
        let pts = &profile.points;
        ensure!(!pts.is_empty(), "a cost profile needs at least one point");
        for p in pts {
            ensure!(
                p.median_ms.is_finite() && p.median_ms > 0.0 && p.rows > 0 && p.tokens > 0,
                "a profile point ({} rows × {} tokens after {}) has no usable time ({} ms)",
                p.rows,
                p.tokens,
                p.cache_len,
                p.median_ms
            );
        }
        let varies = |f: &dyn Fn(&ProfilePoint) -> usize| pts.iter().any(|p| f(p) != f(&pts[0]));
        // Terms: fixed, per row, per row·token, per row·token·cache, per row·cache.
        let used = [
            true,
            varies(&|p| p.rows),
            varies(&|p| p.tokens),
            varies(&|p| p.cache_len),
            varies(&|p| p.cache_len) && varies(&|p| p.tokens),
        ];
        let mut notes = Vec::new();
        for (u, what) in used.iter().zip([
            "",
            "one row count: the per-row cost is folded into the fixed cost",
            "one token count: the per-token cost is folded into the per-row cost",
            "one cache length: the context's cost is folded into the per-token cost",
            "the context's cost per row and per token cannot be told apart: it is all priced per token",
        ]) {
            if !u {
                notes.push(what.to_string());
            }
        }
        let idx: Vec<usize> = (0..used.len()).filter(|&i| used[i]).collect();
        let k = idx.len();
        ensure!(
            pts.len() >= k,
            "the cost profile has {} points; separating {k} terms needs at least {k}",
            pts.len()
        );
        let mut ata = vec![vec![0f64; k]; k];
        let mut atb = vec![0f64; k];
        for p in pts {
            let (r, t, c) = (p.rows as f64, p.tokens as f64, p.cache_len as f64);
            let full = [1.0, r, r * t, r * t * c, r * c];
            // A term left out is carried by the one before it (its value is constant).
            let x: Vec<f64> = idx.iter().map(|&i| full[i]).collect();
            let w = 1.0 / (p.median_ms * p.median_ms).max(1e-12);
            for i in 0..k {
                for j in 0..k {
                    ata[i][j] += w * x[i] * x[j];
                }
                atb[i] += w * x[i] * p.median_ms;
            }
        }
        let sol = solve_vec(ata, atb).context(
            "the cost profile's points do not separate the terms of the cost model (it needs rows, tokens and cache lengths that vary independently)",
        )?;
        let mut w = [0f64; 5];
        for (j, &i) in idx.iter().enumerate() {
            w[i] = sol[j];
        }
        let m = Self {
            fixed_ms: w[0].max(0.0),
            per_row_ms: w[1].max(0.0),
            per_token_ms: w[2].max(0.0),
            per_token_ctx_ms: w[3].max(0.0),
            per_row_ctx_ms: w[4].max(0.0),
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: source.to_string(),
            sweep: None,
        };
        Ok((m, notes))
    }

    /// A model of nothing but its source (tests build on it).
    pub fn zero(source: &str) -> Self {
        Self {
            fixed_ms: 0.0,
            per_row_ms: 0.0,
            per_token_ms: 0.0,
            per_token_ctx_ms: 0.0,
            per_row_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: source.to_string(),
            sweep: None,
        }
    }

    /// The shipped profile of the development CPU, fitted.
    pub fn builtin_fit() -> Result<Self> {
        let profile: Profile =
            serde_json::from_str(BUILTIN_PROFILE).context("the built-in cost profile")?;
        Self::fit(&profile, "built-in (development CPU)")
    }

    pub fn builtin() -> Self {
        Self::builtin_fit().unwrap_or(Self {
            fixed_ms: 1.0,
            per_row_ms: 0.5,
            per_token_ms: 0.2,
            per_token_ctx_ms: 0.0002,
            per_row_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: "built-in fallback".to_string(),
            sweep: None,
        })
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::read_bounded(path, 16 << 20)
            .with_context(|| format!("cannot read cost profile {}", path.display()))?;
        let profile: Profile = serde_json::from_str(&text)
            .with_context(|| format!("invalid cost profile {}", path.display()))?;
        Self::fit(&profile, &path.display().to_string())
            .with_context(|| format!("cost profile {}", path.display()))
    }

    /// The user's profile when `specscope profile --save` wrote one, else the built-in.
    /// The saved profile, or the built-in one with a warning for the caller to show
    /// when the saved one cannot be read.
    pub fn load_default() -> (Self, Option<String>) {
        match default_path() {
            Some(p) if p.is_file() => match Self::from_file(&p) {
                Ok(c) => (c, None),
                Err(e) => (
                    Self::builtin(),
                    Some(format!("{e:#}; using the built-in cost profile")),
                ),
            },
            _ => (Self::builtin(), None),
        }
    }

    /// The linear prices at a load of `c` rows per forward (requests in flight): this
    /// model, or for a measured sweep its tangent model there, whose fixed and per-row
    /// prices are what one more row costs at that load. The work per round and the
    /// draft surcharge are this model's.
    pub fn at_load(&self, c: usize) -> Cow<'_, CostModel> {
        let Some(sweep) = &self.sweep else {
            return Cow::Borrowed(self);
        };
        match sweep.tangent(c) {
            Ok(m) => Cow::Owned(CostModel {
                per_draft_token_ms: self.per_draft_token_ms,
                per_round_ms: self.per_round_ms,
                ..m
            }),
            // The sweep was checked when it was read: the fit over every load stands in.
            Err(_) => Cow::Borrowed(self),
        }
    }

    /// Cost of one row of `tokens` query tokens after `ctx` committed positions.
    pub fn row_ms(&self, tokens: usize, ctx: usize) -> f64 {
        self.per_row_ms + self.per_row_ctx_ms * ctx as f64 + self.tokens_ms(tokens, ctx)
    }

    /// Cost of `tokens` query tokens added to a row after `ctx` committed positions
    /// (without the row's own price: reading the context once).
    pub fn tokens_ms(&self, tokens: usize, ctx: usize) -> f64 {
        let t = tokens as f64;
        self.per_token_ms * t + self.per_token_ctx_ms * t * ctx as f64
    }

    /// Cost of one draft row of `tokens` tokens after `ctx` committed positions.
    pub fn draft_row_ms(&self, tokens: usize, ctx: usize) -> f64 {
        self.row_ms(tokens, ctx) + self.per_draft_token_ms * tokens as f64
    }

    /// Cost of a forward of `rows` equal (verify) rows.
    pub fn forward_ms(&self, rows: usize, tokens: usize, ctx: usize) -> f64 {
        self.fixed_ms + rows as f64 * self.row_ms(tokens, ctx)
    }

    /// A forward of `rows` rows of `tokens` is compute-bound: its rows cost at least
    /// its fixed price (on a CPU from one row; NLD-8B on a B200 from 75–82 rows of 4
    /// tokens).
    pub fn compute_bound(&self, rows: usize, tokens: usize, ctx: usize) -> bool {
        rows.max(1) as f64 * self.row_ms(tokens, ctx) >= self.fixed_ms
    }

    /// What a round costs whatever its blocks: each forward's fixed cost (the verify
    /// forward always, the draft forward when some request drafts) and the scheduler's
    /// own work per round.
    pub fn round_fixed_ms(&self, any_draft: bool) -> f64 {
        self.per_round_ms + self.fixed_ms * if any_draft { 2.0 } else { 1.0 }
    }

    /// T_C(B): one draft forward plus one verify forward for a bucket of `c` requests;
    /// B = 1 has no draft (an AR step).
    pub fn round_ms(&self, c: usize, block: usize, ctx: usize) -> f64 {
        let c = c.max(1);
        if block <= 1 {
            return self.per_round_ms + self.forward_ms(c, 1, ctx);
        }
        self.per_round_ms
            + self.forward_ms(c, block, ctx)
            + self.fixed_ms
            + c as f64 * self.draft_row_ms(block, ctx)
    }

    /// Tokens per ms of forward time of `c` requests all taking AR steps after `ctx`
    /// positions: one token each per verify forward of 1-token rows.
    pub fn ar_rate(&self, c: usize, ctx: usize) -> f64 {
        let c = c.max(1);
        let ms = self.forward_ms(c, 1, ctx);
        if ms > 0.0 {
            c as f64 / ms
        } else {
            0.0
        }
    }

    /// The coefficients in the order of `ForwardShape::features`.
    pub fn coefficients(&self) -> [f64; TERMS] {
        [
            self.fixed_ms,
            self.per_row_ms,
            self.per_token_ms,
            self.per_token_ctx_ms,
            self.per_draft_token_ms,
            self.per_row_ctx_ms,
        ]
    }

    /// Predicted ms of a forward of this shape (a measured sweep's priced by its tangent
    /// model at the forward's rows).
    pub fn predict(&self, shape: &ForwardShape) -> f64 {
        let x = shape.features();
        let m = self.at_load(shape.rows);
        m.coefficients().iter().zip(&x).map(|(w, x)| w * x).sum()
    }
}

/// Terms of the cost model (`coefficients`, `ForwardShape::features`).
pub const TERMS: usize = 6;

/// What a forward computed, in the cost model's terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ForwardShape {
    pub rows: usize,
    /// Σ query tokens.
    pub tokens: usize,
    /// Σ query tokens × committed positions of their row.
    pub token_ctx: usize,
    /// Σ committed positions of each row (its cache, read once).
    pub row_ctx: usize,
    /// Σ query tokens of draft rows.
    pub draft_tokens: usize,
}

impl ForwardShape {
    /// [1, rows, tokens, tokens·ctx, draft tokens, rows·ctx].
    pub fn features(&self) -> [f64; TERMS] {
        [
            1.0,
            self.rows as f64,
            self.tokens as f64,
            self.token_ctx as f64,
            self.draft_tokens as f64,
            self.row_ctx as f64,
        ]
    }
}

/// Gaussian elimination on a system of any size.
fn solve_vec(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-12 * a[piv].iter().map(|x| x.abs()).fold(1e-300, f64::max) {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        let pivot_row = a[col].clone();
        for r in 0..n {
            if r != col {
                let f = a[r][col] / pivot_row[col];
                for (x, p) in a[r].iter_mut().zip(pivot_row.iter()).skip(col) {
                    *x -= f * p;
                }
                b[r] -= f * b[col];
            }
        }
    }
    Some((0..n).map(|i| b[i] / a[i][i]).collect())
}

/// Gaussian elimination with partial pivoting on an N×N system.
pub(crate) fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for col in 0..N {
        let piv = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        let pivot_row = a[col];
        for r in 0..N {
            if r != col {
                let f = a[r][col] / pivot_row[col];
                for (x, p) in a[r].iter_mut().zip(pivot_row.iter()).skip(col) {
                    *x -= f * p;
                }
                b[r] -= f * b[col];
            }
        }
    }
    Some(std::array::from_fn(|i| b[i] / a[i][i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_linear_cost() {
        let truth = |r: usize, t: usize, c: usize| {
            1.5 + r as f64 * (0.7 + 0.2 * t as f64 + 1e-4 * (t * c) as f64)
        };
        let mut points = Vec::new();
        for c in [256, 1024] {
            for r in [1, 4] {
                for t in [1, 8, 16, 32] {
                    points.push(ProfilePoint {
                        cache_len: c,
                        rows: r,
                        tokens: t,
                        median_ms: truth(r, t, c),
                        min_ms: 0.0,
                    });
                }
            }
        }
        let m = CostModel::fit(
            &Profile {
                model: "t".into(),
                points,
            },
            "test",
        )
        .unwrap();
        assert!((m.fixed_ms - 1.5).abs() < 1e-6 && (m.per_row_ms - 0.7).abs() < 1e-6);
        assert!((m.forward_ms(2, 10, 500) - truth(2, 10, 500)).abs() < 1e-6);
    }

    #[test]
    fn fit_with_one_row_count_folds_the_per_row_cost_and_says_so() {
        let truth = |t: usize, c: usize| 1.5 + 0.7 + 0.2 * t as f64 + 1e-4 * (t * c) as f64;
        let mut points = Vec::new();
        for c in [256, 1024] {
            for t in [1, 4, 8, 16, 32] {
                points.push(ProfilePoint {
                    cache_len: c,
                    rows: 1,
                    tokens: t,
                    median_ms: truth(t, c),
                    min_ms: 0.0,
                });
            }
        }
        let profile = Profile {
            model: "t".into(),
            points,
        };
        let (m, notes) = CostModel::fit_noting(&profile, "test").unwrap();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("one row count"), "{notes:?}");
        assert!((m.forward_ms(1, 10, 500) - truth(10, 500)).abs() < 1e-6);
        assert_eq!(m.per_row_ms, 0.0);
    }

    #[test]
    fn builtin_profile_fits_and_prices_like_a_cpu() {
        // The shipped file itself must fit (the fallback would hide a broken one).
        let m = CostModel::builtin_fit().expect("the shipped profile fits");
        assert_eq!(m.source, "built-in (development CPU)");
        // A compute-bound CPU: 32 tokens cost several times 8.
        let (b8, b32) = (m.forward_ms(1, 8, 256), m.forward_ms(1, 32, 256));
        assert!(b32 > 1.5 * b8, "{b8} {b32}");
        assert!(m.fixed_ms > 0.0 && m.per_token_ms > 0.0, "{m:?}");
    }
}
