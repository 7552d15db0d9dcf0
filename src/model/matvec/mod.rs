//! A few-row projection on the CPU that reads the stored (out, in) weight once, row
//! after row, as fast as memory delivers it: y[r, o] = x[r, ·] · w[o, ·].
//!
//! One token's forward reads every weight once and does two flops per weight read:
//! it is bound by memory bandwidth, and what matters is streaming the weights
//! without a detour. A general gemm reads the stored weight through a transposed
//! view or needs a transposed copy (`Proj`); here each output is a dot product of two
//! contiguous rows, each weight row comes from memory once (later rows of x find it
//! in cache), and the output columns are split across the cores. Each output is
//! summed in the same order whatever the number of rows (one weight row at a time with
//! AVX2, tiles of rows with AVX-512: the same lanes, the same bits), so a row's product
//! does not depend on the rows sharing its forward.
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

    /// The vector kernels this CPU has for these weights; asked once a projection, not
    /// once a product.
    fn vectorised(&self) -> Vector {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 =
                has!("avx2") && has!("fma") && (!matches!(self, Self::F16(_)) || has!("f16c"));
            if avx2 && has!("avx512f") && has!("avx512vl") {
                return Vector::Avx512;
            }
            if avx2 {
                return Vector::Avx2;
            }
        }
        Vector::None
    }

    /// Each x · row `o` for the C rows `os` (of width n), summed exactly as [`dot`]
    /// sums an f32 row of the same values (for f16, where the CPU has F16C): widening
    /// bf16/f16 is exact, and the order of the sums is the same for every R and C.
    /// Without a vector kernel `buf` holds a widened row.
    fn dot_tile<const R: usize, const C: usize>(
        &self,
        xs: [&[f32]; R],
        os: [usize; C],
        n: usize,
        vector: Vector,
        buf: &mut Vec<f32>,
    ) -> [[f32; C]; R] {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `vector` says the CPU has AVX2 and FMA (and F16C for f16), and
            // AVX-512F/VL for `Avx512`.
            macro_rules! call {
                ($kernel:ident, $w:expr) => {
                    return unsafe { $kernel(xs, os.map(|o| &$w[o * n..(o + 1) * n])) }
                };
            }
            match (vector, self) {
                (Vector::Avx512, Self::F32(w)) => call!(dot_avx512, w),
                (Vector::Avx512, Self::Bf16(w)) => call!(dot_bf16_avx512, w),
                (Vector::Avx512, Self::F16(w)) => call!(dot_f16_avx512, w),
                (Vector::Avx2, Self::F32(w)) => call!(dot_avx2, w),
                (Vector::Avx2, Self::Bf16(w)) => call!(dot_bf16_avx2, w),
                (Vector::Avx2, Self::F16(w)) => call!(dot_f16_avx2, w),
                (Vector::None, _) => {}
            }
        }
        let _ = vector; // no vector kernels here
        let mut out = [[0f32; C]; R];
        for (c, &o) in os.iter().enumerate() {
            let span = o * n..(o + 1) * n;
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
            for (x, out) in xs.iter().zip(out.iter_mut()) {
                out[c] = dot_portable(x, wide);
            }
        }
        out
    }

    /// [`Self::dot_tile`] of R rows of x, `x_row(r)` on, against the weight rows
    /// `first..first + count`, `TILE_WS` at a time with AVX-512; `put(k, j, y)` takes x
    /// row `r + j`'s product with weight row `first + k`.
    fn dot_run<'x, const R: usize>(
        &self,
        x_row: impl Fn(usize) -> &'x [f32],
        r: usize,
        (first, count): (usize, usize),
        vector: Vector,
        buf: &mut Vec<f32>,
        put: &mut impl FnMut(usize, usize, f32),
    ) {
        let xs: [&[f32]; R] = std::array::from_fn(|j| x_row(r + j));
        let n = xs[0].len();
        let mut k = 0;
        if vector == Vector::Avx512 {
            while k + TILE_WS <= count {
                let os = std::array::from_fn::<_, TILE_WS, _>(|c| first + k + c);
                for (j, ys) in self.dot_tile(xs, os, n, vector, buf).iter().enumerate() {
                    for (c, &y) in ys.iter().enumerate() {
                        put(k + c, j, y);
                    }
                }
                k += TILE_WS;
            }
        }
        for k in k..count {
            for (j, [y]) in self
                .dot_tile(xs, [first + k], n, vector, buf)
                .iter()
                .enumerate()
            {
                put(k, j, *y);
            }
        }
    }
}

/// Which vector kernels a CPU has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vector {
    None,
    Avx2,
    /// AVX-512F (with AVX2): 16 lanes and 32 registers, room for a tile of products.
    Avx512,
}

impl Vector {
    /// Rows of x a kernel call takes: with AVX2 two (each weight load serves both;
    /// four spill its 16 registers, slower at 32 tokens), with AVX-512 four, against
    /// `TILE_WS` weight rows (4 × 3 products of two accumulators each: 24 of the 32
    /// registers).
    fn xs(self) -> usize {
        match self {
            Vector::Avx512 => 4,
            _ => 2,
        }
    }
}

/// Weight rows an AVX-512 kernel call takes (`Vector::xs`).
const TILE_WS: usize = 3;

/// Rows of x up to which [`project`] is used for an f32 weight: with AVX2, NLD-1B's
/// weights stream faster than gemm up to 4 rows and about as fast at 8, slower at 16;
/// with AVX-512's tiles faster up to 32 rows and mixed at 64 (`cargo bench --bench
/// projection_layout`, docs/results.md).
pub fn max_rows() -> usize {
    match Weights::F32(&[]).vectorised() {
        Vector::Avx512 => 32,
        _ => 8,
    }
}

/// Weights from which [`project`] is used (4 MiB in f32, past the caches): a smaller
/// weight is read from cache, where the product's arithmetic, not memory, sets the
/// pace and gemm's kernels do better (the bundled model's projections).
pub const MIN_WEIGHTS: usize = 1 << 20;

/// Whether [`project`] is the faster way for `rows` rows of a weight of `weights`.
pub fn streams(rows: usize, weights: usize) -> bool {
    rows <= max_rows() && weights >= MIN_WEIGHTS
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
    let vector = match w.vectorised() {
        // A few rows are bound by memory: AVX2's kernel, one weight row at a time,
        // measured faster there than tiles of three (2 rows: NLD-1B bf16 52 against
        // 65 ms a forward; equal at 4; the same bits either way).
        Vector::Avx512 if rows < TILE_FROM => Vector::Avx2,
        v => v,
    };
    project_with(x, rows, w, (out_dim, in_dim), vector)
}

/// Rows from which AVX-512's tiles are used.
const TILE_FROM: usize = 4;

/// [`project_stored`] by the kernels `vector` names.
fn project_with(
    x: &[f32],
    rows: usize,
    w: Weights,
    (out_dim, in_dim): (usize, usize),
    vector: Vector,
) -> Vec<f32> {
    assert!(x.len() >= rows * in_dim && w.len() >= out_dim * in_dim);
    // (out, rows): one output column's rows together, so a task owns a contiguous run.
    let mut yt = vec![0f32; out_dim * rows];
    let per_task = (TASK_WEIGHTS / in_dim.max(1)).max(1);
    let x_row = |r: usize| &x[r * in_dim..(r + 1) * in_dim];
    let fill = |(t, chunk): (usize, &mut [f32])| {
        let mut buf = Vec::new();
        let outs = (t * per_task, chunk.len() / rows.max(1));
        // Rows of x a tile at a time against the task's weight rows: each weight load
        // serves them all, and later tiles find the task's weight rows in cache.
        let mut r = 0;
        while r < rows {
            let take = vector.xs().min(rows - r);
            let mut put = |k: usize, j: usize, y: f32| chunk[k * rows + r + j] = y;
            match take {
                1 => w.dot_run::<1>(x_row, r, outs, vector, &mut buf, &mut put),
                2 => w.dot_run::<2>(x_row, r, outs, vector, &mut buf, &mut put),
                3 => w.dot_run::<3>(x_row, r, outs, vector, &mut buf, &mut put),
                _ => w.dot_run::<4>(x_row, r, outs, vector, &mut buf, &mut put),
            }
            r += take;
        }
    };
    let chunk = per_task * rows.max(1);
    if out_dim * in_dim <= 4 * TASK_WEIGHTS {
        // A small weight: fewer cycles to read than to hand out to another core.
        yt.chunks_mut(chunk).enumerate().for_each(fill);
    } else {
        yt.par_chunks_mut(chunk).enumerate().for_each(fill);
    }
    if rows <= 1 {
        return yt;
    }
    // (out, rows) → (rows, out) a block of outputs at a time, so the block's reads
    // stay in cache and the writes run along rows (column by column, each write
    // touched another page: 6% of a 32-token NLD-1B forward).
    let mut y = vec![0f32; rows * out_dim];
    for (b, block) in yt.chunks(TRANSPOSE_OUTS * rows).enumerate() {
        for r in 0..rows {
            let to = &mut y[r * out_dim + b * TRANSPOSE_OUTS..];
            for (k, ys) in block.chunks_exact(rows).enumerate() {
                to[k] = ys[r];
            }
        }
    }
    y
}

/// Outputs a block of the transposition takes.
const TRANSPOSE_OUTS: usize = 256;

/// a · b, in one fixed order for a given length on a given machine.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let w = Weights::F32(b);
    w.dot_tile([a], [0], b.len(), w.vectorised(), &mut Vec::new())[0][0]
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

/// The end of a product: the eight lanes of its vector sum added in a fixed order, then
/// the products past the last 32-wide step, `x[j] · w[j]` for j in `from..n`.
fn finish<T: Copy>(lanes: [f32; 8], x: &[f32], w: &[T], from: usize, n: usize) -> f32
where
    f32: From<T>,
{
    let mut total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for j in from..n {
        total = x[j].mul_add(f32::from(w[j]), total);
    }
    total
}

/// `$name(xs, ws)` with AVX2: each x · w for f32 x and w stored as `$t`, each 8 of a w
/// widened to f32 by `$load` once for all the xs. Each product sums in four 8-lane
/// accumulators (32 products a step: enough loads in flight to keep memory busy),
/// reduced in a fixed order: one order for every `$t` and every number of xs.
macro_rules! dot_kernel {
    ($name:ident, $t:ty, $features:literal, $load:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize, const C: usize>(
            xs: [&[f32]; R],
            ws: [&[$t]; C],
        ) -> [[f32; C]; R] {
            use std::arch::x86_64::{
                _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
                _mm256_storeu_ps, _mm_prefetch, _MM_HINT_T0,
            };
            const AHEAD: usize = PREFETCH_BYTES / std::mem::size_of::<$t>();
            let n = width(&xs, &ws);
            let pw = ws.map(|w| w.as_ptr());
            let mut acc = [[[_mm256_setzero_ps(); 4]; C]; R];
            let mut i = 0;
            while i + 32 <= n {
                // The weight is read once, from memory, and the hardware's prefetch
                // alone falls behind (bf16 one-token NLD-1B forwards at 0.6 of the
                // bandwidth without this).
                for p in pw {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(i + AHEAD).cast::<i8>());
                }
                for k in 0..4 {
                    // SAFETY: i + 8k + 8 ≤ n, within every w and x; `$load` reads 8.
                    let vw = pw.map(|p| unsafe { $load(p.add(i + 8 * k)) });
                    for (x, acc) in xs.iter().zip(acc.iter_mut()) {
                        // SAFETY: as above.
                        let vx = unsafe { _mm256_loadu_ps(x.as_ptr().add(i + 8 * k)) };
                        for (vw, acc) in vw.iter().zip(acc.iter_mut()) {
                            acc[k] = _mm256_fmadd_ps(vx, *vw, acc[k]);
                        }
                    }
                }
                i += 32;
            }
            let mut out = [[0f32; C]; R];
            for ((x, acc), out) in xs.iter().zip(&acc).zip(out.iter_mut()) {
                for ((w, acc), out) in ws.iter().zip(acc).zip(out.iter_mut()) {
                    let s =
                        _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                    let mut lanes = [0f32; 8];
                    // SAFETY: lanes holds 8 floats.
                    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
                    *out = finish(lanes, x, w, i, n);
                }
            }
            out
        }
    };
}

/// `$name(xs, ws)` with AVX-512: the same sums as [`dot_kernel`]'s, bit for bit, 16
/// lanes at a time. Its four 8-lane accumulators are two 16-lane ones (lanes 0–7 of the
/// first are AVX2's first accumulator, 8–15 its second, …), and an FMA acts on each
/// lane alone, so every lane sums what AVX2's does in the same order; the reduction
/// adds the halves as AVX2 adds its accumulators. Twice the lanes an instruction and
/// 32 registers: a tile of R x-rows × C weight rows keeps 2RC accumulators in them,
/// each weight load serving R products and each x load C.
macro_rules! dot_kernel_512 {
    ($name:ident, $t:ty, $features:literal, $load:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize, const C: usize>(
            xs: [&[f32]; R],
            ws: [&[$t]; C],
        ) -> [[f32; C]; R] {
            use std::arch::x86_64::{
                __m512, _mm256_add_ps, _mm256_castpd_ps, _mm256_storeu_ps, _mm512_castps512_ps256,
                _mm512_castps_pd, _mm512_extractf64x4_pd, _mm512_fmadd_ps, _mm512_loadu_ps,
                _mm512_setzero_ps, _mm_prefetch, _MM_HINT_T0,
            };
            const AHEAD: usize = PREFETCH_BYTES / std::mem::size_of::<$t>();
            let n = width(&xs, &ws);
            let pw = ws.map(|w| w.as_ptr());
            // One flat array indexed by constants once the loops unroll: LLVM keeps it
            // in registers (a nested array walked by iterators went through the stack).
            const { assert!(R * C <= 12) };
            let mut acc = [[_mm512_setzero_ps(); 2]; 12];
            let mut i = 0;
            while i + 32 <= n {
                for p in pw {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(i + AHEAD).cast::<i8>());
                }
                for h in 0..2 {
                    let mut vw = [_mm512_setzero_ps(); C];
                    for c in 0..C {
                        // SAFETY: i + 16h + 16 ≤ n, within every w and x; `$load` reads 16.
                        vw[c] = unsafe { $load(pw[c].add(i + 16 * h)) };
                    }
                    for r in 0..R {
                        // SAFETY: as above.
                        let vx = unsafe { _mm512_loadu_ps(xs[r].as_ptr().add(i + 16 * h)) };
                        for c in 0..C {
                            acc[r * C + c][h] = _mm512_fmadd_ps(vx, vw[c], acc[r * C + c][h]);
                        }
                    }
                }
                i += 32;
            }
            let halves = |v: __m512| {
                let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v));
                _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(high))
            };
            let mut out = [[0f32; C]; R];
            for (r, (x, out)) in xs.iter().zip(out.iter_mut()).enumerate() {
                for (c, (w, out)) in ws.iter().zip(out.iter_mut()).enumerate() {
                    let acc = acc[r * C + c];
                    // (acc0 + acc1) + (acc2 + acc3), as AVX2 adds them.
                    let s = _mm256_add_ps(halves(acc[0]), halves(acc[1]));
                    let mut lanes = [0f32; 8];
                    // SAFETY: lanes holds 8 floats.
                    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
                    *out = finish(lanes, x, w, i, n);
                }
            }
            out
        }
    };
}

/// The shortest of the xs and ws: the products' width.
fn width<T>(xs: &[&[f32]], ws: &[&[T]]) -> usize {
    let xs = xs.iter().map(|x| x.len());
    xs.chain(ws.iter().map(|w| w.len())).min().unwrap_or(0)
}

// Each load is expanded inside the kernel's unsafe block, on 8 (16) readable values.
dot_kernel!(dot_avx2, f32, "avx2,fma", |p: *const f32| {
    std::arch::x86_64::_mm256_loadu_ps(p)
});
dot_kernel_512!(
    dot_avx512,
    f32,
    "avx2,fma,avx512f,avx512vl",
    |p: *const f32| { std::arch::x86_64::_mm512_loadu_ps(p) }
);

// bf16 is the top half of an f32: widening is a shift.
dot_kernel!(dot_bf16_avx2, bf16, "avx2,fma", |p: *const bf16| {
    use std::arch::x86_64::{
        __m128i, _mm256_castsi256_ps, _mm256_cvtepu16_epi32, _mm256_slli_epi32, _mm_loadu_si128,
    };
    let h = _mm_loadu_si128(p.cast::<__m128i>());
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
});
dot_kernel_512!(
    dot_bf16_avx512,
    bf16,
    "avx2,fma,avx512f,avx512vl",
    |p: *const bf16| {
        use std::arch::x86_64::{
            __m256i, _mm256_loadu_si256, _mm512_castsi512_ps, _mm512_cvtepu16_epi32,
            _mm512_slli_epi32,
        };
        let h = _mm256_loadu_si256(p.cast::<__m256i>());
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
    }
);

dot_kernel!(dot_f16_avx2, f16, "avx2,fma,f16c", |p: *const f16| {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm_loadu_si128};
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<__m128i>()))
});
dot_kernel_512!(
    dot_f16_avx512,
    f16,
    "avx2,fma,f16c,avx512f,avx512vl",
    |p: *const f16| {
        use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm512_cvtph_ps};
        _mm512_cvtph_ps(_mm256_loadu_si256(p.cast::<__m256i>()))
    }
);

#[cfg(test)]
mod tests;
