//! Loading a checkpoint, checked before anything large is allocated: the config's
//! numbers, its layer count against the layers the weights hold, every tensor against
//! what the architecture expects (an unexpected tensor is an error), float weights only,
//! each tensor read from the shard the index names. Weights stay memory-mapped and are
//! converted to the compute dtype one tensor at a time, so no second full copy exists.

use std::collections::{BTreeSet, HashMap};

use anyhow::{bail, Context, Result};
use candle_core::safetensors::{Load, MmapedSafetensors};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;

use super::{expected_tensors, lora, Config, Model, ModelFiles};

/// Largest weights (in the compute dtype) whose projections also get a transposed copy
/// on the CPU (`proj.rs`): 1.5–3× faster block forwards, at twice the projection memory.
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
pub fn compute_dtype(want: &str, device: &Device, file_dtype: Option<DType>) -> Result<DType> {
    Ok(match want {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        "auto" if device.is_cpu() => DType::F32,
        "auto" => match file_dtype {
            Some(d @ (DType::BF16 | DType::F16)) => d,
            _ => DType::BF16,
        },
        other => bail!("--dtype {other}: expected auto, f32, bf16 or f16"),
    })
}

/// Mapped shards and which shard holds each tensor.
struct Shards {
    files: Vec<MmapedSafetensors>,
    names: Vec<String>,
    route: HashMap<String, usize>,
}

impl Shards {
    fn open(files: &ModelFiles) -> Result<Self> {
        let mut mapped = Vec::new();
        let mut names = Vec::new();
        for p in &files.weights {
            std::fs::metadata(p).with_context(|| format!("cannot open weights {}", p.display()))?;
            // SAFETY: the files are mapped read-only and not modified while mapped.
            let st = unsafe { MmapedSafetensors::new(p) }.with_context(|| {
                format!(
                    "cannot read weights {} (not a valid safetensors file?)",
                    p.display()
                )
            })?;
            mapped.push(st);
            names.push(p.display().to_string());
        }
        let mut route = HashMap::new();
        match &files.index {
            Some((index, map)) => {
                for (tensor, shard) in map {
                    let i = files
                        .weights
                        .iter()
                        .position(|w| w == shard)
                        .with_context(|| {
                            format!(
                                "{}: shard {} is not loaded",
                                index.display(),
                                shard.display()
                            )
                        })?;
                    if mapped[i].get(tensor).is_err() {
                        bail!(
                            "{}: `weight_map` puts `{tensor}` in {}, which does not hold it",
                            index.display(),
                            shard.display()
                        );
                    }
                    route.insert(tensor.clone(), i);
                }
            }
            None => {
                for (i, st) in mapped.iter().enumerate() {
                    for (name, _) in st.tensors() {
                        if let Some(j) = route.insert(name.clone(), i) {
                            bail!(
                                "tensor `{name}` is in both {} and {}, and no index says which to use",
                                names[j],
                                names[i]
                            );
                        }
                    }
                }
            }
        }
        Ok(Self {
            files: mapped,
            names,
            route,
        })
    }

    fn view(&self, name: &str) -> Result<(usize, safetensors::tensor::TensorView<'_>)> {
        let i = *self
            .route
            .get(name)
            .with_context(|| format!("tensor `{name}` is missing from the weights"))?;
        Ok((i, self.files[i].get(name)?))
    }
}

/// The VarBuilder backend: the routed tensor, checked, converted on its own.
impl SimpleBackend for Shards {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let t = self.get_unchecked(name, dtype, dev)?;
        if t.shape() != &s {
            return Err(candle_core::Error::Msg(format!(
                "tensor `{name}` has shape {:?}, the config implies {:?}",
                t.dims(),
                s.dims()
            )));
        }
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let (i, view) = self
            .view(name)
            .map_err(|e| candle_core::Error::Msg(format!("{e:#}")))?;
        let file_dtype = DType::try_from(view.dtype())?;
        if !file_dtype.is_float() {
            return Err(candle_core::Error::Msg(format!(
                "tensor `{name}` in {} is {file_dtype:?}: weights must be floating point (integer or quantized checkpoints are not supported)",
                self.names[i]
            )));
        }
        // In the file's dtype, straight from the map, then converted: one tensor's
        // worth of extra memory at a time.
        view.load(dev)?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.route.contains_key(name)
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
    let names: BTreeSet<&str> = shards.route.keys().map(String::as_str).collect();
    let config = files.config.display();
    let found_layers = layers_in(&names);
    if found_layers != cfg.num_hidden_layers {
        bail!(
            "{config}: field `num_hidden_layers` is {}, but the weights hold {found_layers} layers",
            cfg.num_hidden_layers
        );
    }
    let embed = shards.view("encoder.embed_tokens.weight")?.1;
    if embed.shape() != [cfg.vocab_size, cfg.hidden_size] {
        bail!(
            "{config}: fields `vocab_size` × `hidden_size` are {} × {}, but encoder.embed_tokens.weight is {:?}",
            cfg.vocab_size,
            cfg.hidden_size,
            embed.shape()
        );
    }
    let expected = expected_tensors(&cfg);
    let mut dtypes = BTreeSet::new();
    let mut unexpected = Vec::new();
    for name in &names {
        dtypes.insert(format!("{:?}", shards.view(name)?.1.dtype()));
        if !expected.contains(*name) {
            unexpected.push(name.to_string());
        }
    }
    if !unexpected.is_empty() && !opts.allow_unexpected {
        let shown: Vec<&str> = unexpected.iter().take(5).map(String::as_str).collect();
        bail!(
            "the weights hold {} tensors this architecture does not use ({}{}) : a different model, or a config.json that does not match it",
            unexpected.len(),
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
    // the models a CPU runs fast, not for ones whose weights alone fill memory.
    let transposed = device.is_cpu() && report.weight_bytes <= TRANSPOSE_BUDGET;
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

/// The weight files' dtype (the first tensor's), for `--dtype auto`.
pub fn file_dtype(files: &ModelFiles) -> Option<DType> {
    let p = files.weights.first()?;
    // SAFETY: mapped read-only for the duration of this call.
    let st = unsafe { MmapedSafetensors::new(p) }.ok()?;
    let (_, view) = st.tensors().into_iter().next()?;
    DType::try_from(view.dtype()).ok()
}
