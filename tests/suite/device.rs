//! What only a GPU can check: the fused signals kernel on a CUDA device, and what the
//! statistics move to the host there. On the CPU (the default) these tests say they
//! were skipped; `scripts/gpu-check.sh` runs them with `SPECSCOPE_TEST_DEVICE=cuda`.
//! The host-transfer test also runs on the CPU through the tensor-op path, which is
//! what a GPU falls back to.

use crate::common;

use candle_core::{Device, Tensor};
use specscope::engine::signals::{self, device_signals, signals_of, HostReads};
use specscope::model::kernels::{self, KernelState};

fn skipped(what: &str) -> bool {
    let dev = common::device();
    if dev.is_cpu() {
        eprintln!(
            "skipped: {what} needs a GPU (SPECSCOPE_TEST_DEVICE=cuda, --features cuda; scripts/gpu-check.sh)"
        );
        return true;
    }
    false
}

fn logits(dev: &Device, n: usize, v: usize, seed: u64) -> (Vec<f32>, Tensor) {
    let mut rng = specscope::rng::Rng::new(seed);
    let x: Vec<f32> = (0..n * v).map(|_| (rng.normal() * 3.0) as f32).collect();
    let t = Tensor::from_vec(x.clone(), (n, v), dev).unwrap();
    (x, t)
}

/// The kernel passes its self-check on the device, and its statistics equal the host
/// path's on a real-vocabulary batch.
#[test]
fn fused_kernel_on_the_device() {
    if skipped("the fused signals kernel") {
        return;
    }
    let dev = common::device();
    let (v, mask) = (131_072, 100);
    let (x, t) = logits(&dev, 33, v, 5);
    let got = signals::signals(&t, mask).unwrap();
    assert_eq!(
        kernels::state(),
        KernelState::Passed,
        "{}",
        kernels::describe()
    );
    for (row, g) in x.chunks(v).zip(&got) {
        let h = signals_of(row, mask);
        assert_eq!(h.argmax, g.argmax);
        assert_eq!(
            h.top.iter().map(|t| t.0).collect::<Vec<_>>(),
            g.top.iter().map(|t| t.0).collect::<Vec<_>>()
        );
        assert!(
            (h.entropy - g.entropy).abs() < 1e-3,
            "{} {}",
            h.entropy,
            g.entropy
        );
        assert!((h.margin - g.margin).abs() < 1e-4);
    }
    // And the tensor-op path agrees on the device too.
    let ops = device_signals(&t, mask).unwrap();
    assert_eq!(
        ops.iter().map(|s| s.argmax).collect::<Vec<_>>(),
        got.iter().map(|s| s.argmax).collect::<Vec<_>>()
    );
}

/// Off the CPU's host path only O(k) numbers per position cross to the host: at most
/// 1 KB per position at the real vocabulary (a whole row would be 512 KB).
#[test]
fn bytes_to_host_per_position_on_the_device_paths() {
    let dev = common::device();
    let (v, n) = (131_072, 8);
    let (_, t) = logits(&dev, n, v, 9);
    let before = HostReads::now();
    if dev.is_cpu() {
        device_signals(&t, 3).unwrap(); // what a GPU falls back to
    } else {
        signals::signals(&t, 3).unwrap();
    }
    let read = HostReads::since(before);
    let per_position = read.bytes as f64 / n as f64;
    assert!(per_position <= 1024.0, "{per_position} bytes per position");
    assert!(per_position > 0.0);
}
