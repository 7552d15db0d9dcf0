//! A fused, differentiable masked softmax for training attention. candle's fused
//! `softmax_last_dim` has no gradient and the composed softmax makes many single-threaded
//! passes over the (B, heads, T, T) scores; this op makes one parallel pass each way.

use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor, D};
use rayon::prelude::*;

/// softmax(scores + mask) over the last dim; mask (T, T) broadcasts over (B, heads).
struct MaskedSoftmax;

/// d scores = y · (dy − Σ dy · y), per row.
struct SoftmaxBackward;

fn contiguous<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [f32]> {
    let data = s.as_slice::<f32>()?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => candle_core::bail!("{what} must be contiguous"),
    }
}

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = contiguous(s1, l1, "scores")?;
        let m = contiguous(s2, l2, "mask")?;
        let t = l1.dims()[l1.dims().len() - 1];
        let mask_rows = m.len() / t;
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(t)
            .zip(x.par_chunks(t))
            .enumerate()
            .for_each(|(r, (o, row))| {
                let mrow = &m[(r % mask_rows) * t..(r % mask_rows + 1) * t];
                let mut max = f32::NEG_INFINITY;
                for (i, &v) in row.iter().enumerate() {
                    max = max.max(v + mrow[i]);
                }
                let mut sum = 0f32;
                for (i, &v) in row.iter().enumerate() {
                    let e = (v + mrow[i] - max).exp();
                    o[i] = e;
                    sum += e;
                }
                let inv = 1.0 / sum;
                o.iter_mut().for_each(|v| *v *= inv);
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    fn bwd(
        &self,
        _scores: &Tensor,
        _mask: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let d = res.apply_op2_no_bwd(&grad.contiguous()?, &SoftmaxBackward)?;
        Ok((Some(d), None))
    }
}

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "softmax-backward"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let y = contiguous(s1, l1, "softmax output")?;
        let dy = contiguous(s2, l2, "gradient")?;
        let t = l1.dims()[l1.dims().len() - 1];
        let mut out = vec![0f32; y.len()];
        out.par_chunks_mut(t)
            .zip(y.par_chunks(t).zip(dy.par_chunks(t)))
            .for_each(|(o, (y, dy))| {
                let dot: f32 = y.iter().zip(dy).map(|(a, b)| a * b).sum();
                for i in 0..t {
                    o[i] = y[i] * (dy[i] - dot);
                }
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// softmax(scores + mask) over the last dim, differentiable in `scores`. scores:
/// (…, T, K) f32; mask: (T, K) additive. Off the CPU it falls back to composed ops.
pub fn masked_softmax(scores: &Tensor, mask: &Tensor) -> Result<Tensor> {
    if scores.device().is_cpu() && scores.dtype() == candle_core::DType::F32 {
        scores
            .contiguous()?
            .apply_op2(&mask.contiguous()?, MaskedSoftmax)
    } else {
        candle_nn::ops::softmax(&scores.broadcast_add(mask)?, D::Minus1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// The fused op and the composed softmax agree in value and gradient.
    #[test]
    fn fused_matches_composed() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::randn(0f32, 2.0, (2, 3, 5, 5), &dev).unwrap()).unwrap();
        let mut m = vec![0f32; 25];
        for q in 0..5 {
            for k in (q + 1)..5 {
                m[q * 5 + k] = f32::NEG_INFINITY;
            }
        }
        let mask = Tensor::from_vec(m, (5, 5), &dev).unwrap();
        let w = Tensor::randn(0f32, 1.0, (2, 3, 5, 5), &dev).unwrap();
        let fused = masked_softmax(x.as_tensor(), &mask).unwrap();
        let composed =
            candle_nn::ops::softmax(&x.as_tensor().broadcast_add(&mask).unwrap(), D::Minus1)
                .unwrap();
        let diff = (&fused - &composed)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-6, "{diff}");
        let g1 = (&fused * &w)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g2 = (&composed * &w)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let (a, b) = (
            g1.get(x.as_tensor()).unwrap(),
            g2.get(x.as_tensor()).unwrap(),
        );
        let diff = (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-5, "{diff}");
    }
}
