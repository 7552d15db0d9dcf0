//! Why `Proj` keeps a transposed copy on the CPU: the same products through the stored
//! (out, in) weight and through the contiguous (in, out) copy, interleaved so the
//! machine's drift hits both alike, at the bundled model's projection shapes.
//!
//! `cargo bench --bench projection_layout`
#![allow(clippy::unwrap_used)] // a measuring tool run by hand: a panic is its error

use std::time::Instant;

use anyhow::Result;
use candle_core::{Device, Tensor};
use specscope::model::proj::Proj;

fn time_us(p: &Proj, x: &Tensor, reps: usize) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..reps {
        p.forward(x)?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / reps as f64)
}

fn main() -> Result<()> {
    specscope::settle_thread_count(); // as `specscope` does
    let dev = Device::Cpu;
    println!(
        "{:<22} {:>5} {:>14} {:>14} {:>8}",
        "weight (in → out)", "rows", "stored µs", "transposed µs", "ratio"
    );
    // q/o, gate/up, down, head of the bundled model (hidden 256, MLP 768, vocab 2048).
    for (name, k, n) in [
        ("q/o 256 → 256", 256, 256),
        ("gate/up 256 → 768", 256, 768),
        ("down 768 → 256", 768, 256),
        ("head 256 → 2048", 256, 2048),
    ] {
        let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
        let stored = Proj::from_weight(w.clone());
        let transposed = Proj::from_weight(w).for_inference()?;
        for m in [1usize, 8, 16, 32, 64] {
            let x = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
            let reps = 200;
            time_us(&stored, &x, 20)?;
            time_us(&transposed, &x, 20)?;
            let (mut a, mut b) = (0.0, 0.0);
            for _ in 0..5 {
                a += time_us(&stored, &x, reps)?;
                b += time_us(&transposed, &x, reps)?;
            }
            let (a, b) = (a / 5.0, b / 5.0);
            println!("{name:<22} {m:>5} {a:>14.1} {b:>14.1} {:>7.2}×", a / b);
        }
    }
    Ok(())
}
