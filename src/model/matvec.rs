//! A few-row projection on the CPU that reads the stored (out, in) weight once, row
//! after row, as fast as memory delivers it: y[r, o] = x[r, ·] · w[o, ·].
//!
//! One token's forward reads every weight once and does two flops per weight read:
//! it is bound by memory bandwidth, and what matters is streaming the weights
//! without a detour. A general gemm reads the stored weight through a transposed
//! view or needs a transposed copy (`Proj`); here each output is a dot product of two
//! contiguous rows, each weight row comes from memory once (later rows of x find it
//! in cache), and the output columns are split across the cores. Each output is
//! computed by the same code whatever the number of rows, so a row's product does not
//! depend on the rows sharing its forward.
//!
//! bf16 and f16 weights are read as stored (half the bytes) and widened to f32 in
//! registers, exactly: the sums are f32, in the same order as for an f32 weight of the
//! same values, for every number of rows.

use half::{bf16, f16};
use rayon::prelude::*;

/// A stored (out, in) weight, row-major, in the dtype it is kept in.
#[derive(Debug, Clone, Copy)]
pub enum Weights<'a> {
    F32(&'a [f32]),
    Bf16(&'a [bf16]),
    F16(&'a [f16]),
}

impl Weights<'_> {
    fn len(&self) -> usize {
        match self {
            Self::F32(w) => w.len(),
            Self::Bf16(w) => w.len(),
            Self::F16(w) => w.len(),
        }
    }

    /// Whether this CPU has the vector kernel for these weights; asked once a
    /// projection, not once a product.
    fn vectorised(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            has!("avx2") && has!("fma") && (!matches!(self, Self::F16(_)) || has!("f16c"))
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Each x · row `o` (of width n), summed exactly as [`dot`] sums an f32 row of
    /// the same values (for f16, where the CPU has F16C): widening bf16/f16 is exact,
    /// and the order of the sums is the same for every R. `vector` is
    /// [`Self::vectorised`]; without it `buf` holds the widened row.
    fn dot_rows<const R: usize>(
        &self,
        xs: [&[f32]; R],
        o: usize,
        n: usize,
        vector: bool,
        buf: &mut Vec<f32>,
    ) -> [f32; R] {
        let span = o * n..(o + 1) * n;
        #[cfg(not(target_arch = "x86_64"))]
        let _ = vector; // no vector kernels here
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: `vector` says the CPU has AVX2 and FMA, and F16C for f16.
            return unsafe {
                match self {
                    Self::F32(w) => dot_avx2(xs, &w[span]),
                    Self::Bf16(w) => dot_bf16_avx2(xs, &w[span]),
                    Self::F16(w) => dot_f16_avx2(xs, &w[span]),
                }
            };
        }
        let wide: &[f32] = match self {
            Self::F32(w) => &w[span],
            Self::Bf16(w) => {
                buf.clear();
                buf.extend(w[span].iter().map(|b| b.to_f32()));
                buf
            }
            Self::F16(w) => {
                buf.clear();
                buf.extend(w[span].iter().map(|h| h.to_f32()));
                buf
            }
        };
        xs.map(|x| dot_portable(x, wide))
    }
}

/// Rows of x up to which [`project`] is used for an f32 weight: NLD-1B's weights
/// stream faster than gemm up to 4 rows and about as fast at 8 (an 8-token forward 345
/// → 313 ms), slower at 16 (`cargo bench --bench projection_layout`, docs/results.md).
pub const MAX_ROWS: usize = 8;

/// Weights from which [`project`] is used (4 MiB in f32, past the caches): a smaller
/// weight is read from cache, where the product's arithmetic, not memory, sets the
/// pace and gemm's kernels do better (the bundled model's projections).
pub const MIN_WEIGHTS: usize = 1 << 20;

/// Whether [`project`] is the faster way for `rows` rows of a weight of `weights`.
pub fn streams(rows: usize, weights: usize) -> bool {
    rows <= MAX_ROWS && weights >= MIN_WEIGHTS
}

/// Weights per task: large enough that scheduling one costs little beside reading it.
const TASK_WEIGHTS: usize = 1 << 16;

/// y (rows × out_dim) = x (rows × in_dim) · wᵀ for w (out_dim × in_dim), all
/// row-major.
///
/// # Panics
/// Where the slices are shorter than the dimensions say (a caller's bug).
pub fn project(x: &[f32], rows: usize, w: &[f32], out_dim: usize, in_dim: usize) -> Vec<f32> {
    project_stored(x, rows, Weights::F32(w), out_dim, in_dim)
}

/// [`project`] for a weight in any of the [`Weights`] dtypes, accumulating in f32.
///
/// # Panics
/// Where the slices are shorter than the dimensions say (a caller's bug).
pub fn project_stored(
    x: &[f32],
    rows: usize,
    w: Weights,
    out_dim: usize,
    in_dim: usize,
) -> Vec<f32> {
    assert!(x.len() >= rows * in_dim && w.len() >= out_dim * in_dim);
    // (out, rows): one output column's rows together, so a task owns a contiguous run.
    let mut yt = vec![0f32; out_dim * rows];
    let per_task = (TASK_WEIGHTS / in_dim.max(1)).max(1);
    let x_row = |r: usize| &x[r * in_dim..(r + 1) * in_dim];
    let vector = w.vectorised();
    let fill = |(t, chunk): (usize, &mut [f32])| {
        let mut buf = Vec::new();
        let outs = chunk.len() / rows.max(1);
        // Rows of x two at a time against the task's weight rows: each weight load
        // serves both, and later pairs find the task's weight rows in cache.
        // (Four at a time spill AVX2's 16 registers: slower at 32 tokens.)
        for r in (0..rows).step_by(2) {
            for k in 0..outs {
                let o = t * per_task + k;
                if r + 1 < rows {
                    let [a, b] = w.dot_rows([x_row(r), x_row(r + 1)], o, in_dim, vector, &mut buf);
                    chunk[k * rows + r] = a;
                    chunk[k * rows + r + 1] = b;
                } else {
                    chunk[k * rows + r] = w.dot_rows([x_row(r)], o, in_dim, vector, &mut buf)[0];
                }
            }
        }
    };
    let chunk = per_task * rows.max(1);
    if out_dim * in_dim <= 4 * TASK_WEIGHTS {
        // A small weight: fewer cycles to read than to hand out to another core.
        yt.chunks_mut(chunk).enumerate().for_each(fill);
    } else {
        yt.par_chunks_mut(chunk).enumerate().for_each(fill);
    }
    if rows == 1 {
        return yt;
    }
    let mut y = vec![0f32; rows * out_dim];
    for o in 0..out_dim {
        for r in 0..rows {
            y[r * out_dim + o] = yt[o * rows + r];
        }
    }
    y
}

/// a · b, in one fixed order for a given length on a given machine.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let w = Weights::F32(b);
    w.dot_rows([a], 0, b.len(), w.vectorised(), &mut Vec::new())[0]
}

/// Eight independent sums (the compiler vectorises them), added in a fixed order.
fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [0f32; 8];
    let (ac, bc) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

/// How far ahead of its loads a dot product asks for the weight: NLD-1B one-token
/// forwards were fastest from 4 KiB on (tried 256 B to 16 KiB, bf16 and f32).
const PREFETCH_BYTES: usize = 4096;

/// `$name(xs, b)`: each x · b for f32 x and b stored as `$t`, each 8 of b widened to
/// f32 by `$load` once for all the xs. Each product sums in four 8-lane accumulators
/// (32 products a step: enough loads in flight to keep memory busy), reduced in a
/// fixed order: one order for every `$t` and every number of xs.
macro_rules! dot_kernel {
    ($name:ident, $t:ty, $features:literal, $load:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(xs: [&[f32]; R], b: &[$t]) -> [f32; R] {
            use std::arch::x86_64::{
                _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
                _mm256_storeu_ps, _mm_prefetch, _MM_HINT_T0,
            };
            const AHEAD: usize = PREFETCH_BYTES / std::mem::size_of::<$t>();
            let n = xs.iter().fold(b.len(), |n, x| n.min(x.len()));
            let pb = b.as_ptr();
            let mut acc = [[_mm256_setzero_ps(); 4]; R];
            let mut i = 0;
            while i + 32 <= n {
                // The weight is read once, from memory, and the hardware's prefetch
                // alone falls behind (bf16 one-token NLD-1B forwards at 0.6 of the
                // bandwidth without this).
                _mm_prefetch::<_MM_HINT_T0>(pb.wrapping_add(i + AHEAD).cast::<i8>());
                for k in 0..4 {
                    // SAFETY: i + 8k + 8 ≤ n, within b and every x; `$load` reads 8.
                    let vb = unsafe { $load(pb.add(i + 8 * k)) };
                    for (x, acc) in xs.iter().zip(acc.iter_mut()) {
                        // SAFETY: as above.
                        let va = unsafe { _mm256_loadu_ps(x.as_ptr().add(i + 8 * k)) };
                        acc[k] = _mm256_fmadd_ps(va, vb, acc[k]);
                    }
                }
                i += 32;
            }
            let mut out = [0f32; R];
            for ((x, acc), out) in xs.iter().zip(&acc).zip(out.iter_mut()) {
                let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                let mut lanes = [0f32; 8];
                // SAFETY: lanes holds 8 floats.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
                let mut total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
                    + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
                for j in i..n {
                    total = x[j].mul_add(f32::from(b[j]), total);
                }
                *out = total;
            }
            out
        }
    };
}

// Each load is expanded inside the kernel's unsafe block, on 8 readable values.
dot_kernel!(dot_avx2, f32, "avx2,fma", |p: *const f32| {
    std::arch::x86_64::_mm256_loadu_ps(p)
});

// bf16 is the top half of an f32: widening is a shift.
dot_kernel!(dot_bf16_avx2, bf16, "avx2,fma", |p: *const bf16| {
    use std::arch::x86_64::{
        __m128i, _mm256_castsi256_ps, _mm256_cvtepu16_epi32, _mm256_slli_epi32, _mm_loadu_si128,
    };
    let h = _mm_loadu_si128(p.cast::<__m128i>());
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
});

dot_kernel!(dot_f16_avx2, f16, "avx2,fma,f16c", |p: *const f16| {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm_loadu_si128};
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<__m128i>()))
});

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], rows: usize, w: &[f32], out: usize, inn: usize) -> Vec<f64> {
        let mut y = vec![0f64; rows * out];
        for r in 0..rows {
            for o in 0..out {
                y[r * out + o] = (0..inn)
                    .map(|i| f64::from(x[r * inn + i]) * f64::from(w[o * inn + i]))
                    .sum();
            }
        }
        y
    }

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 2001) as f32 / 1000.0
                    - 1.0
            })
            .collect()
    }

    #[test]
    fn products_match_and_do_not_depend_on_the_rows_beside() {
        // Lengths with and without a tail after the 32-wide steps; weights above and
        // below the size handed to other cores.
        for (out, inn) in [(3, 7), (17, 40), (96, 100), (600, 2048)] {
            let w = data(out * inn, 1);
            let x = data(4 * inn, 2);
            let all = project(&x, 4, &w, out, inn);
            let want = naive(&x, 4, &w, out, inn);
            for (got, want) in all.iter().zip(&want) {
                assert!(
                    (f64::from(*got) - want).abs() < 1e-3 * (1.0 + want.abs()),
                    "{out}x{inn}"
                );
            }
            // Each row alone gives bit for bit what it gave among the others.
            for r in 0..4 {
                let alone = project(&x[r * inn..(r + 1) * inn], 1, &w, out, inn);
                assert_eq!(alone, all[r * out..(r + 1) * out], "{out}x{inn} row {r}");
            }
        }
    }

    #[test]
    fn half_weights_sum_as_their_f32_values_do_at_every_row_count() {
        // Widths with and without a tail after the 32-wide steps.
        for (out, inn) in [(5, 9), (7, 1000), (300, 2048)] {
            let wide = data(out * inn, 5);
            let x = data(3 * inn, 6);
            let b: Vec<bf16> = wide.iter().map(|v| bf16::from_f32(*v)).collect();
            let h: Vec<f16> = wide.iter().map(|v| f16::from_f32(*v)).collect();
            let cases = [
                (
                    Weights::Bf16(&b),
                    b.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
                ),
                (Weights::F16(&h), h.iter().map(|v| v.to_f32()).collect()),
            ];
            for (w, as_f32) in cases {
                let all = project_stored(&x, 3, w, out, inn);
                // Read as stored, the sums are those of the same values stored as f32.
                assert_eq!(all, project(&x, 3, &as_f32, out, inn), "{w:?}");
                for r in 0..3 {
                    let alone = project_stored(&x[r * inn..(r + 1) * inn], 1, w, out, inn);
                    assert_eq!(alone, all[r * out..(r + 1) * out], "{out}x{inn} row {r}");
                }
            }
        }
    }

    #[test]
    fn the_portable_dot_agrees_with_the_vector_one() {
        let (a, b) = (data(1000, 3), data(1000, 4));
        let want: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        for got in [dot(&a, &b), dot_portable(&a, &b)] {
            assert!((f64::from(got) - want).abs() < 1e-3, "{got} {want}");
        }
    }
}
