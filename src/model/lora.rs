//! The draft-only `o_proj` LoRA of `linear_spec_lora/`, applied per token on request.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use serde::Deserialize;

use super::config::Config;

/// `adapter_config.json` (PEFT); only the fields that change the maths.
#[derive(Debug, Clone, Deserialize)]
pub struct AdapterConfig {
    pub r: usize,
    pub lora_alpha: f64,
    #[serde(default)]
    pub target_modules: Vec<String>,
    #[serde(default)]
    pub use_rslora: bool,
}

/// Every tensor of the adapter file is an `o_proj` LoRA matrix of a layer the model
/// has: one for a layer it lacks, or for another module, would be ignored silently.
fn check_adapter_names(weights: &Path, layers: usize) -> Result<()> {
    // SAFETY: the file is memory-mapped read-only and not modified while mapped.
    let st = unsafe { candle_core::safetensors::MmapedSafetensors::new(weights) }
        .with_context(|| format!("cannot open LoRA weights {}", weights.display()))?;
    for (name, _) in st.tensors() {
        let layer = name
            .strip_prefix("base_model.model.encoder.layers.")
            .and_then(|rest| rest.split_once('.'))
            .filter(|(_, m)| {
                *m == "self_attn.o_proj.lora_A.weight" || *m == "self_attn.o_proj.lora_B.weight"
            })
            .and_then(|(i, _)| i.parse::<usize>().ok());
        match layer {
            Some(i) => ensure!(
                i < layers,
                "{}: tensor `{name}` is for layer {i}, but the model has {layers} layers",
                weights.display()
            ),
            None => anyhow::bail!(
                "{}: tensor `{name}` is not an o_proj LoRA matrix of this model (expected base_model.model.encoder.layers.N.self_attn.o_proj.lora_A/B.weight)",
                weights.display()
            ),
        }
    }
    Ok(())
}

/// Per-layer `(A, B)` with the PEFT scale: delta = scale · B(A(x)).
#[derive(Debug, Clone)]
pub struct DraftLora {
    pub scale: f64,
    pub rank: usize,
    layers: Vec<(Linear, Linear)>,
}

impl DraftLora {
    /// Loads `adapter_config.json` and `adapter_model.safetensors` from `dir`.
    pub fn load(dir: &Path, cfg: &Config, dtype: DType, device: &Device) -> Result<Self> {
        let cfg_path = dir.join("adapter_config.json");
        let text = crate::read_bounded(&cfg_path, 1 << 20)?;
        let ac: AdapterConfig = serde_json::from_str(&text)
            .with_context(|| format!("invalid adapter config {}", cfg_path.display()))?;
        ensure!(
            (1..=4096).contains(&ac.r),
            "{}: field `r` is {}: a LoRA rank is 1 to 4096",
            cfg_path.display(),
            ac.r
        );
        // PEFT's alphas are a few to a few hundred; a huge one drowns the draft (its
        // delta swamps o_proj), a non-finite one poisons every draft logit.
        ensure!(
            ac.lora_alpha.is_finite() && ac.lora_alpha.abs() <= 1e4,
            "{}: field `lora_alpha` is {}: expected a number within ±10000 (usually 8 to 512)",
            cfg_path.display(),
            ac.lora_alpha
        );
        ensure!(
            ac.target_modules.iter().all(|m| m == "o_proj"),
            "{}: field `target_modules` is {:?}; only [\"o_proj\"] is supported",
            cfg_path.display(),
            ac.target_modules
        );
        let weights = dir.join("adapter_model.safetensors");
        check_adapter_names(&weights, cfg.num_hidden_layers)?;
        // SAFETY: the file is memory-mapped read-only and not modified while mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, device) }
            .with_context(|| format!("cannot open LoRA weights {}", weights.display()))?;
        let q_width = cfg.num_attention_heads * cfg.head_dim();
        let vb = vb.pp("base_model.model.encoder.layers");
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(i).pp("self_attn.o_proj");
                let a = vb.get((ac.r, q_width), "lora_A.weight")?;
                let b = vb.get((cfg.hidden_size, ac.r), "lora_B.weight")?;
                Ok((Linear::new(a, None), Linear::new(b, None)))
            })
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("loading LoRA tensors from {}", weights.display()))?;
        let scale = if ac.use_rslora {
            ac.lora_alpha / (ac.r as f64).sqrt()
        } else {
            ac.lora_alpha / ac.r as f64
        };
        Ok(Self {
            scale,
            rank: ac.r,
            layers,
        })
    }

    /// Builds an adapter from tensors (tests and training).
    pub fn from_parts(scale: f64, layers: Vec<(Tensor, Tensor)>) -> Result<Self> {
        let rank = layers
            .first()
            .map(|(a, _)| a.dim(0))
            .transpose()?
            .unwrap_or(0);
        Ok(Self {
            scale,
            rank,
            layers: layers
                .into_iter()
                .map(|(a, b)| (Linear::new(a, None), Linear::new(b, None)))
                .collect(),
        })
    }

    /// delta for `x`: (N, q_width) -> (N, hidden).
    pub fn delta(&self, layer: usize, x: &Tensor) -> Result<Tensor> {
        let (a, b) = &self.layers[layer];
        Ok((b.forward(&a.forward(x)?)? * self.scale)?)
    }
}
