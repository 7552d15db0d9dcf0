//! Measuring a cost profile: forward latency over a grid of committed-cache lengths ×
//! rows × query tokens (`specscope profile`), this machine's memory bandwidth, and the
//! bytes a forward must read at least.

use std::time::Instant;

use anyhow::{ensure, Context, Result};

use super::ProfilePoint;
use crate::model::synthetic::Rng;
use crate::model::{signals, AttnRule, Config, KvCache, LogitSel, Model, Row, RowBatch};

/// Forwards of a point run before its sample is timed (the change-of-shape transient).
pub const UNTIMED_FORWARDS: usize = 3;
/// Forwards of a point in one timed sample.
pub const TIMED_FORWARDS: usize = 3;

/// The points to time: every committed-cache length × rows × tokens, `repeats`
/// samples each.
#[derive(Debug, Clone)]
pub struct Grid {
    pub cache: Vec<usize>,
    pub rows: Vec<usize>,
    pub tokens: Vec<usize>,
    pub repeats: usize,
}

/// One timed point: its latency, and what the logits statistics read into host
/// memory per forward (all rows).
#[derive(Debug, Clone)]
pub struct Timed {
    pub point: ProfilePoint,
    pub host_bytes_per_forward: f64,
}

impl Grid {
    /// Times every point on `model`, in the grid's order (cache, then rows, then
    /// tokens). One sample per point per pass, the passes alternating in direction, so
    /// that the machine's drift spreads over every point instead of a run of them. A
    /// sample is the mean of a short run of forwards of that point after untimed ones:
    /// while decoding, forwards of one shape follow each other, and on a CPU the first
    /// few after a change of shape are slower (about 1.3 ms against 1.0 for a 1-token
    /// forward of the bundled model), so timing the first after a change overprices
    /// the small forwards that AR steps run back to back.
    pub fn time(&self, model: &Model) -> Result<Vec<Timed>> {
        ensure!(self.repeats > 0, "--repeats must be at least 1");
        let cfg = model.config();
        let longest = self.cache.iter().max().copied().unwrap_or(0)
            + self.tokens.iter().max().copied().unwrap_or(0);
        ensure!(
            longest <= cfg.max_position_embeddings,
            "--cache and --tokens reach {longest} positions: the model's context window is {}",
            cfg.max_position_embeddings
        );
        let mask = cfg.mask_token_id();
        let max_rows = self.rows.iter().copied().max().unwrap_or(1);
        // Caches per committed length; every forward below is read-only on them.
        let mut caches = Vec::with_capacity(self.cache.len());
        for &cache_len in &self.cache {
            let c = (0..max_rows)
                .map(|i| prefill(model, cache_len, i as u64))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("prefilling caches of {cache_len} tokens"))?;
            caches.push(c);
        }
        // (cache index, rows, tokens, batch)
        let mut grid = Vec::new();
        for ci in 0..self.cache.len() {
            for &rows in &self.rows {
                for &tokens in &self.tokens {
                    let batch = RowBatch::new(
                        (0..rows)
                            .map(|r| {
                                Row::new(r, vec![7; tokens], AttnRule::Causal).logits(LogitSel::All)
                            })
                            .collect(),
                    );
                    grid.push((ci, rows, tokens, batch));
                }
            }
        }
        let mut times = vec![Vec::with_capacity(self.repeats); grid.len()];
        let mut reads = vec![signals::HostReads::default(); grid.len()];
        for pass in 0..self.repeats {
            let order: Vec<usize> = if pass % 2 == 0 {
                (0..grid.len()).collect()
            } else {
                (0..grid.len()).rev().collect()
            };
            for k in order {
                let (ci, _, _, batch) = &grid[k];
                let mut refs: Vec<&mut KvCache> = caches[*ci].iter_mut().collect();
                let mut t = Instant::now();
                let mut before = signals::HostReads::now();
                for n in 0..UNTIMED_FORWARDS + TIMED_FORWARDS {
                    if n == UNTIMED_FORWARDS {
                        t = Instant::now();
                        before = signals::HostReads::now();
                    }
                    // As the engine pays for a forward: the logits turned into signals too.
                    for logits in model.forward(batch, &mut refs)? {
                        signals::signals(&logits, mask)?;
                    }
                }
                times[k].push(t.elapsed().as_secs_f64() * 1e3 / TIMED_FORWARDS as f64);
                reads[k] = signals::HostReads::since(before);
            }
        }
        Ok(grid
            .into_iter()
            .zip(times)
            .zip(reads)
            .map(|(((ci, rows, tokens, _), mut ms), read)| {
                ms.sort_by(f64::total_cmp);
                Timed {
                    point: ProfilePoint {
                        cache_len: self.cache[ci],
                        rows,
                        tokens,
                        median_ms: ms[ms.len() / 2],
                        min_ms: ms[0],
                    },
                    host_bytes_per_forward: read.bytes as f64 / TIMED_FORWARDS as f64,
                }
            })
            .collect())
    }
}

/// A cache of `len` random committed tokens.
fn prefill(model: &Model, len: usize, seed: u64) -> Result<KvCache> {
    let mut cache = model.new_cache();
    let vocab = model.config().vocab_size as u64;
    let mut rng = Rng::new(seed);
    let ids: Vec<u32> = (0..len).map(|_| (rng.next_u64() % vocab) as u32).collect();
    for chunk in ids.chunks(256) {
        let row = Row::new(0, chunk.to_vec(), AttnRule::Causal).commit();
        model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    }
    Ok(cache)
}

/// This machine's memory bandwidth in GB/s: the best of a few parallel streaming reads
/// of a buffer far larger than the caches (what one token's forward must do with the
/// weights).
pub fn memory_bandwidth() -> f64 {
    use rayon::prelude::*;
    const FLOATS: usize = 1 << 27; // 512 MiB
    let buf = vec![1f32; FLOATS];
    let mut best = 0f64;
    for _ in 0..4 {
        let t = Instant::now();
        let sum: f32 = buf
            .par_chunks(1 << 16)
            .map(|c| {
                // 64 independent sums: 8 were one chain of vector adds, bound by the
                // adds' latency (about 30 GB/s a core) rather than by memory.
                let mut acc = [0f32; 64];
                for x in c.chunks_exact(64) {
                    for k in 0..64 {
                        acc[k] += x[k];
                    }
                }
                acc.iter().sum::<f32>()
            })
            .sum();
        std::hint::black_box(sum);
        best = best.max((FLOATS * 4) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Bytes a forward of `rows` rows of `tokens` tokens after `cache_len` cached ones must
/// read at least: the weights once, each row's keys and values.
pub fn bytes_read(
    cfg: &Config,
    dtype: candle_core::DType,
    rows: usize,
    tokens: usize,
    cache_len: usize,
) -> f64 {
    let size = dtype.size_in_bytes() as f64;
    let kv = (rows
        * cfg.num_hidden_layers
        * (cache_len + tokens)
        * cfg.num_kv_heads()
        * cfg.head_dim()
        * 2) as f64;
    (cfg.weights_read_per_forward() as f64 + kv) * size
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::synthetic::{build_model, Spec};

    /// Every point of the grid, in its order, each timed `repeats` times (the minimum
    /// at most the median) with the logits read into host memory; a grid past the
    /// context window is refused before anything runs.
    #[test]
    fn a_grid_times_every_point_in_order() {
        let model = build_model(&Spec::toy(), &candle_core::Device::Cpu).unwrap();
        let grid = Grid {
            cache: vec![0, 16],
            rows: vec![1, 2],
            tokens: vec![1, 4],
            repeats: 3,
        };
        let timed = grid.time(&model).unwrap();
        let shapes: Vec<(usize, usize, usize)> = timed
            .iter()
            .map(|t| (t.point.cache_len, t.point.rows, t.point.tokens))
            .collect();
        let mut want = Vec::new();
        for c in [0, 16] {
            for r in [1, 2] {
                for t in [1, 4] {
                    want.push((c, r, t));
                }
            }
        }
        assert_eq!(shapes, want);
        for t in &timed {
            let p = &t.point;
            assert!(p.min_ms > 0.0 && p.min_ms <= p.median_ms, "{p:?}");
            assert!(t.host_bytes_per_forward > 0.0, "{t:?}");
        }
        let window = model.config().max_position_embeddings;
        let past = Grid {
            cache: vec![window],
            ..grid
        };
        let err = past.time(&model).unwrap_err().to_string();
        assert!(err.contains("context window"), "{err}");
    }
}
