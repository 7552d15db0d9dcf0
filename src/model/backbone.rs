//! The Nemotron-Labs-Diffusion backbone (a Ministral3 decoder) and its untied head,
//! run over a `RowBatch` under per-row attention rules.

use std::collections::HashMap;

use anyhow::{bail, ensure, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, VarBuilder};

use super::cache::KvCache;
use super::config::Config;
use super::lora::DraftLora;
use super::proj::Proj;
use super::rope::Rope;
use super::rows::{AttnRule, RowBatch};

/// RMSNorm with the fused kernel for inference and a differentiable path for training
/// (candle's fused `rms_norm` has no gradient).
#[derive(Debug, Clone)]
struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn new(size: usize, eps: f64, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            weight: vb.get_with_hints(size, "weight", candle_nn::Init::Const(1.0))?,
            eps,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(x, &self.weight, self.eps as f32)?)
    }

    fn forward_diff(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm_slow(
            x,
            &self.weight,
            self.eps as f32,
        )?)
    }
}

/// Per-forward facts shared by every layer.
struct FwdCtx {
    /// (N, head_dim / 2) for the packed tokens.
    cos: Tensor,
    sin: Tensor,
    /// (1, N, 1, 1) query multipliers: Llama-4 scale / sqrt(head_dim); `None` = uniform.
    q_scale: Option<Tensor>,
    /// Row layout: (offset into the packed tokens, length).
    spans: Vec<(usize, usize)>,
    /// Additive mask (T, P + T) per row, `None` when the row sees everything.
    masks: Vec<Option<Tensor>>,
    /// Packed indices of the tokens that take the draft LoRA.
    lora_idx: Option<Tensor>,
}

#[derive(Debug, Clone)]
struct Attention {
    q_proj: Proj,
    k_proj: Proj,
    v_proj: Proj,
    o_proj: Proj,
    num_heads: usize,
    num_kv_heads: usize,
    head_dim: usize,
}

impl Attention {
    fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let (h, hd) = (cfg.hidden_size, cfg.head_dim());
        let (nh, nkv) = (cfg.num_attention_heads, cfg.num_kv_heads());
        Ok(Self {
            q_proj: Proj::new(h, nh * hd, vb.pp("q_proj"))?,
            k_proj: Proj::new(h, nkv * hd, vb.pp("k_proj"))?,
            v_proj: Proj::new(h, nkv * hd, vb.pp("v_proj"))?,
            o_proj: Proj::new(nh * hd, h, vb.pp("o_proj"))?,
            num_heads: nh,
            num_kv_heads: nkv,
            head_dim: hd,
        })
    }

    /// x: (N, hidden) packed tokens of every row -> (N, hidden).
    fn forward(
        &self,
        x: &Tensor,
        ctx: &FwdCtx,
        rows: &RowBatch,
        caches: &[&mut KvCache],
        layer: usize,
        lora: Option<&DraftLora>,
    ) -> Result<Tensor> {
        let n = x.dim(0)?;
        let (nh, nkv, hd) = (self.num_heads, self.num_kv_heads, self.head_dim);
        let group = nh / nkv;
        // q, k: (1, N, heads, head_dim), rotated at absolute positions.
        let q = self.q_proj.forward(x)?.reshape((1, n, nh, hd))?;
        let k = self.k_proj.forward(x)?.reshape((1, n, nkv, hd))?;
        let v = self.v_proj.forward(x)?.reshape((n, nkv, hd))?;
        let q = candle_nn::rotary_emb::rope_thd(&q, &ctx.cos, &ctx.sin)?;
        let k = candle_nn::rotary_emb::rope_thd(&k, &ctx.cos, &ctx.sin)?;
        let q = match &ctx.q_scale {
            Some(s) => q.broadcast_mul(s)?,
            None => (q * (1.0 / (hd as f64).sqrt()))?,
        };
        let mut outs = Vec::with_capacity(rows.rows.len());
        let mut committed = Vec::new();
        for (ri, row) in rows.rows.iter().enumerate() {
            let (off, t) = ctx.spans[ri];
            // q_r: (kv_heads, group * T, head_dim); heads h = kv * group + g.
            let q_r = q
                .narrow(1, off, t)?
                .reshape((t, nkv, group, hd))?
                .permute((1, 2, 0, 3))?
                .contiguous()?
                .reshape((nkv, group * t, hd))?;
            let k_r = k
                .narrow(1, off, t)?
                .reshape((t, nkv, hd))?
                .transpose(0, 1)?
                .contiguous()?;
            let v_r = v.narrow(0, off, t)?.transpose(0, 1)?.contiguous()?;
            let cache = &caches[row.cache];
            // k_all, v_all: (kv_heads, P + T, head_dim).
            let (k_all, v_all) = cache.stage(layer, &k_r, &v_r)?;
            let keys = k_all.dim(1)?;
            // Scores, their softmax and the weighted values in f32, whatever the
            // compute dtype: a position's result then does not depend on how many
            // rows share the forward (bf16 rounding of partial results would).
            let f32_of = |t: &Tensor| t.to_dtype(DType::F32);
            let mut scores = f32_of(&q_r)?.matmul(&f32_of(&k_all)?.t()?)?;
            if let Some(mask) = &ctx.masks[ri] {
                scores = scores
                    .reshape((nkv, group, t, keys))?
                    .broadcast_add(mask)?
                    .reshape((nkv, group * t, keys))?;
            }
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let out = probs
                .matmul(&f32_of(&v_all)?)?
                .to_dtype(v_all.dtype())?
                .reshape((nkv, group, t, hd))?
                .permute((2, 0, 1, 3))?
                .reshape((t, nh * hd))?;
            outs.push(out);
            if row.commit {
                committed.push((row.cache, k_r, v_r));
            }
        }
        // Rows sharing a cache overwrote each other's scratch: restore the committing one.
        for (ci, k_r, v_r) in committed {
            caches[ci].stage(layer, &k_r, &v_r)?;
        }
        let attn = Tensor::cat(&outs, 0)?;
        let mut y = self.o_proj.forward(&attn)?;
        if let (Some(lora), Some(idx)) = (lora, &ctx.lora_idx) {
            let delta = lora.delta(layer, &attn.index_select(idx, 0)?)?;
            y = y.index_add(idx, &delta, 0)?;
        }
        Ok(y)
    }
}

impl Attention {
    /// Differentiable full-sequence attention for training. x: (B, T, hidden); cos, sin:
    /// (T, head_dim / 2); mask: additive (T, T); `lora`: the draft adapter, its layer and
    /// the leading positions it applies to (the noised half of a training sequence).
    fn forward_train(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
        lora: Option<(&DraftLora, usize, usize)>,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (nh, nkv, hd) = (self.num_heads, self.num_kv_heads, self.head_dim);
        let group = nh / nkv;
        // (B, heads, T, head_dim)
        let q = self
            .q_proj
            .forward(x)?
            .reshape((b, t, nh, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        let k = self
            .k_proj
            .forward(x)?
            .reshape((b, t, nkv, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        let v = self
            .v_proj
            .forward(x)?
            .reshape((b, t, nkv, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        let q = candle_nn::rotary_emb::rope_slow(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope_slow(&k, cos, sin)?;
        // GQA: q heads h = kv * group + g, as in inference.
        let expand = |x: Tensor| -> Result<Tensor> {
            Ok(x.unsqueeze(2)?
                .broadcast_as((b, nkv, group, t, hd))?
                .reshape((b, nh, t, hd))?)
        };
        let (k, v) = (expand(k)?, expand(v)?);
        let q = (q * (1.0 / (hd as f64).sqrt()))?;
        let scores = q.matmul(&k.t()?.contiguous()?)?;
        let probs = super::ops::masked_softmax(&scores, mask)?;
        let out = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, t, nh * hd))?;
        let y = self.o_proj.forward(&out)?;
        let Some((lora, layer, upto)) = lora else {
            return Ok(y);
        };
        let delta = lora.delta(layer, &out.narrow(1, 0, upto)?)?;
        let head = (y.narrow(1, 0, upto)? + delta)?;
        Ok(Tensor::cat(&[head, y.narrow(1, upto, t - upto)?], 1)?)
    }
}

#[derive(Debug, Clone)]
struct Mlp {
    gate_proj: Proj,
    up_proj: Proj,
    down_proj: Proj,
}

impl Mlp {
    fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            gate_proj: Proj::new(h, i, vb.pp("gate_proj"))?,
            up_proj: Proj::new(h, i, vb.pp("up_proj"))?,
            down_proj: Proj::new(i, h, vb.pp("down_proj"))?,
        })
    }

    /// SwiGLU: down(silu(gate(x)) * up(x)).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate_proj.forward(x)?.silu()?;
        let up = self.up_proj.forward(x)?;
        self.down_proj.forward(&(gate * up)?)
    }
}

#[derive(Debug, Clone)]
struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl DecoderLayer {
    fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let (h, eps) = (cfg.hidden_size, cfg.rms_norm_eps);
        Ok(Self {
            input_layernorm: RmsNorm::new(h, eps, vb.pp("input_layernorm"))?,
            self_attn: Attention::new(cfg, vb.pp("self_attn"))?,
            post_attention_layernorm: RmsNorm::new(h, eps, vb.pp("post_attention_layernorm"))?,
            mlp: Mlp::new(cfg, vb.pp("mlp"))?,
        })
    }
}

/// The whole model: `encoder.*` backbone, `diffusion_head`, optional draft LoRA.
#[derive(Debug, Clone)]
pub struct Model {
    cfg: Config,
    embed_tokens: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    head: Proj,
    rope: Rope,
    lora: Option<DraftLora>,
    device: Device,
    dtype: DType,
}

impl Model {
    /// Builds the model from a root `VarBuilder` holding `encoder.*` and `diffusion_head.*`.
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let enc = vb.pp("encoder");
        let embed_tokens =
            candle_nn::embedding(cfg.vocab_size, cfg.hidden_size, enc.pp("embed_tokens"))?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| DecoderLayer::new(cfg, enc.pp("layers").pp(i)))
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, enc.pp("norm"))?;
        let head = if cfg.tie_word_embeddings {
            Proj::from_weight(embed_tokens.embeddings().clone())
        } else {
            Proj::new(cfg.hidden_size, cfg.vocab_size, vb.pp("diffusion_head"))?
        };
        Ok(Self {
            cfg: cfg.clone(),
            embed_tokens,
            layers,
            norm,
            head,
            rope: Rope::new(cfg),
            lora: None,
            device: vb.device().clone(),
            dtype: vb.dtype(),
        })
    }

    /// Ready for decoding: projections may stream a few rows (`matvec`); with
    /// `transposed` they also keep their CPU-friendly transposed copy (see `proj.rs`).
    /// Training uses the model as built.
    pub fn for_inference(mut self, transposed: bool) -> Result<Self> {
        let ready = |p: &Proj| -> Result<Proj> {
            if transposed {
                p.clone().for_inference()
            } else {
                Ok(p.clone().streaming())
            }
        };
        for l in &mut self.layers {
            let a = &mut l.self_attn;
            for p in [&mut a.q_proj, &mut a.k_proj, &mut a.v_proj, &mut a.o_proj] {
                *p = ready(p)?;
            }
            let m = &mut l.mlp;
            for p in [&mut m.gate_proj, &mut m.up_proj, &mut m.down_proj] {
                *p = ready(p)?;
            }
        }
        self.head = ready(&self.head)?;
        Ok(self)
    }

    /// Attaches the draft-only adapter.
    pub fn with_lora(mut self, lora: DraftLora) -> Self {
        self.lora = Some(lora);
        self
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn has_lora(&self) -> bool {
        self.lora.is_some()
    }

    pub fn rope(&self) -> &Rope {
        &self.rope
    }

    /// A fresh, empty cache for one request.
    pub fn new_cache(&self) -> KvCache {
        KvCache::new(self.cfg.num_hidden_layers)
    }

    /// Runs every row of `batch` in one forward. `caches[row.cache]` is the committed
    /// prefix each row attends to; committing rows append their keys and values.
    /// Returns, per row, f32 logits `(selected positions, vocab)` (possibly empty).
    /// On error no cache changes length.
    pub fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>> {
        self.check(batch, caches)?;
        let (nkv, hd) = (self.cfg.num_kv_heads(), self.cfg.head_dim());
        let mut extra: HashMap<usize, usize> = HashMap::new();
        for row in &batch.rows {
            let e = extra.entry(row.cache).or_default();
            *e = (*e).max(row.len());
        }
        for (&ci, &t) in &extra {
            caches[ci].reserve(t, nkv, hd, self.dtype, &self.device)?;
        }

        let mut ids = Vec::with_capacity(batch.num_tokens());
        let mut positions = Vec::with_capacity(batch.num_tokens());
        let mut spans = Vec::with_capacity(batch.rows.len());
        let mut masks = Vec::with_capacity(batch.rows.len());
        let mut lora_idx = Vec::new();
        for row in &batch.rows {
            let p = caches[row.cache].len();
            let off = ids.len();
            spans.push((off, row.len()));
            ids.extend_from_slice(&row.tokens);
            positions.extend(p..p + row.len());
            masks.push(self.mask(row.rule, p, row.len())?);
            if let (Some(from), true) = (row.lora_from, self.lora.is_some()) {
                lora_idx.extend((off + from..off + row.len()).map(|i| i as u32));
            }
        }
        let n = ids.len();
        let (cos, sin) = self.rope.cos_sin(&positions, &self.device)?;
        let (cos, sin) = (cos.to_dtype(self.dtype)?, sin.to_dtype(self.dtype)?);
        let inv_sqrt = 1.0 / (hd as f32).sqrt();
        let q_scale = match self.rope.query_scales(&positions) {
            Some(s) => {
                let s: Vec<f32> = s.into_iter().map(|x| x * inv_sqrt).collect();
                Some(Tensor::from_vec(s, (1, n, 1, 1), &self.device)?.to_dtype(self.dtype)?)
            }
            None => None,
        };
        let lora_idx = if lora_idx.is_empty() {
            None
        } else {
            let len = lora_idx.len();
            Some(Tensor::from_vec(lora_idx, len, &self.device)?)
        };
        let ctx = FwdCtx {
            cos,
            sin,
            q_scale,
            spans,
            masks,
            lora_idx,
        };

        let ids_t = Tensor::from_vec(ids, n, &self.device)?;
        let mut x = self.embed_tokens.forward(&ids_t)?;
        for (li, layer) in self.layers.iter().enumerate() {
            let h = layer.input_layernorm.forward(&x)?;
            let h = layer
                .self_attn
                .forward(&h, &ctx, batch, caches, li, self.lora.as_ref())?;
            x = (x + h)?;
            let h = layer
                .mlp
                .forward(&layer.post_attention_layernorm.forward(&x)?)?;
            x = (x + h)?;
        }
        for row in &batch.rows {
            if row.commit {
                caches[row.cache].advance(row.len());
            }
        }
        self.logits(&x, batch, &ctx.spans)
    }

    /// Differentiable forward for training (no cache): ids (B, T) at `positions`, one
    /// additive (T, T) mask shared by the batch. With `lora_upto`, the attached draft
    /// adapter applies to the first that many positions. Returns logits (B, T, vocab).
    pub fn forward_train(
        &self,
        ids: &Tensor,
        positions: &[usize],
        mask: &Tensor,
        lora_upto: Option<usize>,
    ) -> Result<Tensor> {
        let (cos, sin) = self.rope.cos_sin(positions, &self.device)?;
        let mut x = self.embed_tokens.forward(ids)?;
        for (li, layer) in self.layers.iter().enumerate() {
            let lora = match (&self.lora, lora_upto) {
                (Some(l), Some(upto)) => Some((l, li, upto)),
                _ => None,
            };
            let h = layer.input_layernorm.forward_diff(&x)?;
            x = (&x + layer.self_attn.forward_train(&h, &cos, &sin, mask, lora)?)?;
            let h = layer.post_attention_layernorm.forward_diff(&x)?;
            x = (&x + layer.mlp.forward(&h)?)?;
        }
        let h = self.norm.forward_diff(&x)?;
        self.head.forward(&h)
    }

    /// Head over the selected positions only: one vocab-wide matmul for the whole batch.
    fn logits(
        &self,
        x: &Tensor,
        batch: &RowBatch,
        spans: &[(usize, usize)],
    ) -> Result<Vec<Tensor>> {
        let mut idx = Vec::new();
        let mut counts = Vec::with_capacity(batch.rows.len());
        for (row, &(off, len)) in batch.rows.iter().zip(spans) {
            let sel = row.logits.indices(len);
            counts.push(sel.len());
            idx.extend(sel.into_iter().map(|i| (off + i) as u32));
        }
        let vocab = self.cfg.vocab_size;
        if idx.is_empty() {
            let empty = Tensor::zeros((0, vocab), DType::F32, &self.device)?;
            return Ok(vec![empty; batch.rows.len()]);
        }
        let m = idx.len();
        let idx = Tensor::from_vec(idx, m, &self.device)?;
        let h = self.norm.forward(&x.index_select(&idx, 0)?)?;
        let all = self.head.forward(&h)?.to_dtype(DType::F32)?;
        let mut out = Vec::with_capacity(counts.len());
        let mut start = 0;
        for c in counts {
            out.push(all.narrow(0, start, c)?);
            start += c;
        }
        Ok(out)
    }

    /// Additive mask (T, P + T) for one row, or `None` when the row sees everything.
    fn mask(&self, rule: AttnRule, prefix: usize, t: usize) -> Result<Option<Tensor>> {
        if rule.is_unmasked(t) {
            return Ok(None);
        }
        let keys = prefix + t;
        let mut m = vec![0f32; t * keys];
        for q in 0..t {
            for u in 0..t {
                if !rule.allows(q, u) {
                    m[q * keys + prefix + u] = f32::NEG_INFINITY;
                }
            }
        }
        // f32: the scores it is added to are accumulated in f32 whatever the weights.
        let m = Tensor::from_vec(m, (t, keys), &self.device)?;
        Ok(Some(m))
    }

    fn check(&self, batch: &RowBatch, caches: &[&mut KvCache]) -> Result<()> {
        ensure!(!batch.rows.is_empty(), "a forward needs at least one row");
        let vocab = self.cfg.vocab_size;
        let max_pos = self.cfg.max_position_embeddings;
        let mut committing = std::collections::HashSet::new();
        for (i, row) in batch.rows.iter().enumerate() {
            ensure!(!row.is_empty(), "row {i} has no tokens");
            let cache = caches.get(row.cache).with_context(|| {
                format!("row {i} names cache {} of {}", row.cache, caches.len())
            })?;
            ensure!(
                cache.num_layers() == self.cfg.num_hidden_layers,
                "row {i}: cache was made for another model"
            );
            if let Some(&bad) = row.tokens.iter().find(|&&t| t as usize >= vocab) {
                bail!("row {i}: token id {bad} is not below the vocabulary size {vocab}");
            }
            let end = cache.len() + row.len();
            ensure!(
                end <= max_pos,
                "row {i}: positions up to {end} exceed max_position_embeddings ({max_pos})"
            );
            if let AttnRule::CausalThenBlock { causal_len } = row.rule {
                ensure!(
                    causal_len <= row.len(),
                    "row {i}: causal_len {causal_len} > row length"
                );
            }
            if let Some(from) = row.lora_from {
                ensure!(from <= row.len(), "row {i}: lora_from {from} > row length");
            }
            if row.commit {
                ensure!(
                    committing.insert(row.cache),
                    "row {i}: two rows commit to cache {} in one forward",
                    row.cache
                );
            }
        }
        Ok(())
    }

    /// Greedy argmax of one logits row, never choosing the mask token.
    pub fn argmax_no_mask(&self, logits: &Tensor) -> Result<u32> {
        argmax_no_mask(&self.cfg, logits)
    }
}

/// The highest logit other than the mask token's, of one position's logits.
pub fn argmax_no_mask(cfg: &Config, logits: &Tensor) -> Result<u32> {
    {
        let v: Vec<f32> = logits.to_dtype(DType::F32)?.to_vec1()?;
        let mask = cfg.mask_token_id() as usize;
        let mut best = (0usize, f32::NEG_INFINITY);
        for (i, &x) in v.iter().enumerate() {
            if i != mask && x > best.1 {
                best = (i, x);
            }
        }
        anyhow::ensure!(
            best.1.is_finite() && v.iter().all(|x| !x.is_nan()),
            "the model produced non-finite logits (NaN or infinity): its weights hold NaN/inf values, or config.json's numbers (rms_norm_eps, rope parameters) are unusable"
        );
        Ok(best.0 as u32)
    }
}
