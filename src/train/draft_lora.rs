//! The draft adapter (`linear_spec_lora/`): with the base frozen, an `o_proj` LoRA that
//! applies to draft forwards only learns to predict, from the draft's view of a block
//! (its seed, then masks), the token the verifier will choose at each position. That is
//! what verification accepts, so the draft's probabilities become the chance of being
//! accepted there. Verify forwards run without it, so decoding stays lossless.

use std::path::Path;

use anyhow::{Context, Result};
use candle_core::{DType, Device, IndexOp, Tensor, D};
use candle_nn::{Init, VarBuilder, VarMap};

use super::objective::Batch;
use crate::model::lora::DraftLora;
use crate::model::{Config, Model};

/// Directory of the adapter inside a model directory (the NLD layout).
pub const DIR: &str = "linear_spec_lora";

/// Geometry of the adapter: rank and PEFT `lora_alpha`.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub rank: usize,
    pub alpha: f64,
}

/// The adapter's variables (A drawn from `seed`, B zero: it starts as the base's
/// draft) and the model that drafts with them; `resume` loads saved ones instead.
pub fn build(
    base: Model,
    cfg: &Config,
    shape: Shape,
    seed: u64,
    resume: Option<&Path>,
) -> Result<(Model, VarMap)> {
    let mut varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, base.device());
    let q_width = cfg.num_attention_heads * cfg.head_dim();
    let vb = vb.pp("base_model.model.encoder.layers");
    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    let mut rng = crate::rng::Rng::new(seed ^ 0x10AA_D1A7);
    for i in 0..cfg.num_hidden_layers {
        let vb = vb.pp(i).pp("self_attn.o_proj");
        let std = 1.0 / (q_width as f64).sqrt();
        // From the run's seed, not the device's generator: a run is its seed's.
        let a = vb.get_with_hints((shape.rank, q_width), "lora_A.weight", Init::Const(0.0))?;
        let draws: Vec<f32> = (0..shape.rank * q_width)
            .map(|_| (rng.normal() * std) as f32)
            .collect();
        let name = format!("base_model.model.encoder.layers.{i}.self_attn.o_proj.lora_A.weight");
        varmap.set_one(
            name,
            Tensor::from_vec(draws, (shape.rank, q_width), base.device())?,
        )?;
        let b = vb.get_with_hints(
            (cfg.hidden_size, shape.rank),
            "lora_B.weight",
            Init::Const(0.0),
        )?;
        layers.push((a, b));
    }
    if let Some(path) = resume {
        varmap
            .load(path)
            .with_context(|| format!("resuming the draft adapter from {}", path.display()))?;
    }
    let lora = DraftLora::from_parts(shape.alpha / shape.rank as f64, layers)?;
    Ok((base.with_lora(lora), varmap))
}

/// Writes `adapter_config.json` and `adapter_model.safetensors` under `dir/DIR`.
pub fn save(dir: &Path, shape: Shape, varmap: &VarMap) -> Result<()> {
    let out = dir.join(DIR);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let cfg = serde_json::json!({"peft_type": "LORA", "r": shape.rank,
        "lora_alpha": shape.alpha, "target_modules": ["o_proj"], "use_rslora": false,
        "inference_mode": true});
    std::fs::write(
        out.join("adapter_config.json"),
        serde_json::to_string_pretty(&cfg)?,
    )?;
    let weights = out.join("adapter_model.safetensors");
    varmap
        .save(&weights)
        .with_context(|| format!("cannot write {}", weights.display()))
}

/// (loss, agreement) of a batch of draft-shaped blocks: cross-entropy of the draft at
/// each masked position against the verifier's distribution there (the clean half's
/// logit one position back, as verification reads it), and the share of those
/// positions where the draft's top choice is the verifier's.
pub fn losses(model: &Model, batch: &Batch) -> Result<(Tensor, f32)> {
    let len = batch.positions.len() / 2;
    let logits = model.forward_train(&batch.ids, &batch.positions, &batch.mask, Some(len))?;
    let (b, n, v) = logits.dims3()?;
    // (B, L, V): position i's target is the verifier's distribution after x_0[..i];
    // position 0 is a seed (weight 0) and gets zeros.
    let verifier =
        candle_nn::ops::softmax_last_dim(&logits.i((.., len..n - 1, ..))?.contiguous()?)?.detach();
    let first = Tensor::zeros((b, 1, v), DType::F32, logits.device())?;
    let targets = Tensor::cat(&[first, verifier], 1)?.reshape((b * len, v))?;
    let draft = logits.i((.., 0..len, ..))?.reshape((b * len, v))?;
    let ce = (candle_nn::ops::log_softmax(&draft, D::Minus1)? * &targets)?
        .sum(D::Minus1)?
        .neg()?;
    let w = &batch.dlm_weights;
    let total = w.sum_all()?.to_scalar::<f32>()?.max(1.0);
    let loss = ((ce * w)?.sum_all()? / total as f64)?;
    let agree = draft
        .argmax(D::Minus1)?
        .eq(&targets.argmax(D::Minus1)?)?
        .to_dtype(DType::F32)?
        .mul(w)?
        .sum_all()?
        .to_scalar::<f32>()?
        / total;
    Ok((loss, agree))
}

/// Loads the frozen base for the adapter phase: plain tensors, so backward computes no
/// gradient for its weights.
pub fn frozen_base(dir: &Path, cfg: &Config, device: &Device) -> Result<Model> {
    let weights = dir.join("model.safetensors");
    let bytes =
        std::fs::read(&weights).with_context(|| format!("cannot read {}", weights.display()))?;
    let tensors = candle_core::safetensors::load_buffer(&bytes, device)
        .with_context(|| format!("invalid {}", weights.display()))?;
    let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
    Model::new(cfg, vb)
}
