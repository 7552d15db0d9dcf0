//! Which layout a projection reads its weight in, on the CPU: the same products
//! through the stored (out, in) weight by candle's gemm, through the contiguous
//! (in, out) copy `Proj` keeps, and through `matvec::project`, which streams the
//! stored weight (what `Proj` uses up to `matvec::max_rows()` rows), interleaved so the
//! machine's drift hits them alike, at the bundled model's shapes and NLD-1B's. The
//! streamed column's GB/s is the weight's bytes over its time.
//!
//! `cargo bench --bench projection_layout`
#![allow(clippy::unwrap_used)] // a measuring tool run by hand: a panic is its error

use std::time::Instant;

use anyhow::Result;
use candle_core::{Device, Tensor};
use specscope::model::matvec;

fn time_us(f: &mut dyn FnMut() -> Result<()>, reps: usize) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / reps as f64)
}

fn main() -> Result<()> {
    specscope::settle_thread_count(); // as `specscope` does
    let dev = Device::Cpu;
    println!(
        "{:<24} {:>4} {:>11} {:>14} {:>11} {:>8} {:>9}",
        "weight (in → out)", "rows", "stored µs", "transposed µs", "streamed µs", "GB/s", "best"
    );
    for (name, k, n) in [
        ("bundled q/o 256 → 256", 256, 256),
        ("bundled up 256 → 768", 256, 768),
        ("bundled head 256 → 2048", 256, 2048),
        ("nld-1b q 2048 → 2048", 2048, 2048),
        ("nld-1b up 2048 → 6144", 2048, 6144),
        ("nld-1b down 6144 → 2048", 6144, 2048),
        ("nld-1b head 2048 → 32768", 2048, 32768),
    ] {
        let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
        let wt = w.t()?.contiguous()?;
        let wv = w.flatten_all()?.to_vec1::<f32>()?;
        // About 0.2 s of streaming per measurement whatever the size.
        let reps = (50_000_000 / (n * k)).clamp(3, 2000);
        for m in [1usize, 2, 4, 8, 16, 32, 64] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
            let xv = x.flatten_all()?.to_vec1::<f32>()?;
            let mut stored = || -> Result<()> {
                x.matmul(&w.t()?).map(|_| ())?;
                Ok(())
            };
            let mut transposed = || -> Result<()> {
                x.matmul(&wt).map(|_| ())?;
                Ok(())
            };
            let mut streamed = || -> Result<()> {
                std::hint::black_box(matvec::project(&xv, m, &wv, n, k));
                Ok(())
            };
            let (mut a, mut b, mut c) = (f64::MAX, f64::MAX, f64::MAX);
            for _ in 0..5 {
                a = a.min(time_us(&mut stored, reps)?);
                b = b.min(time_us(&mut transposed, reps)?);
                c = c.min(time_us(&mut streamed, reps)?);
            }
            let gbs = (n * k * 4) as f64 / (c * 1e-6) / 1e9;
            let best = if c <= a.min(b) {
                "streamed"
            } else if b <= a {
                "transposed"
            } else {
                "stored"
            };
            println!("{name:<24} {m:>4} {a:>11.1} {b:>14.1} {c:>11.1} {gbs:>8.1} {best:>9}");
        }
    }
    Ok(())
}
