//! Writes a random checkpoint with the real NLD tensor names, config, tokenizer and
//! template, one tensor in memory at a time:
//!
//!   cargo run --release --example synthetic_checkpoint -- OUT_DIR [GEOMETRY] [DTYPE]
//!
//! GEOMETRY: toy, small-4m, bundled, real-vocab (131,072 tokens), nld-1b (~1.0B
//! parameters); DTYPE: f32, bf16 or f16. Used for the host-transfer and load-memory
//! measurements in docs/results.md.

use anyhow::{bail, Context, Result};
use candle_core::DType;
use specscope::model::synthetic::{self, Spec};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        bail!("usage: synthetic_checkpoint OUT_DIR [toy|small-4m|bundled|real-vocab|nld-1b] [f32|bf16|f16]");
    };
    let name = args.get(1).map_or("small-4m", String::as_str);
    let mut spec = Spec::named(name).with_context(|| format!("unknown geometry {name}"))?;
    if let Some(d) = args.get(2) {
        spec.dtype = match d.as_str() {
            "f32" => DType::F32,
            "bf16" => DType::BF16,
            "f16" => DType::F16,
            _ => bail!("unknown dtype {d} (f32, bf16 or f16)"),
        };
    }
    let params = synthetic::param_count(&spec);
    synthetic::write_checkpoint(std::path::Path::new(out), &spec)?;
    println!(
        "wrote {out}: {name}, {:.3}B parameters, {:?}",
        params as f64 / 1e9,
        spec.dtype
    );
    Ok(())
}
