//! When bf16 pays on the CPU: the same model loaded in f32 and in bf16, forwards of the
//! shapes decoding runs (an AR step, a draft or verify block, four rows of blocks),
//! interleaved so the machine's drift hits both alike; prints ms and the ratio.
//!
//! `cargo bench --bench dtype_speed [-- MODEL_DIR]` (default: the bundled model)
#![allow(clippy::unwrap_used)] // a measuring tool run by hand: a panic is its error

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device};
use specscope::model::load::{load, LoadOptions};
use specscope::model::source::ModelSource;
use specscope::model::{AttnRule, KvCache, LogitSel, Model, Row, RowBatch};

fn prefill(model: &Model, len: usize) -> Result<KvCache> {
    let mut cache = model.new_cache();
    let ids: Vec<u32> = (0..len as u32).map(|i| 300 + i % 500).collect();
    let row = Row::new(0, ids, AttnRule::Causal).commit();
    model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    Ok(cache)
}

fn time_ms(model: &Model, caches: &mut [KvCache], rows: usize, tokens: usize) -> Result<f64> {
    let batch = RowBatch::new(
        (0..rows)
            .map(|r| Row::new(r, vec![300; tokens], AttnRule::Causal).logits(LogitSel::All))
            .collect(),
    );
    let mut refs: Vec<&mut KvCache> = caches.iter_mut().take(rows).collect();
    model.forward(&batch, &mut refs)?; // untimed: the change of shape
    let reps = 3;
    let t = Instant::now();
    for _ in 0..reps {
        model.forward(&batch, &mut refs)?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
}

fn main() -> Result<()> {
    specscope::settle_thread_count(); // as `specscope` does
    let dir = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let files = ModelSource::parse(dir.as_deref(), None)?.resolve()?;
    let models = [DType::F32, DType::BF16].map(|dtype| {
        let opts = LoadOptions {
            dtype,
            ..LoadOptions::default()
        };
        load(&files, &Device::Cpu, opts).map(|(m, _)| m)
    });
    let [f32m, bf16m] = models;
    let (f32m, bf16m) = (f32m?, bf16m?);
    println!("model: {}; cache 256 tokens per row", files.label);
    println!(
        "{:<20} {:>10} {:>10} {:>10}",
        "forward", "f32 ms", "bf16 ms", "bf16/f32"
    );
    let mut caches = [
        (0..4)
            .map(|_| prefill(&f32m, 256))
            .collect::<Result<Vec<_>>>()?,
        (0..4)
            .map(|_| prefill(&bf16m, 256))
            .collect::<Result<Vec<_>>>()?,
    ];
    for (name, rows, tokens) in [
        ("AR step 1×1", 1, 1),
        ("block 1×8", 1, 8),
        ("block 1×32", 1, 32),
        ("blocks 4×32", 4, 32),
    ] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for pass in 0..5 {
            if pass % 2 == 0 {
                a.push(time_ms(&f32m, &mut caches[0], rows, tokens)?);
                b.push(time_ms(&bf16m, &mut caches[1], rows, tokens)?);
            } else {
                b.push(time_ms(&bf16m, &mut caches[1], rows, tokens)?);
                a.push(time_ms(&f32m, &mut caches[0], rows, tokens)?);
            }
        }
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        let (a, b) = (a[2], b[2]);
        println!("{name:<20} {a:>10.2} {b:>10.2} {:>9.2}×", b / a);
    }
    Ok(())
}
