//! Loading a checkpoint, checked before anything large is allocated: the config's
//! numbers, its layer count against the layers the weights hold, every tensor against
//! what the architecture expects (an unexpected tensor is an error), float weights only,
//! each tensor read from the shard the index names (`weights`), converted to the compute
//! dtype a slice at a time, so no second full copy of the weights ever exists.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use candle_nn::VarBuilder;

use super::weights::Shards;
use super::{expected_tensors, lora, Config, Model, ModelFiles};

/// Largest f32 weights whose projections also get a transposed copy on the CPU
/// (`proj.rs`): 1.5–3× faster block forwards, at twice the projection memory.
pub const TRANSPOSE_BUDGET: usize = 2 << 30;

/// What loading found besides the model itself.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub tensors: usize,
    /// Dtypes found in the weight files (e.g. "BF16").
    pub file_dtypes: Vec<String>,
    /// Tensors in the files that the architecture does not use (only when allowed).
    pub unexpected: Vec<String>,
    pub lora: bool,
    /// The compute dtype the weights were converted to.
    pub dtype: String,
    /// Bytes of the weights in the compute dtype.
    pub weight_bytes: usize,
}

/// Options for [`load`].
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Attach `linear_spec_lora/` when the checkpoint has one.
    pub lora: bool,
    /// Compute dtype of the weights (norms, softmax and logits accumulate in f32).
    pub dtype: DType,
    /// Tolerate tensors the architecture does not use (`inspect` lists them).
    pub allow_unexpected: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            lora: true,
            dtype: DType::F32,
            allow_unexpected: false,
        }
    }
}

/// The compute dtype for `--dtype`: `auto` keeps the checkpoint's dtype on CUDA (bf16
/// for NLD) and uses f32 on the CPU.
pub fn compute_dtype(
    want: super::DtypeChoice,
    device: &Device,
    file_dtype: Option<DType>,
) -> DType {
    use super::DtypeChoice;
    match want {
        DtypeChoice::F32 => DType::F32,
        DtypeChoice::Bf16 => DType::BF16,
        DtypeChoice::F16 => DType::F16,
        DtypeChoice::Auto if device.is_cpu() => DType::F32,
        DtypeChoice::Auto => match file_dtype {
            Some(d @ (DType::BF16 | DType::F16)) => d,
            _ => DType::BF16,
        },
    }
}

/// Layers the weights hold: one more than the largest `encoder.layers.N.` index.
fn layers_in(names: &BTreeSet<&str>) -> usize {
    names
        .iter()
        .filter_map(|n| {
            n.strip_prefix("encoder.layers.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .map(|l| l + 1)
        .max()
        .unwrap_or(0)
}

/// The checkpoint's config: config.json, with generation_config.json's eos and bos.
pub fn load_config(files: &ModelFiles) -> Result<Config> {
    let mut cfg = Config::from_file(&files.config)?;
    if let Some(g) = &files.generation_config {
        cfg.apply_generation_config(g)?;
    }
    Ok(cfg)
}

/// Loads config and weights (and the LoRA) onto `device`. Errors name the file and the
/// tensor or field at fault.
pub fn load(files: &ModelFiles, device: &Device, opts: LoadOptions) -> Result<(Model, LoadReport)> {
    let cfg = load_config(files)?;
    let shards = Shards::open(files)?;
    let names: BTreeSet<&str> = shards.entries.keys().map(String::as_str).collect();
    let config = files.config.display();
    let found_layers = layers_in(&names);
    if found_layers != cfg.num_hidden_layers {
        bail!(
            "{config}: field `num_hidden_layers` is {}, but the weights hold {found_layers} layers",
            cfg.num_hidden_layers
        );
    }
    let embed = shards.entry("encoder.embed_tokens.weight")?;
    if embed.shape != [cfg.vocab_size, cfg.hidden_size] {
        bail!(
            "{config}: fields `vocab_size` × `hidden_size` are {} × {}, but encoder.embed_tokens.weight is {:?}",
            cfg.vocab_size,
            cfg.hidden_size,
            embed.shape
        );
    }
    let expected = expected_tensors(&cfg);
    let mut dtypes = BTreeSet::new();
    let mut unexpected = Vec::new();
    for name in &names {
        dtypes.insert(format!("{:?}", shards.entry(name)?.dtype).to_uppercase());
        if !expected.contains(*name) {
            unexpected.push(name.to_string());
        }
    }
    if !unexpected.is_empty() && !opts.allow_unexpected {
        let shown: Vec<&str> = unexpected.iter().take(5).map(String::as_str).collect();
        // The files that hold them (a sharded checkpoint may spread them).
        let mut in_files = BTreeSet::new();
        for name in &unexpected {
            in_files.insert(shards.names[shards.entry(name)?.shard].as_str());
        }
        let file = in_files.into_iter().collect::<Vec<_>>().join(", ");
        bail!(
            "{file}: holds {} this architecture does not use ({}{}): a different model, or a config.json ({config}) that does not match it",
            match unexpected.len() {
                1 => "a tensor".to_string(),
                n => format!("{n} tensors"),
            },
            shown.join(", "),
            if unexpected.len() > 5 { ", …" } else { "" }
        );
    }
    let tensors = names.len();
    drop(names);
    let mut report = LoadReport {
        tensors,
        file_dtypes: dtypes.into_iter().collect(),
        unexpected,
        lora: false,
        dtype: format!("{:?}", opts.dtype).to_lowercase(),
        weight_bytes: (cfg.param_count() as usize).saturating_mul(opts.dtype.size_in_bytes()),
    };
    let vb = VarBuilder::from_backend(Box::new(shards), opts.dtype, device.clone());
    // The CPU's transposed projection copies double projection memory: worth it for
    // the small f32 models a CPU runs fast, not for ones whose weights alone fill
    // memory, nor in bf16/f16, whose projections stream the stored weight (`matvec`).
    let transposed =
        device.is_cpu() && opts.dtype == DType::F32 && report.weight_bytes <= TRANSPOSE_BUDGET;
    let mut model = Model::new(&cfg, vb)
        .and_then(|m| m.for_inference(transposed))
        .with_context(|| format!("weights do not match config {config}"))?;
    if let (true, Some(dir)) = (opts.lora, &files.lora_dir) {
        let lora = lora::DraftLora::load(dir, &cfg, opts.dtype, device)?;
        model = model.with_lora(lora);
        report.lora = true;
    }
    Ok((model, report))
}

/// The weight files' dtype (the embedding's), for `--dtype auto`.
pub fn file_dtype(files: &ModelFiles) -> Option<DType> {
    let shards = Shards::open(files).ok()?;
    let e = shards.entry("encoder.embed_tokens.weight").ok()?;
    Some(e.dtype)
}
