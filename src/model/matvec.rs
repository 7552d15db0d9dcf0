//! A few-row projection on the CPU that reads the stored (out, in) weight once, row
//! after row, as fast as memory delivers it: y[r, o] = x[r, ·] · w[o, ·].
//!
//! One token's forward reads every weight once and does two flops per weight read:
//! it is bound by memory bandwidth, and what matters is streaming the weights
//! without a detour. A general gemm reads the stored weight through a transposed
//! view or needs a transposed copy (`Proj`); here each output is a dot product of two
//! contiguous rows, the weight row is read from memory once for all the rows of x (it
//! stays in L1 for the next x row), and the output columns are split across the
//! cores. Each output is computed by the same code whatever the number of rows, so a
//! row's product does not depend on the rows sharing its forward.

use rayon::prelude::*;

/// Rows of x up to which [`project`] is used: past two rows a blocked gemm does as
/// well or better (`cargo bench --bench projection_layout` measures both).
pub const MAX_ROWS: usize = 2;

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
    assert!(x.len() >= rows * in_dim && w.len() >= out_dim * in_dim);
    // (out, rows): one output column's rows together, so a task owns a contiguous run.
    let mut yt = vec![0f32; out_dim * rows];
    let per_task = (TASK_WEIGHTS / in_dim.max(1)).max(1);
    let fill = |(t, chunk): (usize, &mut [f32])| {
        for (k, out) in chunk.chunks_mut(rows.max(1)).enumerate() {
            let o = t * per_task + k;
            let wrow = &w[o * in_dim..(o + 1) * in_dim];
            for (r, y) in out.iter_mut().enumerate() {
                *y = dot(&x[r * in_dim..(r + 1) * in_dim], wrow);
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
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_portable(a, b)
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

/// Four 8-lane accumulators (32 products a step: enough loads in flight to keep
/// memory busy), reduced in a fixed order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8k + 8 ≤ n, within both slices.
            let (va, vb) = unsafe {
                (
                    _mm256_loadu_ps(pa.add(i + 8 * k)),
                    _mm256_loadu_ps(pb.add(i + 8 * k)),
                )
            };
            *acc = _mm256_fmadd_ps(va, vb, *acc);
        }
        i += 32;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut lanes = [0f32; 8];
    // SAFETY: lanes holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
    let mut total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    while i < n {
        total = a[i].mul_add(b[i], total);
        i += 1;
    }
    total
}

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
