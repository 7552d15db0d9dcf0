//! A bias-free projection y = x·Wᵀ that, for inference on the CPU, also keeps Wᵀ
//! contiguous. The CPU gemm reads the stored (out, in) weight through a transposed
//! view, which is slow with several query tokens, and block forwards are made of
//! exactly such matmuls (`cargo bench --bench projection_layout` measures both). In
//! f32 one token at a time still goes through the stored weight (see `forward`).

use anyhow::Result;
use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;

#[derive(Debug, Clone)]
pub struct Proj {
    /// (out, in), as stored; trained in place.
    weight: Tensor,
    /// (in, out) contiguous, once `for_inference` made it.
    weight_t: Option<Tensor>,
}

impl Proj {
    pub fn new(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self::from_weight(vb.get((out_dim, in_dim), "weight")?))
    }

    /// Wraps an (out, in) weight, e.g. the embedding matrix of a tied head.
    pub fn from_weight(weight: Tensor) -> Self {
        Self {
            weight,
            weight_t: None,
        }
    }

    /// Adds the contiguous transposed copy on the CPU (other devices' matmuls take
    /// transposed operands as they are). The copy is not updated by training.
    pub fn for_inference(mut self) -> Result<Self> {
        if matches!(self.weight.device(), Device::Cpu) {
            self.weight_t = Some(self.weight.t()?.contiguous()?);
        }
        Ok(self)
    }

    /// (..., in) → (..., out).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let in_dim = dims[dims.len() - 1];
        let rows = x.elem_count() / in_dim.max(1);
        let x2 = x.reshape((rows, in_dim))?;
        // In f32 one token goes through the stored weight (about 15% faster at one row)
        // and rounding never told the two apart in the lossless tests. In bf16/f16 a
        // one-ulp difference in a product is rounded into the output and can flip an
        // argmax: there every row count takes the same layout, so a token's product does
        // not depend on how many rows share the forward.
        let same_layout = self.weight.dtype() != candle_core::DType::F32;
        let y = match &self.weight_t {
            Some(wt) if rows > 1 || same_layout => x2.matmul(wt)?,
            _ => x2.matmul(&self.weight.t()?)?,
        };
        let mut out = dims.to_vec();
        let last = out.len() - 1;
        out[last] = y.dim(1)?;
        Ok(y.reshape(out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_give_the_same_product() -> Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (24, 16), &dev)?;
        let plain = Proj::from_weight(w.clone());
        let fast = Proj::from_weight(w.clone()).for_inference()?;
        assert!(fast.weight_t.is_some());
        for shape in [vec![1, 16], vec![5, 16], vec![2, 3, 16]] {
            let x = Tensor::randn(0f32, 1.0, shape.as_slice(), &dev)?;
            let want = x.broadcast_matmul(&w.t()?)?;
            for p in [&plain, &fast] {
                let got = p.forward(&x)?;
                assert_eq!(got.dims(), want.dims());
                let diff = (got - &want)?
                    .abs()?
                    .flatten_all()?
                    .max(0)?
                    .to_scalar::<f32>()?;
                assert!(diff < 1e-4, "{shape:?}: {diff}");
            }
        }
        Ok(())
    }
}
