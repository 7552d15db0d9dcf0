//! The weight files: safetensors headers read and checked, each tensor routed to the
//! shard that holds it (the index's choice when there is one), and read on its own,
//! converted to the compute dtype a slice at a time as it is read. Nothing holds a
//! second copy of the weights: the peak above the model's own memory is one slice.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, ensure, Context, Result};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use half::{bf16, f16};

use super::ModelFiles;

/// Largest safetensors header read (real ones are a few MB).
const MAX_HEADER: u64 = 100 << 20;
/// Bytes converted at a time.
const SLICE: usize = 8 << 20;

/// Where one tensor is and what it holds.
#[derive(Debug, Clone)]
pub struct TensorEntry {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Byte range in its file.
    pub start: u64,
    pub len: u64,
    pub shard: usize,
}

/// Opened shards and where each tensor is.
pub struct Shards {
    files: Vec<Mutex<File>>,
    pub names: Vec<String>,
    pub entries: HashMap<String, TensorEntry>,
}

fn dtype_of(s: &str) -> Option<DType> {
    Some(match s {
        "F32" => DType::F32,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F64" => DType::F64,
        "U8" => DType::U8,
        "U32" => DType::U32,
        "I16" => DType::I16,
        "I32" => DType::I32,
        "I64" => DType::I64,
        _ => return None,
    })
}

/// The tensors of one safetensors file, checked against its size.
fn header(file: &mut File, name: &str, shard: usize) -> Result<Vec<(String, TensorEntry)>> {
    let size = file.metadata()?.len();
    let mut n = [0u8; 8];
    file.read_exact(&mut n)
        .with_context(|| format!("{name}: too short for a safetensors file"))?;
    let n = u64::from_le_bytes(n);
    ensure!(
        n <= MAX_HEADER && 8 + n <= size,
        "{name}: the header claims {n} bytes in a file of {size}"
    );
    let mut text = vec![0u8; n as usize];
    file.read_exact(&mut text)?;
    let v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&text)
        .with_context(|| format!("{name}: the header is not a JSON object"))?;
    let data = size - 8 - n;
    let mut out = Vec::new();
    for (tensor, e) in v {
        if tensor == "__metadata__" {
            continue;
        }
        let bad = |what: &str| anyhow::anyhow!("{name}: tensor `{tensor}`: {what}");
        let dt = e["dtype"].as_str().ok_or_else(|| bad("no dtype"))?;
        let dtype = dtype_of(dt).ok_or_else(|| bad(&format!("dtype {dt} is not supported")))?;
        let shape: Vec<usize> = e["shape"]
            .as_array()
            .ok_or_else(|| bad("no shape"))?
            .iter()
            .map(|d| {
                d.as_u64()
                    .map(|d| d as usize)
                    .ok_or_else(|| bad("a bad dimension"))
            })
            .collect::<Result<_>>()?;
        let offs = e["data_offsets"]
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| bad("no data_offsets"))?;
        let (a, b) = (
            offs[0].as_u64().ok_or_else(|| bad("a bad offset"))?,
            offs[1].as_u64().ok_or_else(|| bad("a bad offset"))?,
        );
        let numel = shape
            .iter()
            .try_fold(1u64, |p, &d| p.checked_mul(d as u64))
            .ok_or_else(|| bad("its shape overflows"))?;
        let want = numel
            .checked_mul(dtype.size_in_bytes() as u64)
            .ok_or_else(|| bad("its size overflows"))?;
        ensure!(
            a <= b && b <= data && b - a == want,
            "{name}: tensor `{tensor}`: data_offsets {a}..{b} do not hold a {shape:?} {dt} tensor in {data} bytes of data"
        );
        out.push((
            tensor,
            TensorEntry {
                dtype,
                shape,
                start: 8 + n + a,
                len: want,
                shard,
            },
        ));
    }
    // Two tensors sharing bytes would load the same numbers twice (a hand-edited or
    // corrupt header): safetensors files lay their tensors end to end.
    let mut spans: Vec<(u64, u64, &str)> = out
        .iter()
        .filter(|(_, e)| e.len > 0)
        .map(|(t, e)| (e.start, e.start + e.len, t.as_str()))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        ensure!(
            w[1].0 >= w[0].1,
            "{name}: tensors `{}` and `{}` overlap in the file (bytes {}..{} and {}..{})",
            w[0].2,
            w[1].2,
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
    Ok(out)
}

impl Shards {
    /// Opens every weight file; routes each tensor to the shard the index names, or to
    /// its only shard (a tensor in two shards without an index is an error).
    pub fn open(files: &ModelFiles) -> Result<Self> {
        let mut opened = Vec::new();
        let mut names = Vec::new();
        let mut found: Vec<Vec<(String, TensorEntry)>> = Vec::new();
        for (i, p) in files.weights.iter().enumerate() {
            let name = p.display().to_string();
            let mut f = File::open(p).with_context(|| format!("cannot open weights {name}"))?;
            found.push(header(&mut f, &name, i)?);
            opened.push(Mutex::new(f));
            names.push(name);
        }
        let mut entries: HashMap<String, TensorEntry> = HashMap::new();
        match &files.index {
            Some((index, map)) => {
                let at = |shard: &PathBuf| files.weights.iter().position(|w| w == shard);
                for (tensor, shard) in map {
                    let i = at(shard).with_context(|| {
                        format!(
                            "{}: shard {} is not loaded",
                            index.display(),
                            shard.display()
                        )
                    })?;
                    let e = found[i]
                        .iter()
                        .find(|(n, _)| n == tensor)
                        .map(|(_, e)| e.clone())
                        .with_context(|| {
                            format!(
                                "{}: `weight_map` puts `{tensor}` in {}, which does not hold it",
                                index.display(),
                                shard.display()
                            )
                        })?;
                    entries.insert(tensor.clone(), e);
                }
            }
            None => {
                for list in found {
                    for (tensor, e) in list {
                        if let Some(prev) = entries.get(&tensor) {
                            bail!(
                                "tensor `{tensor}` is in both {} and {}, and no index says which to use",
                                names[prev.shard],
                                names[e.shard]
                            );
                        }
                        entries.insert(tensor, e);
                    }
                }
            }
        }
        Ok(Self {
            files: opened,
            names,
            entries,
        })
    }

    pub fn entry(&self, name: &str) -> Result<&TensorEntry> {
        self.entries
            .get(name)
            .with_context(|| format!("tensor `{name}` is missing from the weights"))
    }

    /// Reads tensor `name` as `dtype` onto `dev`, a slice at a time.
    pub fn read(&self, name: &str, dtype: DType, dev: &Device) -> Result<Tensor> {
        let e = self.entry(name)?;
        let file = &self.names[e.shard];
        if !e.dtype.is_float() {
            bail!(
                "tensor `{name}` in {file} is {:?}: weights must be floating point (integer or quantized checkpoints are not supported)",
                e.dtype
            );
        }
        let mut f = self.files[e.shard]
            .lock()
            .map_err(|_| anyhow::anyhow!("{file}: lock poisoned"))?;
        f.seek(SeekFrom::Start(e.start))?;
        let n = e.len as usize / e.dtype.size_in_bytes();
        let mut buf = vec![0u8; SLICE.min(e.len as usize).max(1)];
        let mut left = e.len as usize;
        // NaN or infinity in a weight would surface later as non-finite logits far
        // from the file at fault.
        let mut bad = Bad::default();
        macro_rules! convert {
            ($t:ty, $from_f32:expr) => {{
                let mut out: Vec<$t> = Vec::with_capacity(n);
                while left > 0 {
                    let take = left.min(buf.len());
                    let chunk = &mut buf[..take];
                    f.read_exact(chunk)
                        .with_context(|| format!("{file}: cannot read tensor `{name}`"))?;
                    push_as(e.dtype, chunk, &mut out, &mut bad, $from_f32);
                    left -= take;
                }
                if let Some(first) = bad.first {
                    bail!(
                        "{file}: tensor `{name}` holds {} (the first at element {first}): the file is corrupt",
                        match bad.count {
                            1 => "a NaN or infinite value".to_string(),
                            n => format!("{n} NaN or infinite values"),
                        }
                    );
                }
                Tensor::from_vec(out, e.shape.as_slice(), dev)?
            }};
        }
        let t = match dtype {
            DType::F32 => convert!(f32, |x: f32| x),
            DType::BF16 => convert!(bf16, bf16::from_f32),
            DType::F16 => convert!(f16, f16::from_f32),
            other => bail!("compute dtype {other:?} is not supported"),
        };
        Ok(t)
    }
}

/// Non-finite values met while reading a tensor.
#[derive(Debug, Default)]
struct Bad {
    count: usize,
    /// Index of the first, in the tensor.
    first: Option<usize>,
}

/// Appends the values of `bytes` (little-endian `from`) to `out`, converted, counting
/// the non-finite ones in `bad`. Values of the same dtype are copied exactly (bf16 →
/// bf16 goes through f32, which holds every bf16 and f16 value).
fn push_as<T>(from: DType, bytes: &[u8], out: &mut Vec<T>, bad: &mut Bad, conv: impl Fn(f32) -> T) {
    let mut push = |x: f32| {
        if !x.is_finite() {
            bad.first.get_or_insert(out.len());
            bad.count += 1;
        }
        out.push(conv(x));
    };
    match from {
        DType::F32 => bytes
            .chunks_exact(4)
            .for_each(|b| push(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::BF16 => bytes
            .chunks_exact(2)
            .for_each(|b| push(bf16::from_le_bytes([b[0], b[1]]).to_f32())),
        DType::F16 => bytes
            .chunks_exact(2)
            .for_each(|b| push(f16::from_le_bytes([b[0], b[1]]).to_f32())),
        DType::F64 => bytes.chunks_exact(8).for_each(|b| {
            push(f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
        }),
        _ => {}
    }
}

/// The VarBuilder backend: the routed tensor, checked, read on its own.
impl SimpleBackend for Shards {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let e = self
            .entry(name)
            .map_err(|e| candle_core::Error::Msg(format!("{e:#}")))?;
        if e.shape != s.dims() {
            return Err(candle_core::Error::Msg(format!(
                "tensor `{name}` has shape {:?}, the config implies {:?}",
                e.shape,
                s.dims()
            )));
        }
        self.get_unchecked(name, dtype, dev)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.read(name, dtype, dev)
            .map_err(|e| candle_core::Error::Msg(format!("{e:#}")))
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}
