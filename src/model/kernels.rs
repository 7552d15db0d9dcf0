//! Our own CUDA kernels (`kernels/*.cu`, compiled to PTX by `build.rs` under the `cuda`
//! feature) as candle custom ops. None of them has run on a GPU where it was written,
//! so each checks itself: the first time it would run on a device it is compared with
//! its tensor-op reference on a random batch, and a disagreement (or a failure to
//! load or launch) turns it off for the process with a notice; the reference runs
//! instead. `SPECSCOPE_KERNELS=off` turns them off from the start.

use std::sync::Mutex;

use anyhow::{bail, Result};
use candle_core::Tensor;

use crate::model::signals::{raw_floats, RawStats, TOP_K};

/// Floats per row of the fused signals kernel's output: k logits, k ids, m, S, T.
pub const SIGNALS_ROW: usize = raw_floats(TOP_K);

/// Where the fused signals kernel stands in this process.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelState {
    /// Not built in (no `cuda` feature), or no logits on a CUDA device yet.
    Unused,
    /// Turned off by `SPECSCOPE_KERNELS=off`.
    Off,
    /// Agreed with the tensor-op path on this device; in use.
    Passed,
    /// Failed to load, launch or agree (why); the tensor-op path runs instead.
    Failed(String),
}

static STATE: Mutex<KernelState> = Mutex::new(KernelState::Unused);

/// The fused signals kernel's state.
pub fn state() -> KernelState {
    STATE
        .lock()
        .map(|s| s.clone())
        .unwrap_or(KernelState::Unused)
}

/// One line for reports: which path computed the statistics on the device.
pub fn describe() -> String {
    match state() {
        KernelState::Unused if cfg!(feature = "cuda") => {
            "fused signals kernel: built, not run (no logits on a CUDA device)".into()
        }
        KernelState::Unused => "fused signals kernel: not built (no `cuda` feature)".into(),
        KernelState::Off => "fused signals kernel: off (SPECSCOPE_KERNELS=off)".into(),
        KernelState::Passed => "fused signals kernel: passed its self-check; in use".into(),
        KernelState::Failed(why) => {
            format!("fused signals kernel: failed its self-check ({why}); tensor ops used")
        }
    }
}

/// A notice worth printing at exit: the kernel was turned off by its self-check.
pub fn notice() -> Option<String> {
    matches!(state(), KernelState::Failed(_)).then(describe)
}

/// Reads the kernel's output (`SIGNALS_ROW` floats per row).
pub fn decode(out: &[f32]) -> Result<Vec<RawStats>> {
    if !out.len().is_multiple_of(SIGNALS_ROW) {
        bail!(
            "kernel output of {} floats is not rows of {SIGNALS_ROW}",
            out.len()
        );
    }
    out.chunks(SIGNALS_ROW)
        .map(|r| {
            let (vals, rest) = r.split_at(TOP_K);
            let (ids, mst) = rest.split_at(TOP_K);
            let top = vals
                .iter()
                .zip(ids)
                .filter(|(v, _)| v.is_finite())
                .map(|(&v, &id)| {
                    if !(id >= 0.0 && id < (1u32 << 24) as f32 && id.fract() == 0.0) {
                        bail!("kernel output holds an impossible token id {id}");
                    }
                    Ok((id as u32, v))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(RawStats {
                top,
                max: mst[0],
                sum: mst[1] as f64,
                tilt: mst[2] as f64,
            })
        })
        .collect()
}

/// Why `got` (the kernel) differs from `want` (the tensor-op reference), if it does:
/// the same top-k ids with the same logits (copied, so exact; compared in rank order
/// with ties ordered by id, which a parallel argmax need not keep), the same maximum,
/// and S and T within float summation error.
pub fn disagreement(got: &[RawStats], want: &[RawStats]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} rows against {}", got.len(), want.len()));
    }
    let ranked = |r: &RawStats| {
        let mut t = r.top.clone();
        t.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        t
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * b.abs().max(1.0);
    for (row, (g, w)) in got.iter().zip(want).enumerate() {
        if ranked(g) != ranked(w) {
            return Some(format!(
                "row {row}: top-k {:?} against {:?}",
                ranked(g),
                ranked(w)
            ));
        }
        if g.max != w.max || !close(g.sum, w.sum) || !close(g.tilt, w.tilt) {
            return Some(format!(
                "row {row}: (max, S, T) = ({}, {}, {}) against ({}, {}, {})",
                g.max, g.sum, g.tilt, w.max, w.sum, w.tilt
            ));
        }
    }
    None
}

/// The self-check's batch: `(rows, vocab, mask_id, logits)`. Normal logits at a
/// realistic scale over a vocabulary wider than one pass of the block's threads, with
/// the mask's column the largest in row 1 and a −∞ in row 2.
pub fn check_batch() -> (usize, usize, u32, Vec<f32>) {
    let (n, v, mask) = (6, 50_021, 4_099u32);
    let mut rng = crate::rng::Rng::new(17);
    let mut x: Vec<f32> = (0..n * v).map(|_| (rng.normal() * 4.0) as f32).collect();
    x[v + mask as usize] = 60.0;
    x[2 * v + 11] = f32::NEG_INFINITY;
    (n, v, mask, x)
}

/// The fused kernel's raw statistics for `logits` `(n, vocab)`, or `None` where it
/// does not run (not a CUDA tensor, not built, off, or failed its check).
pub fn fused_signals(logits: &Tensor, mask_id: u32) -> Result<Option<Vec<RawStats>>> {
    #[cfg(feature = "cuda")]
    if matches!(logits.device(), candle_core::Device::Cuda(_)) {
        return cuda::fused_checked(logits, mask_id);
    }
    let _ = (logits, mask_id);
    Ok(None)
}

#[cfg(feature = "cuda")]
mod cuda {
    use anyhow::Result;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{CpuStorage, CudaStorage, DType, Device, Layout, Shape, Tensor};

    use super::{check_batch, decode, disagreement, KernelState, SIGNALS_ROW, STATE};
    use crate::model::signals::{count_bytes, device_raw_uncounted, RawStats};

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/signals.ptx"));
    /// Threads per block: `THREADS` in kernels/signals.cu.
    const THREADS: u32 = 256;

    struct FusedSignals {
        mask_id: u32,
    }

    impl candle_core::CustomOp1 for FusedSignals {
        fn name(&self) -> &'static str {
            "specscope-signals"
        }

        fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
            candle_core::bail!("the fused signals kernel runs on CUDA devices only")
        }

        fn cuda_fwd(
            &self,
            storage: &CudaStorage,
            layout: &Layout,
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            let (o1, o2) = layout
                .contiguous_offsets()
                .ok_or_else(|| candle_core::Error::Msg("logits must be contiguous".into()))?;
            let (rows, vocab) = layout.shape().dims2()?;
            let dev = storage.device();
            let src = storage.as_cuda_slice::<f32>()?.slice(o1..o2);
            let func =
                dev.get_or_load_custom_func("specscope_signals_f32", "specscope_signals", PTX)?;
            // SAFETY: every element is written by the kernel (thread 0 of each row's block).
            let out = unsafe { dev.alloc::<f32>(rows * SIGNALS_ROW)? };
            let cfg = LaunchConfig {
                grid_dim: (rows as u32, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let (vocab, mask) = (vocab as u32, self.mask_id);
            let mut b = func.builder();
            b.arg(&src);
            b.arg(&out);
            b.arg(&vocab);
            b.arg(&mask);
            // SAFETY: the arguments match the kernel's signature; sizes checked above.
            unsafe { b.launch(cfg) }.w()?;
            Ok((
                CudaStorage::wrap_cuda_slice(out, dev.clone()),
                Shape::from((rows, SIGNALS_ROW)),
            ))
        }
    }

    fn run(logits: &Tensor, mask_id: u32) -> Result<Vec<RawStats>> {
        let x = logits.to_dtype(DType::F32)?.contiguous()?;
        let out = x.apply_op1_no_bwd(&FusedSignals { mask_id })?;
        decode(&out.flatten_all()?.to_vec1::<f32>()?)
    }

    fn self_check(dev: &Device) -> KernelState {
        if std::env::var("SPECSCOPE_KERNELS").is_ok_and(|v| v == "off") {
            return KernelState::Off;
        }
        let (n, v, mask, x) = check_batch();
        let got = Tensor::from_vec(x, (n, v), dev)
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok((run(&t, mask)?, device_raw_uncounted(&t, mask)?)));
        match got {
            Ok((got, want)) => match disagreement(&got, &want) {
                None => KernelState::Passed,
                Some(why) => KernelState::Failed(why),
            },
            Err(e) => KernelState::Failed(format!("{e:#}")),
        }
    }

    pub(super) fn fused_checked(logits: &Tensor, mask_id: u32) -> Result<Option<Vec<RawStats>>> {
        let (_, v) = logits.dims2()?;
        if v >= 1 << 24 {
            return Ok(None); // ids would not be exact in f32
        }
        let state = {
            let mut s = STATE
                .lock()
                .map_err(|_| anyhow::anyhow!("kernel state poisoned"))?;
            if *s == KernelState::Unused {
                *s = self_check(logits.device());
            }
            s.clone()
        };
        if state != KernelState::Passed {
            return Ok(None);
        }
        let raw = run(logits, mask_id)?;
        count_bytes(raw.len() * SIGNALS_ROW * 4);
        Ok(Some(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::signals::device_raw;
    use candle_core::Device;

    /// Encodes raw statistics as the kernel writes them.
    fn encode(raw: &[RawStats]) -> Vec<f32> {
        let mut out = Vec::new();
        for r in raw {
            let mut vals = vec![f32::NEG_INFINITY; TOP_K];
            let mut ids = vec![u32::MAX as f32; TOP_K];
            for (j, &(id, v)) in r.top.iter().enumerate() {
                vals[j] = v;
                ids[j] = id as f32;
            }
            out.extend(vals);
            out.extend(ids);
            out.extend([r.max, r.sum as f32, r.tilt as f32]);
        }
        out
    }

    /// The kernel's algorithm in Rust, step for step (256 strided threads, each with a
    /// running (m, S, T) rescaled when m grows and a sorted top-k; then a tree merge),
    /// so its arithmetic is tested here although the CUDA code can only run on a GPU.
    fn emulate(row: &[f32], mask: u32) -> RawStats {
        const THREADS: usize = 256;
        const FLOOR: f32 = -1e30;
        #[derive(Clone, Copy)]
        struct P {
            m: f32,
            s: f32,
            t: f32,
        }
        fn rebase(p: P, m2: f32) -> P {
            if p.s == 0.0 {
                return P {
                    m: m2,
                    s: 0.0,
                    t: 0.0,
                };
            }
            let d = p.m - m2;
            let f = d.exp();
            P {
                m: m2,
                s: p.s * f,
                t: (p.t + d * p.s) * f,
            }
        }
        let before = |a: (u32, f32), b: (u32, f32)| a.1 > b.1 || (a.1 == b.1 && a.0 < b.0);
        let insert = |top: &mut Vec<(u32, f32)>, c: (u32, f32)| {
            if before(c, top[TOP_K - 1]) {
                let at = top.iter().position(|&o| before(c, o)).unwrap_or(TOP_K);
                top.insert(at, c);
                top.truncate(TOP_K);
            }
        };
        let empty = (u32::MAX, f32::NEG_INFINITY);
        let mut parts: Vec<(P, Vec<(u32, f32)>)> = (0..THREADS)
            .map(|tid| {
                let mut p = P {
                    m: FLOOR,
                    s: 0.0,
                    t: 0.0,
                };
                let mut top = vec![empty; TOP_K];
                let mut any = false;
                for i in (tid..row.len()).step_by(THREADS) {
                    if i == mask as usize {
                        continue;
                    }
                    let v = row[i].max(FLOOR);
                    if !any {
                        p = P {
                            m: v,
                            s: 1.0,
                            t: 0.0,
                        };
                        any = true;
                    } else if v > p.m {
                        p = rebase(p, v);
                        p.s += 1.0;
                    } else {
                        let d = v - p.m;
                        let e = d.exp();
                        p.s += e;
                        p.t += e * d;
                    }
                    insert(&mut top, (i as u32, v));
                }
                (p, top)
            })
            .collect();
        let mut stride = THREADS / 2;
        while stride > 0 {
            for tid in 0..stride {
                let (a, b) = (parts[tid].clone(), parts[tid + stride].clone());
                let m = a.0.m.max(b.0.m);
                let (x, y) = (rebase(a.0, m), rebase(b.0, m));
                let mut merged = a.1.clone();
                for c in b.1 {
                    insert(&mut merged, c);
                }
                parts[tid] = (
                    P {
                        m,
                        s: x.s + y.s,
                        t: x.t + y.t,
                    },
                    merged,
                );
            }
            stride /= 2;
        }
        let (p, top) = parts.swap_remove(0);
        RawStats {
            top: top.into_iter().filter(|t| t.1.is_finite()).collect(),
            max: p.m,
            sum: p.s as f64,
            tilt: p.t as f64,
        }
    }

    #[test]
    fn the_kernels_algorithm_agrees_with_the_tensor_op_path() {
        let (n, v, mask, x) = check_batch();
        let t = Tensor::from_vec(x.clone(), (n, v), &Device::Cpu).unwrap();
        let want = device_raw(&t, mask).unwrap();
        let got: Vec<RawStats> = x.chunks(v).map(|r| emulate(r, mask)).collect();
        assert_eq!(disagreement(&got, &want), None);
        assert_ne!(got[1].top[0].0, mask, "the mask's column never wins");
        // And through the kernel's output format.
        assert_eq!(decode(&encode(&got)).unwrap(), got);
    }

    #[test]
    fn the_self_check_catches_a_wrong_kernel() {
        let (n, v, mask, x) = check_batch();
        let t = Tensor::from_vec(x, (n, v), &Device::Cpu).unwrap();
        let want = device_raw(&t, mask).unwrap();
        let mut swapped = want.clone();
        swapped[3].top.swap(0, 4);
        assert_eq!(disagreement(&swapped, &want), None, "rank order is rebuilt");
        let mut wrong_id = want.clone();
        wrong_id[2].top[1].0 += 1;
        assert!(disagreement(&wrong_id, &want).unwrap().contains("row 2"));
        let mut wrong_sum = want.clone();
        wrong_sum[4].sum *= 1.01;
        assert!(disagreement(&wrong_sum, &want).unwrap().contains("row 4"));
        let mut mask_kept = want.clone();
        mask_kept[1].top[0] = (mask, 60.0);
        assert!(disagreement(&mask_kept, &want).is_some());
        assert!(disagreement(&want[1..], &want).is_some());
    }

    #[test]
    fn impossible_kernel_output_is_an_error() {
        assert!(decode(&[0.0; SIGNALS_ROW + 1]).is_err());
        let mut row = vec![0f32; SIGNALS_ROW];
        row[TOP_K] = 2.5; // a fractional id
        assert!(decode(&row).unwrap_err().to_string().contains("token id"));
    }

    #[test]
    fn off_the_device_nothing_runs_and_the_state_says_so() {
        let t = Tensor::zeros((2, 5), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert_eq!(fused_signals(&t, 0).unwrap(), None);
        assert_eq!(state(), KernelState::Unused);
        assert!(describe().starts_with("fused signals kernel:"));
        assert_eq!(notice(), None);
    }
}
