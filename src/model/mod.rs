//! The tri-mode backbone: config, weights, rows and masks, KV cache, LoRA, tokenizer.
//! Knows nothing of decoding policy.

pub mod backbone;
pub mod cache;
pub mod config;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod kernels;
pub mod load;
pub mod lora;
pub mod matvec;
pub mod ops;
pub mod proj;
pub mod rope;
pub mod rows;
pub mod signals;
pub mod source;
pub mod synthetic;
pub mod tokenizer;
pub mod weights;

use std::collections::BTreeSet;

use anyhow::Result;
use candle_core::Device;

pub use backbone::Model;
pub use cache::KvCache;
pub use config::Config;
pub use load::{compute_dtype, file_dtype, load, load_config, LoadOptions, LoadReport};
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

/// The tokenizer of a checkpoint, with BOS taken from config.json when needed.
pub fn load_tokenizer(files: &ModelFiles, cfg: &Config) -> Result<TextTokenizer> {
    let tok = TextTokenizer::load(files, cfg.bos_token_id)?;
    check_special_ids(&tok, cfg, files)?;
    Ok(tok)
}

/// The config's mask and eos ids against the tokenizer: each must be one of its special
/// tokens (where it marks any), else a real word would be the draft's blank (garbage
/// drafts) or would end every answer.
fn check_special_ids(tok: &TextTokenizer, cfg: &Config, files: &ModelFiles) -> Result<()> {
    let special: std::collections::HashSet<u32> = tok
        .inner()
        .get_added_tokens_decoder()
        .iter()
        .filter(|(_, t)| t.special)
        .map(|(id, _)| *id)
        .collect();
    if special.is_empty() {
        return Ok(());
    }
    let ids = std::iter::once(("mask_token_id", cfg.mask_token_id())).chain(
        cfg.eos_token_ids()
            .into_iter()
            .map(|id| ("eos_token_id", id)),
    );
    for (field, id) in ids {
        if !special.contains(&id) {
            let text = tok.inner().id_to_token(id).unwrap_or_default();
            anyhow::bail!(
                "{}: field `{field}` is {id}, the ordinary token {text:?} of {}, not one of its special tokens",
                files.config.display(),
                files.tokenizer.display()
            );
        }
    }
    Ok(())
}

/// Where the model runs (`--device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DeviceChoice {
    /// CUDA when compiled in and present, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

/// The weights' compute dtype (`--dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DtypeChoice {
    /// The checkpoint's bf16/f16 on CUDA, f32 on the CPU.
    #[default]
    Auto,
    F32,
    Bf16,
    F16,
}

/// CPU unless CUDA is compiled in and present; with a note for the user when `auto`
/// falls back to the CPU.
pub fn select_device(want: DeviceChoice) -> Result<(Device, Option<String>)> {
    match want {
        DeviceChoice::Cpu => Ok((Device::Cpu, None)),
        DeviceChoice::Cuda | DeviceChoice::Auto => {
            #[cfg(feature = "cuda")]
            {
                match cuda::open(0) {
                    Ok(d) => Ok((d, None)),
                    Err(e) if want == DeviceChoice::Auto => Ok((
                        Device::Cpu,
                        Some(format!("no usable CUDA device ({e}); running on the CPU")),
                    )),
                    Err(e) => Err(anyhow::anyhow!(
                        "--device cuda: cannot open CUDA device 0: {e}"
                    )),
                }
            }
            #[cfg(not(feature = "cuda"))]
            {
                if want == DeviceChoice::Cuda {
                    anyhow::bail!("--device cuda: this build has no CUDA support (rebuild with --features cuda)");
                }
                Ok((Device::Cpu, None))
            }
        }
    }
}
