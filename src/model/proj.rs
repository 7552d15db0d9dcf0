//! A bias-free projection y = x·Wᵀ that, for inference on the CPU, also keeps Wᵀ
//! contiguous. The CPU gemm reads the stored (out, in) weight through a transposed
//! view, which is slow with several query tokens, and block forwards are made of
//! exactly such matmuls (`cargo bench --bench projection_layout` measures them). In
//! f32 a few rows still read the stored weight: streamed by `matvec` where it is
//! larger than the caches, through gemm's transposed view at one row otherwise. bf16
//! and f16 weights go through `matvec` at every row count when decoding on the CPU
//! (see `forward`).

use anyhow::Result;
use candle_core::{DType, Device, Storage, Tensor};

use super::matvec;
use candle_nn::VarBuilder;

#[derive(Debug, Clone)]
pub struct Proj {
    /// (out, in), as stored; trained in place.
    weight: Tensor,
    /// (in, out) contiguous, once `for_inference` made it.
    weight_t: Option<Tensor>,
    /// Used for decoding only (`for_inference` or `streaming`): a few rows may go
    /// through `matvec`, outside candle's graph (training needs the graph).
    inference: bool,
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
            inference: false,
        }
    }

    /// For decoding without the transposed copy (a model too large to keep two): a
    /// few rows still stream the stored weight.
    pub fn streaming(mut self) -> Self {
        self.inference = true;
        self
    }

    /// Adds the contiguous transposed copy on the CPU (other devices' matmuls take
    /// transposed operands as they are). The copy is not updated by training.
    pub fn for_inference(mut self) -> Result<Self> {
        self.inference = true;
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
        // In f32 up to `matvec::max_rows()` rows of a large weight stream the stored
        // weight at memory speed (`matvec`); one row of a small weight reads it through
        // gemm's transposed view (about 15% faster at the bundled model's shapes), more
        // rows the contiguous transposed copy, where a blocked gemm wins. A token's
        // logits thus depend on how many rows its forward has; rounding never told the
        // layouts apart in the lossless tests. In bf16/f16 a one-ulp difference in a
        // product is rounded into the output and can flip an argmax: there every row
        // count takes one code, `matvec` when decoding on the CPU (the weight read as
        // stored, summed in f32: one order per output) and candle's matmul otherwise,
        // so a token's product does not depend on how many rows share the forward.
        let half = self.weight.dtype() != DType::F32;
        let streamed = if half || matvec::streams(rows, self.weight.elem_count()) {
            self.streamed(&x2, rows, in_dim)?
        } else {
            None
        };
        let y = match (streamed, &self.weight_t) {
            (Some(y), _) => y,
            (None, Some(wt)) if rows > 1 || half => x2.matmul(wt)?,
            (None, _) => x2.matmul(&self.weight.t()?)?,
        };
        let mut out = dims.to_vec();
        let last = out.len() - 1;
        out[last] = y.dim(1)?;
        Ok(y.reshape(out)?)
    }
}

impl Proj {
    /// x · Wᵀ by [`matvec::project_stored`] over the stored weight, where that applies:
    /// on the CPU, for decoding (training keeps candle's ops, which it
    /// differentiates), with x in the weight's dtype. None elsewhere. The result is
    /// in x's dtype, summed in f32.
    fn streamed(&self, x: &Tensor, rows: usize, in_dim: usize) -> Result<Option<Tensor>> {
        let w = &self.weight;
        if !self.inference || x.dtype() != w.dtype() || !w.is_contiguous() {
            return Ok(None);
        }
        let (out_dim, w_in) = w.dims2()?;
        anyhow::ensure!(
            w_in == in_dim,
            "projection of width {w_in} given rows of width {in_dim}"
        );
        let (storage, layout) = w.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            return Ok(None);
        };
        let span = layout.start_offset()..layout.start_offset() + out_dim * in_dim;
        let wv = match w.dtype() {
            DType::F32 => matvec::Weights::F32(&cpu.as_slice::<f32>()?[span]),
            DType::BF16 => matvec::Weights::Bf16(&cpu.as_slice::<half::bf16>()?[span]),
            DType::F16 => matvec::Weights::F16(&cpu.as_slice::<half::f16>()?[span]),
            _ => return Ok(None),
        };
        // Widening bf16/f16 to f32 is exact.
        let xv = x.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
        let y = matvec::project_stored(&xv, rows, wv, out_dim, in_dim);
        let y = Tensor::from_vec(y, (rows, out_dim), &Device::Cpu)?;
        Ok(Some(y.to_dtype(x.dtype())?))
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

    /// bf16/f16 weights take `matvec` at every row count when decoding: a row's output
    /// is the same bits alone as among others, and near the f32 product.
    #[test]
    fn a_half_weight_gives_a_row_the_same_bits_whatever_shares_its_forward() -> Result<()> {
        let dev = Device::Cpu;
        let w32 = Tensor::randn(0f32, 1.0, (96, 64), &dev)?;
        let x32 = Tensor::randn(0f32, 1.0, (5, 64), &dev)?;
        for dtype in [DType::BF16, DType::F16] {
            let p = Proj::from_weight(w32.to_dtype(dtype)?).streaming();
            let x = x32.to_dtype(dtype)?;
            let all = p.forward(&x)?;
            assert_eq!(all.dtype(), dtype);
            let all = all.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            for (r, want) in all.iter().enumerate() {
                let alone = p.forward(&x.narrow(0, r, 1)?)?.to_dtype(DType::F32)?;
                assert_eq!(&alone.to_vec2::<f32>()?[0], want, "{dtype:?} row {r}");
            }
            let exact = x
                .to_dtype(DType::F32)?
                .matmul(&p.weight.to_dtype(DType::F32)?.t()?)?;
            for (got, want) in all
                .iter()
                .flatten()
                .zip(exact.flatten_all()?.to_vec1::<f32>()?)
            {
                assert!(
                    (got - want).abs() <= 0.02 * (1.0 + want.abs()),
                    "{dtype:?} {got} {want}"
                );
            }
        }
        Ok(())
    }

    /// A weight past the caches streams up to `max_rows()` rows through `matvec`: the
    /// same product as the gemm's.
    #[test]
    fn a_large_weight_streams_a_few_rows() -> Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (1024, 1024), &dev)?;
        let most = matvec::max_rows();
        assert!(
            matvec::streams(most, w.elem_count()) && !matvec::streams(most + 1, w.elem_count())
        );
        let p = Proj::from_weight(w.clone()).for_inference()?;
        for rows in [1, 2, 3, most, most + 1] {
            let x = Tensor::randn(0f32, 1.0, (rows, 1024), &dev)?;
            let want = x.matmul(&w.t()?)?;
            let diff = (p.forward(&x)? - &want)?
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_scalar::<f32>()?;
            assert!(diff < 1e-3, "{rows} rows: {diff}");
        }
        Ok(())
    }
}
