//! Small checkpoints with the real NLD layout and random weights, written to disk. Tests
//! and `specscope profile` use them; nothing here downloads anything.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};

pub use crate::rng::Rng;

/// The ChatML template with NLD's thinking tags (thinking off by default).
pub const CHAT_TEMPLATE: &str = include_str!("chat_template.jinja");

/// Special tokens in NLD's manner, in id order from 0.
pub const SPECIAL_TOKENS: [&str; 9] = [
    "<unk>",
    "<s>",
    "</s>",
    "<pad>",
    "<|mask|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
];
pub const BOS_ID: u32 = 1;
pub const MASK_ID: u32 = 4;
pub const EOS_ID: u32 = 6;
/// Byte-level base tokens start here (ids 16..272).
pub const BYTE_BASE: u32 = 16;

/// Geometry and options of a synthetic checkpoint.
#[derive(Debug, Clone)]
pub struct Spec {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    /// `Some((factor, original_max))` writes YaRN rope_parameters, `None` plain RoPE.
    pub yarn: Option<(f64, usize)>,
    pub rope_theta: f64,
    pub seed: u64,
    pub dtype: DType,
    /// Rank of a `linear_spec_lora/` adapter to write, if any.
    pub lora_rank: Option<usize>,
    /// Fill each large tensor by repeating one short random run instead of drawing
    /// every value: a checkpoint for timing forwards (its tokens mean nothing either
    /// way) written at disk speed, so a GPU host writes an 8B one in seconds.
    pub tiled: bool,
}

impl Spec {
    /// A toy model that tests build in milliseconds.
    pub fn toy() -> Self {
        Self {
            vocab_size: 288,
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 16,
            max_position_embeddings: 4096,
            yarn: None,
            rope_theta: 10_000.0,
            seed: 7,
            dtype: DType::F32,
            lora_rank: None,
            tiled: false,
        }
    }

    /// About 4.5M parameters: the size of the bundled model, for profiling.
    pub fn small_4m() -> Self {
        Self {
            vocab_size: 4096,
            hidden_size: 256,
            intermediate_size: 512,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 64,
            max_position_embeddings: 4096,
            ..Self::toy()
        }
    }

    /// The bundled model's geometry (about 4.2M parameters).
    pub fn bundled() -> Self {
        Self {
            vocab_size: 2048,
            hidden_size: 256,
            intermediate_size: 768,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 64,
            max_position_embeddings: 2048,
            ..Self::toy()
        }
    }

    /// The small model with the real NLD vocabulary (131,072): what the logits
    /// statistics cost at full width.
    pub fn real_vocab() -> Self {
        Self {
            vocab_size: 131_072,
            ..Self::small_4m()
        }
    }

    /// About 1.0B parameters with NLD's head layout (32k vocabulary, 18 layers of
    /// hidden 2048): a large checkpoint for load-memory measurements.
    pub fn nld_1b() -> Self {
        Self {
            vocab_size: 32_768,
            hidden_size: 2048,
            intermediate_size: 6144,
            num_hidden_layers: 18,
            num_attention_heads: 16,
            num_key_value_heads: 4,
            head_dim: 128,
            max_position_embeddings: 4096,
            dtype: DType::BF16,
            ..Self::toy()
        }
    }

    /// Nemotron-Labs-Diffusion 3B's geometry (`../shared/reference/model.md` §1.2:
    /// 26 layers of hidden 3072, 32 heads of 128, 8 KV heads, vocabulary 131,072), in
    /// bf16 with a rank-16 draft adapter, tiled: for timing on a GPU.
    pub fn nld_3b() -> Self {
        Self {
            hidden_size: 3072,
            intermediate_size: 9216,
            num_hidden_layers: 26,
            ..Self::nld_8b()
        }
    }

    /// Nemotron-Labs-Diffusion 8B's geometry (34 layers of hidden 4096, intermediate
    /// 14336; the cost profiles' `Geometry::nld_8b`), as `nld_3b`.
    pub fn nld_8b() -> Self {
        Self {
            vocab_size: 131_072,
            hidden_size: 4096,
            intermediate_size: 14336,
            num_hidden_layers: 34,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
            max_position_embeddings: 16_384,
            rope_theta: 1.0e6,
            dtype: DType::BF16,
            lora_rank: Some(16),
            tiled: true,
            ..Self::toy()
        }
    }

    /// The names `named` knows.
    pub const NAMES: &'static [&'static str] = &[
        "toy",
        "small-4m",
        "bundled",
        "real-vocab",
        "nld-1b",
        "nld-3b",
        "nld-8b",
    ];

    /// A spec by name (one of `NAMES`).
    pub fn named(name: &str) -> Option<Self> {
        Some(match name {
            "toy" => Self::toy(),
            "small-4m" => Self::small_4m(),
            "bundled" => Self::bundled(),
            "real-vocab" => Self::real_vocab(),
            "nld-1b" => Self::nld_1b(),
            "nld-3b" => Self::nld_3b(),
            "nld-8b" => Self::nld_8b(),
            _ => return None,
        })
    }

    /// A toy that trains in seconds (its byte-level BPE needs a 320-token vocabulary).
    pub fn toy_trainable() -> Self {
        Self {
            vocab_size: 320,
            max_position_embeddings: 1024,
            ..Self::toy()
        }
    }

    /// config.json for this spec, with the real NLD field names.
    pub fn config_json(&self) -> serde_json::Value {
        let mut rope = serde_json::json!({"rope_type": "default", "rope_theta": self.rope_theta});
        if let Some((factor, orig)) = self.yarn {
            rope = serde_json::json!({
                "rope_type": "yarn", "rope_theta": self.rope_theta, "factor": factor,
                "original_max_position_embeddings": orig, "beta_fast": 32.0, "beta_slow": 1.0,
                "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1
            });
        }
        serde_json::json!({
            "architectures": ["NemotronLabsDiffusionModel"],
            "model_type": "nemotron_labs_diffusion",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": 1e-5,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_parameters": rope,
            "attention_bias": false, "mlp_bias": false, "attention_dropout": 0.0,
            "sliding_window": null,
            "tie_word_embeddings": false,
            "torch_dtype": if self.dtype == DType::BF16 { "bfloat16" } else { "float32" },
            "use_cache": false,
            "mask_token_id": MASK_ID,
            "bos_token_id": BOS_ID,
            "eos_token_id": EOS_ID,
            "pad_token_id": 3,
            "block_size": 32,
            "dlm_paradigm": "bidirectional",
            "ar_loss_weight": 1.0,
            "dlm_loss_weight": 0.3
        })
    }
}

/// A `shape` tensor of normal samples with standard deviation `std`.
fn normal_tensor(rng: &mut Rng, shape: &[usize], std: f64) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| (rng.normal() * std) as f32).collect();
    Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
}

/// How a synthetic tensor is filled.
#[derive(Debug, Clone, Copy)]
enum Init {
    /// Normal samples with this standard deviation.
    Normal(f64),
    /// 1 + normal(0.1): a norm's weight.
    Norm,
    /// All ones.
    Ones,
}

/// Every backbone tensor's checkpoint name, shape and fill, in the order the random
/// stream fills them (so a spec's weights are the same however they are written).
fn tensor_plan(spec: &Spec) -> Vec<(String, Vec<usize>, Init)> {
    let (h, i, v) = (spec.hidden_size, spec.intermediate_size, spec.vocab_size);
    let q = spec.num_attention_heads * spec.head_dim;
    let kv = spec.num_key_value_heads * spec.head_dim;
    let lin = |out: usize, inp: usize| (vec![out, inp], Init::Normal(1.0 / (inp as f64).sqrt()));
    let mut plan = vec![(
        "encoder.embed_tokens.weight".to_string(),
        vec![v, h],
        Init::Normal(1.0),
    )];
    for l in 0..spec.num_hidden_layers {
        let p = format!("encoder.layers.{l}");
        let layer = [
            ("input_layernorm", (vec![h], Init::Norm)),
            ("post_attention_layernorm", (vec![h], Init::Norm)),
            ("self_attn.q_proj", lin(q, h)),
            ("self_attn.k_proj", lin(kv, h)),
            ("self_attn.v_proj", lin(kv, h)),
            ("self_attn.o_proj", lin(h, q)),
            ("mlp.gate_proj", lin(i, h)),
            ("mlp.up_proj", lin(i, h)),
            ("mlp.down_proj", lin(h, i)),
        ];
        for (name, (shape, init)) in layer {
            plan.push((format!("{p}.{name}.weight"), shape, init));
        }
    }
    plan.push(("encoder.norm.weight".to_string(), vec![h], Init::Ones));
    let (shape, init) = lin(v, h);
    plan.push(("diffusion_head.weight".to_string(), shape, init));
    plan
}

fn fill(rng: &mut Rng, shape: &[usize], init: Init) -> Result<Tensor> {
    match init {
        Init::Normal(std) => normal_tensor(rng, shape, std),
        Init::Norm => Ok((normal_tensor(rng, shape, 0.1)? + 1.0)?),
        Init::Ones => Ok(Tensor::ones(shape, DType::F32, &Device::Cpu)?),
    }
}

/// Every backbone tensor under its checkpoint name, random but deterministic.
pub fn random_weights(spec: &Spec) -> Result<HashMap<String, Tensor>> {
    let mut rng = Rng::new(spec.seed);
    tensor_plan(spec)
        .into_iter()
        .map(|(name, shape, init)| Ok((name, fill(&mut rng, &shape, init)?)))
        .collect()
}

/// Parameters of a spec's backbone.
pub fn param_count(spec: &Spec) -> usize {
    tensor_plan(spec)
        .iter()
        .map(|(_, s, _)| s.iter().product::<usize>())
        .sum()
}

/// Writes `random_weights(spec)` as one safetensors file in `spec.dtype`, one tensor
/// in memory at a time, so that checkpoints larger than memory can be written.
pub fn write_weights_streaming(spec: &Spec, path: &Path) -> Result<()> {
    use std::io::Write;
    let plan = tensor_plan(spec);
    let elem = spec.dtype.size_in_bytes();
    let tag = match spec.dtype {
        DType::F32 => "F32",
        DType::BF16 => "BF16",
        DType::F16 => "F16",
        d => anyhow::bail!("synthetic checkpoints are f32, bf16 or f16, not {d:?}"),
    };
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, shape, _) in &plan {
        let bytes = shape.iter().product::<usize>() * elem;
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": tag, "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut text = serde_json::to_string(&header)?.into_bytes();
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let write = |out: &mut std::io::BufWriter<std::fs::File>, b: &[u8]| {
        out.write_all(b)
            .with_context(|| format!("cannot write {}", path.display()))
    };
    write(&mut out, &(text.len() as u64).to_le_bytes())?;
    write(&mut out, &text)?;
    let mut rng = Rng::new(spec.seed);
    for (_, shape, init) in &plan {
        let n: usize = shape.iter().product();
        if spec.tiled && n > TILE {
            // One random run of TILE values, written over and over.
            let run = tensor_bytes(&fill(&mut rng, &[TILE], *init)?, spec.dtype)?;
            for _ in 0..n / TILE {
                write(&mut out, &run)?;
            }
            write(&mut out, &run[..(n % TILE) * elem])?;
            continue;
        }
        write(
            &mut out,
            &tensor_bytes(&fill(&mut rng, shape, *init)?, spec.dtype)?,
        )?;
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Values in a tiled tensor's repeating run (a tiled tensor is larger than this).
const TILE: usize = 1 << 20;

/// A tensor's values in `dtype`, little-endian, as safetensors stores them.
fn tensor_bytes(t: &Tensor, dtype: DType) -> Result<Vec<u8>> {
    let t = t.to_dtype(dtype)?.flatten_all()?;
    Ok(match dtype {
        DType::F32 => t
            .to_vec1::<f32>()?
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::BF16 => t
            .to_vec1::<half::bf16>()?
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        _ => t
            .to_vec1::<half::f16>()?
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    })
}

/// GPT-2's byte-to-printable-character table used by byte-level BPE.
pub fn byte_chars() -> Vec<char> {
    let printable: Vec<u32> = ('!' as u32..='~' as u32)
        .chain('¡' as u32..='¬' as u32)
        .chain('®' as u32..='ÿ' as u32)
        .collect();
    let mut chars = vec!['\0'; 256];
    for &b in &printable {
        chars[b as usize] = char::from_u32(b).unwrap_or_default();
    }
    let mut extra = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            chars[b as usize] = char::from_u32(256 + extra).unwrap_or_default();
            extra += 1;
        }
    }
    chars
}

/// A byte-level BPE `tokenizer.json` with no merges: every byte is a token.
pub fn byte_tokenizer_json() -> serde_json::Value {
    let mut vocab = serde_json::Map::new();
    for (id, tok) in SPECIAL_TOKENS.iter().enumerate() {
        vocab.insert(tok.to_string(), id.into());
    }
    for (b, c) in byte_chars().into_iter().enumerate() {
        vocab.insert(c.to_string(), (BYTE_BASE as usize + b).into());
    }
    let added: Vec<serde_json::Value> = SPECIAL_TOKENS
        .iter()
        .enumerate()
        .map(|(id, tok)| {
            serde_json::json!({"id": id, "content": tok, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": []}
    })
}

fn write_json(path: &Path, v: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn save(tensors: &HashMap<String, Tensor>, dtype: DType, path: &Path) -> Result<()> {
    let converted = tensors
        .iter()
        .map(|(k, t)| Ok((k.clone(), t.to_dtype(dtype)?)))
        .collect::<Result<HashMap<_, _>>>()?;
    candle_core::safetensors::save(&converted, path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The files [`write_checkpoint`] writes into its directory.
pub const CHECKPOINT_FILES: &[&str] = &[
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
    "linear_spec_lora/adapter_config.json",
    "linear_spec_lora/adapter_model.safetensors",
];

/// Writes a complete model directory: config, weights, tokenizer, template, LoRA.
pub fn write_checkpoint(dir: &Path, spec: &Spec) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_json(&dir.join("config.json"), &spec.config_json())?;
    write_weights_streaming(spec, &dir.join("model.safetensors"))?;
    write_json(&dir.join("tokenizer.json"), &byte_tokenizer_json())?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &serde_json::json!({"bos_token": "<s>", "eos_token": "<|im_end|>", "pad_token": "<pad>",
            "model_max_length": spec.max_position_embeddings}),
    )?;
    std::fs::write(dir.join("chat_template.jinja"), CHAT_TEMPLATE)?;
    write_json(
        &dir.join("generation_config.json"),
        &serde_json::json!({"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID]}),
    )?;
    if let Some(r) = spec.lora_rank {
        let lora = dir.join("linear_spec_lora");
        std::fs::create_dir_all(&lora)?;
        write_json(
            &lora.join("adapter_config.json"),
            &serde_json::json!({"peft_type": "LORA", "r": r, "lora_alpha": 4 * r,
                "target_modules": ["o_proj"], "inference_mode": true}),
        )?;
        let mut rng = Rng::new(spec.seed + 1);
        let q = spec.num_attention_heads * spec.head_dim;
        let mut w = HashMap::new();
        for l in 0..spec.num_hidden_layers {
            let p = format!("base_model.model.encoder.layers.{l}.self_attn.o_proj");
            w.insert(
                format!("{p}.lora_A.weight"),
                normal_tensor(&mut rng, &[r, q], 0.05)?,
            );
            w.insert(
                format!("{p}.lora_B.weight"),
                normal_tensor(&mut rng, &[spec.hidden_size, r], 0.05)?,
            );
        }
        save(&w, DType::F32, &lora.join("adapter_model.safetensors"))?;
    }
    Ok(())
}

/// Builds a random model in memory (no files), e.g. for profiling.
pub fn build_model(spec: &Spec, device: &candle_core::Device) -> Result<super::Model> {
    let cfg: super::Config = serde_json::from_value(spec.config_json())?;
    let weights = random_weights(spec)?;
    let vb = candle_nn::VarBuilder::from_tensors(weights, DType::F32, device);
    super::Model::new(&cfg, vb)?.for_inference(true)
}
