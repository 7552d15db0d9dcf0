//! Peak memory and time of loading a checkpoint, in a fresh process:
//!
//!   cargo run --release --example load_memory -- MODEL_DIR [DTYPE]
//!
//! Loads MODEL_DIR (e.g. one written by `specscope synthetic DIR --geometry nld-1b`) in a
//! child process on the CPU with `--dtype` DTYPE (default bf16) and prints the
//! weights' bytes in memory, the process's resident memory before loading, its peak
//! during loading (VmHWM) and the peak's growth over the weights. Linux only (reads
//! /proc/self/status).
#![allow(clippy::unwrap_used)] // a measuring tool run by hand: a panic is its error

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use specscope::model::load::{load, LoadOptions};
use specscope::model::source::ModelSource;

/// A `Vm...:` line of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("malformed status line")?
        .parse()?;
    Ok(kb * 1024)
}

fn child(dir: &str, dtype: &str) -> Result<()> {
    let dtype = match dtype {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        d => bail!("unknown dtype {d}"),
    };
    let files = ModelSource::parse(Some(dir), None)?.resolve()?;
    let before = status_bytes("VmRSS:")?;
    let start = Instant::now();
    let opts = LoadOptions {
        dtype,
        ..LoadOptions::default()
    };
    let (model, report) = load(&files, &Device::Cpu, opts)?;
    let secs = start.elapsed().as_secs_f64();
    let peak = status_bytes("VmHWM:")?;
    let after = status_bytes("VmRSS:")?;
    println!(
        "{}",
        serde_json::json!({
            "weights_bytes": report.weight_bytes, "rss_before": before, "peak": peak,
            "rss_after": after, "load_secs": secs, "dtype": report.dtype,
            "file_dtypes": report.file_dtypes,
        })
    );
    drop(model);
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1], &args[2]);
    }
    let Some(dir) = args.first() else {
        bail!("usage: load_memory MODEL_DIR [f32|bf16|f16]");
    };
    let dtype = args.get(1).map_or("bf16", String::as_str);
    let out = Command::new(std::env::current_exe()?)
        .args(["--child", dir, dtype])
        .output()
        .context("running the loading child")?;
    if !out.status.success() {
        bail!("loading failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let get = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let (w, before, peak) = (get("weights_bytes"), get("rss_before"), get("peak"));
    let gib = |b: f64| b / (1u64 << 30) as f64;
    println!(
        "{dir} as {}: weights {:.3} GiB; resident before loading {:.3} GiB, peak {:.3} GiB, after {:.3} GiB; load {:.1} s",
        v["dtype"].as_str().unwrap_or("?"),
        gib(w),
        gib(before),
        gib(peak),
        gib(get("rss_after")),
        get("load_secs")
    );
    println!(
        "peak growth over the weights: {:.3}x (peak − resident before) / weights",
        (peak - before) / w
    );
    Ok(())
}
