//! Per-request committed KV cache: append (commit), read-only attend, truncate, drop.
//!
//! Each layer keeps one preallocated buffer `(kv_heads, capacity, head_dim)` for keys
//! (after RoPE) and one for values. The first `len` slots are committed; the slots after
//! them are scratch that a forward fills with its row's keys so attention reads
//! `[committed | row]` as one view, without copying the prefix. Rows that do not commit
//! leave `len` unchanged, so their scratch is simply overwritten later.

use anyhow::{ensure, Result};
use candle_core::{DType, Device, Tensor};

#[derive(Debug, Clone)]
struct LayerBuf {
    k: Tensor,
    v: Tensor,
}

/// The committed keys and values of one request, for every layer.
#[derive(Debug)]
pub struct KvCache {
    layers: Vec<Option<LayerBuf>>,
    len: usize,
    capacity: usize,
    /// Committed token ids, kept only by a backbone that reads them back (the
    /// simulator keys its answer on them); the real model leaves this empty.
    tokens: Vec<u32>,
    /// Length of the first commit (the prompt's prefill), where `commit_tokens` made it.
    first_commit: usize,
}

impl KvCache {
    /// An empty cache for a model with `num_layers` layers.
    pub fn new(num_layers: usize) -> Self {
        Self {
            layers: vec![None; num_layers],
            len: 0,
            capacity: 0,
            tokens: Vec::new(),
            first_commit: 0,
        }
    }

    /// Number of committed positions.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops committed positions from `new_len` on (the speculative crop).
    pub fn truncate(&mut self, new_len: usize) -> Result<()> {
        ensure!(
            new_len <= self.len,
            "cannot truncate a cache of length {} to {new_len}",
            self.len
        );
        self.len = new_len;
        self.tokens.truncate(new_len);
        Ok(())
    }

    /// Forgets everything (the buffers are kept for reuse).
    pub fn clear(&mut self) {
        self.len = 0;
        self.tokens.clear();
    }

    /// The committed token ids, where the backbone keeps them (`commit_tokens`).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// How many tokens the first `commit_tokens` committed (the prompt).
    pub fn first_commit(&self) -> usize {
        self.first_commit
    }

    /// Commits `tokens` by id alone (a backbone without keys and values: the simulator).
    pub fn commit_tokens(&mut self, tokens: &[u32]) {
        if self.len == 0 {
            self.first_commit = tokens.len();
        }
        self.tokens.truncate(self.len);
        self.tokens.extend_from_slice(tokens);
        self.len += tokens.len();
    }

    /// Committed keys and values of one layer, copied: `(kv_heads, len, head_dim)` each.
    pub fn layer_kv(&self, layer: usize) -> Result<Option<(Tensor, Tensor)>> {
        match self.layers.get(layer).and_then(|l| l.as_ref()) {
            Some(buf) if self.len > 0 => Ok(Some((
                buf.k.narrow(1, 0, self.len)?.copy()?,
                buf.v.narrow(1, 0, self.len)?.copy()?,
            ))),
            _ => Ok(None),
        }
    }

    pub(crate) fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Makes room for `extra` positions after the committed ones, growing by doubling.
    pub(crate) fn reserve(
        &mut self,
        extra: usize,
        kv_heads: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<()> {
        let needed = self.len + extra;
        if needed <= self.capacity && self.layers.iter().all(Option::is_some) {
            return Ok(());
        }
        let capacity = needed.max(self.capacity * 2).max(64).next_multiple_of(64);
        for layer in self.layers.iter_mut() {
            let k = Tensor::zeros((kv_heads, capacity, head_dim), dtype, device)?;
            let v = Tensor::zeros((kv_heads, capacity, head_dim), dtype, device)?;
            if let Some(old) = layer.as_ref() {
                if self.len > 0 {
                    k.slice_set(&old.k.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                    v.slice_set(&old.v.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                }
            }
            *layer = Some(LayerBuf { k, v });
        }
        self.capacity = capacity;
        Ok(())
    }

    /// Writes a row's `(kv_heads, T, head_dim)` keys and values after the committed ones
    /// and returns views of `[committed | row]`: `(kv_heads, len + T, head_dim)`.
    pub(crate) fn stage(&self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let t = k.dim(1)?;
        ensure!(
            self.len + t <= self.capacity,
            "kv cache has no room reserved"
        );
        let buf = self.layers[layer]
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("kv cache layer {layer} not allocated"))?;
        buf.k.slice_set(k, 1, self.len)?;
        buf.v.slice_set(v, 1, self.len)?;
        Ok((
            buf.k.narrow(1, 0, self.len + t)?,
            buf.v.narrow(1, 0, self.len + t)?,
        ))
    }

    /// Marks `t` staged positions as committed.
    pub(crate) fn advance(&mut self, t: usize) {
        self.len += t;
    }
}
