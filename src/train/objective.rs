//! The joint objective of Nemotron-Labs-Diffusion (reference/model.md §4): the doubled
//! sequence [x_t | x_0] under the block-diffusion mask, AR cross-entropy on x_0 plus
//! 0.3 × masked cross-entropy on x_t weighted by 1 / p_mask.

use anyhow::Result;
use candle_core::{DType, Device, IndexOp, Tensor, D};

use crate::model::Model;
use crate::rng::Rng;

/// Weight of the diffusion loss.
pub const DLM_WEIGHT: f64 = 0.3;
/// p_mask = (1 − ε) t + ε.
const EPS: f64 = 1e-3;

/// Additive (2L, 2L) mask over [x_t | x_0]: x_t is block-diagonal (bidirectional inside
/// a block) and block b also sees x_0 blocks before b; x_0 is causal and never sees x_t.
pub fn block_diffusion_mask(len: usize, block: usize) -> Vec<f32> {
    let n = 2 * len;
    let mut m = vec![f32::NEG_INFINITY; n * n];
    for q in 0..n {
        for k in 0..n {
            let allowed = match (q < len, k < len) {
                (true, true) => q / block == k / block,
                (true, false) => (k - len) / block < q / block,
                (false, true) => false,
                (false, false) => k <= q,
            };
            if allowed {
                m[q * n + k] = 0.0;
            }
        }
    }
    m
}

/// One training batch of `B` clean sequences of length L.
pub struct Batch {
    /// (B, 2L): noised x_t then clean x_0.
    pub ids: Tensor,
    /// RoPE positions 0..L for both halves.
    pub positions: Vec<usize>,
    /// (2L, 2L) additive.
    pub mask: Tensor,
    /// (B·(L−1),): x_0[1..], the AR targets.
    pub ar_targets: Tensor,
    /// (B·L,): x_0, the diffusion targets.
    pub dlm_targets: Tensor,
    /// (B·L,): 1 / p_mask at masked positions, 0 elsewhere.
    pub dlm_weights: Tensor,
    /// Masked positions in the batch.
    pub masked: usize,
}

/// Noises each block of each sequence with its own ratio t ~ U(0, 1); a share
/// `draft_shaped` of blocks is instead noised as a self-speculative draft sees its block
/// (reference/model.md, `linear_spec_generate`): position 0 clean (the seed), every
/// other position masked, weight 1 (p_mask = 1).
pub fn make_batch(
    seqs: &[&[u32]],
    block: usize,
    mask_id: u32,
    draft_shaped: f64,
    rng: &mut Rng,
    device: &Device,
) -> Result<Batch> {
    let b = seqs.len();
    let len = seqs[0].len();
    let mut ids = Vec::with_capacity(b * 2 * len);
    let mut ar = Vec::with_capacity(b * (len - 1));
    let mut tgt = Vec::with_capacity(b * len);
    let mut w = Vec::with_capacity(b * len);
    let mut masked = 0;
    for s in seqs {
        let mut xt = s.to_vec();
        for start in (0..len).step_by(block) {
            // The coin is drawn only when the share is set, so runs without it keep
            // their noise stream.
            let p = if draft_shaped > 0.0 && rng.uniform() < draft_shaped {
                for tok in xt.iter_mut().skip(start + 1).take(block - 1) {
                    *tok = mask_id;
                }
                1.0
            } else {
                let p = (1.0 - EPS) * rng.uniform() + EPS;
                for tok in xt.iter_mut().skip(start).take(block) {
                    if rng.uniform() < p {
                        *tok = mask_id;
                    }
                }
                p
            };
            for (i, tok) in xt.iter().enumerate().skip(start).take(block) {
                let is_masked = *tok == mask_id && s[i] != mask_id;
                w.push(if is_masked { (1.0 / p) as f32 } else { 0.0 });
                masked += is_masked as usize;
            }
        }
        ids.extend_from_slice(&xt);
        ids.extend_from_slice(s);
        ar.extend_from_slice(&s[1..]);
        tgt.extend_from_slice(s);
    }
    let positions: Vec<usize> = (0..len).chain(0..len).collect();
    let mask = Tensor::from_vec(block_diffusion_mask(len, block), (2 * len, 2 * len), device)?;
    Ok(Batch {
        ids: Tensor::from_vec(ids, (b, 2 * len), device)?,
        positions,
        mask,
        ar_targets: Tensor::from_vec(ar, b * (len - 1), device)?,
        dlm_targets: Tensor::from_vec(tgt, b * len, device)?,
        dlm_weights: Tensor::from_vec(w, b * len, device)?,
        masked,
    })
}

/// (total, ar, dlm) losses of one batch; `total` carries the gradient.
pub fn losses(model: &Model, batch: &Batch) -> Result<(Tensor, f32, f32)> {
    let logits = model.forward_train(&batch.ids, &batch.positions, &batch.mask, None)?;
    let (b, n, v) = logits.dims3()?;
    let len = n / 2;
    // x_0 half: logit i predicts token i + 1.
    let ar_logits = logits
        .i((.., len..n - 1, ..))?
        .reshape((b * (len - 1), v))?;
    let ar = candle_nn::loss::cross_entropy(&ar_logits, &batch.ar_targets)?;
    // x_t half: logit i predicts token i (no shift), only where masked.
    let dlm_logits = logits.i((.., 0..len, ..))?.reshape((b * len, v))?;
    let logp = candle_nn::ops::log_softmax(&dlm_logits, D::Minus1)?;
    let nll = logp
        .gather(&batch.dlm_targets.unsqueeze(1)?, 1)?
        .squeeze(1)?
        .neg()?;
    let dlm = ((nll * &batch.dlm_weights)?.sum_all()? / (b * len) as f64)?;
    let total = (&ar + (&dlm * DLM_WEIGHT)?)?;
    let ar_v = ar.to_dtype(DType::F32)?.to_scalar::<f32>()?;
    let dlm_v = dlm.to_dtype(DType::F32)?.to_scalar::<f32>()?;
    Ok((total, ar_v, dlm_v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_has_the_three_regions() {
        let (len, block) = (8, 4);
        let m = block_diffusion_mask(len, block);
        let ok = |q: usize, k: usize| m[q * 2 * len + k] == 0.0;
        assert!(ok(1, 3) && ok(3, 0), "x_t block 0 is bidirectional");
        assert!(!ok(1, 4), "x_t blocks do not see other x_t blocks");
        assert!(!ok(1, len), "x_t block 0 sees no clean block");
        assert!(
            ok(5, len + 3) && !ok(5, len + 4),
            "x_t block 1 sees clean block 0 only"
        );
        assert!(ok(len + 3, len) && !ok(len + 3, len + 4), "x_0 is causal");
        assert!(!ok(len + 7, 0), "x_0 never sees x_t");
    }

    #[test]
    fn batch_weights_mark_masked_positions() {
        let seq: Vec<u32> = (10..42).collect();
        let mut rng = Rng::new(1);
        let b = make_batch(&[&seq, &seq], 8, 4, 0.0, &mut rng, &Device::Cpu).unwrap();
        let ids: Vec<Vec<u32>> = b.ids.to_vec2().unwrap();
        let w: Vec<f32> = b.dlm_weights.to_vec1().unwrap();
        for (row, ids) in ids.iter().enumerate() {
            assert_eq!(&ids[32..], &seq[..], "clean half");
            for i in 0..32 {
                assert_eq!(ids[i] == 4, w[row * 32 + i] > 0.0);
            }
        }
        assert!(b.masked > 0 && w.iter().all(|&x| x == 0.0 || x >= 1.0));
    }

    #[test]
    fn draft_shaped_blocks_keep_the_seed_and_mask_the_rest() {
        let seq: Vec<u32> = (10..42).collect();
        let mut rng = Rng::new(3);
        let b = make_batch(&[&seq], 8, 4, 1.0, &mut rng, &Device::Cpu).unwrap();
        let ids: Vec<Vec<u32>> = b.ids.to_vec2().unwrap();
        let w: Vec<f32> = b.dlm_weights.to_vec1().unwrap();
        for i in 0..32 {
            let seed = i % 8 == 0;
            assert_eq!(ids[0][i] == 4, !seed, "position {i}");
            assert_eq!(w[i], if seed { 0.0 } else { 1.0 }, "weight {i}");
        }
        assert_eq!(b.masked, 28);
    }
}
