//! The tri-mode backbone: config, weights, rows and masks, KV cache, LoRA, tokenizer.
//! Knows nothing of decoding policy.

pub mod backbone;
pub mod cache;
pub mod config;
pub mod lora;
pub mod ops;
pub mod proj;
pub mod rope;
pub mod rows;
pub mod source;
pub mod synthetic;
pub mod tokenizer;

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use candle_core::{DType, Device};
use candle_nn::VarBuilder;

pub use backbone::Model;
pub use cache::KvCache;
pub use config::Config;
pub use rows::{AttnRule, LogitSel, Row, RowBatch};
pub use source::{ModelFiles, ModelSource};
pub use tokenizer::{ChatMessage, TextTokenizer};

/// Checkpoint tensor names the architecture expects (9 per layer + 3).
pub fn expected_tensors(cfg: &Config) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    names.insert("encoder.embed_tokens.weight".to_string());
    names.insert("encoder.norm.weight".to_string());
    if !cfg.tie_word_embeddings {
        names.insert("diffusion_head.weight".to_string());
    }
    for l in 0..cfg.num_hidden_layers {
        for t in [
            "input_layernorm",
            "post_attention_layernorm",
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ] {
            names.insert(format!("encoder.layers.{l}.{t}.weight"));
        }
    }
    names
}

/// What loading found besides the model itself.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub tensors: usize,
    /// Dtypes found in the weight files (e.g. "BF16").
    pub file_dtypes: Vec<String>,
    /// Tensors in the files that the architecture does not use.
    pub unexpected: Vec<String>,
    pub lora: bool,
}

/// Options for [`load`].
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Attach `linear_spec_lora/` when the checkpoint has one.
    pub lora: bool,
    /// Compute dtype; CPU computes in f32 whatever the file stores.
    pub dtype: DType,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            lora: true,
            dtype: DType::F32,
        }
    }
}

/// Loads config and weights (and the LoRA) onto `device`. Errors name the file and the
/// tensor or field at fault.
pub fn load(files: &ModelFiles, device: &Device, opts: LoadOptions) -> Result<(Model, LoadReport)> {
    let cfg = Config::from_file(&files.config)?;
    let shown = files
        .weights
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    for p in &files.weights {
        std::fs::metadata(p).with_context(|| format!("cannot open weights {}", p.display()))?;
    }
    // SAFETY: the files are mapped read-only and not modified while mapped.
    let st = unsafe { candle_core::safetensors::MmapedSafetensors::multi(&files.weights) }
        .with_context(|| format!("cannot read weights {shown} (not a valid safetensors file?)"))?;
    let expected = expected_tensors(&cfg);
    let mut dtypes = BTreeSet::new();
    let mut unexpected = Vec::new();
    let found = st.tensors();
    for (name, view) in &found {
        dtypes.insert(format!("{:?}", view.dtype()));
        if !expected.contains(name) {
            unexpected.push(name.clone());
        }
    }
    let report = LoadReport {
        tensors: found.len(),
        file_dtypes: dtypes.into_iter().collect(),
        unexpected,
        lora: false,
    };
    drop(found);
    let vb = VarBuilder::from_backend(Box::new(st), opts.dtype, device.clone());
    let mut model = Model::new(&cfg, vb)
        .and_then(Model::for_inference)
        .with_context(|| {
            format!(
                "weights {shown} do not match config {}",
                files.config.display()
            )
        })?;
    let mut report = report;
    if let (true, Some(dir)) = (opts.lora, &files.lora_dir) {
        let lora = lora::DraftLora::load(dir, &cfg, opts.dtype, device)?;
        model = model.with_lora(lora);
        report.lora = true;
    }
    Ok((model, report))
}

/// The tokenizer of a checkpoint, with BOS taken from config.json when needed.
pub fn load_tokenizer(files: &ModelFiles, cfg: &Config) -> Result<TextTokenizer> {
    TextTokenizer::load(files, cfg.bos_token_id)
}

/// CPU unless CUDA is compiled in and present; says so when it falls back.
pub fn select_device(want: &str) -> Result<Device> {
    match want {
        "cpu" => Ok(Device::Cpu),
        "cuda" | "auto" => {
            #[cfg(feature = "cuda")]
            {
                match Device::new_cuda(0) {
                    Ok(d) => Ok(d),
                    Err(e) if want == "auto" => {
                        eprintln!("specscope: no usable CUDA device ({e}); running on the CPU");
                        Ok(Device::Cpu)
                    }
                    Err(e) => Err(anyhow::anyhow!(
                        "--device cuda: cannot open CUDA device 0: {e}"
                    )),
                }
            }
            #[cfg(not(feature = "cuda"))]
            {
                if want == "cuda" {
                    anyhow::bail!("--device cuda: this build has no CUDA support (rebuild with --features cuda)");
                }
                Ok(Device::Cpu)
            }
        }
        other => anyhow::bail!("--device {other}: expected cpu, cuda or auto"),
    }
}
