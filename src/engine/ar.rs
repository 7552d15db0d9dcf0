//! AR greedy decoding: one causal token per forward.

use std::time::Instant;

use anyhow::{ensure, Result};
use serde::Serialize;

use super::events::StopReason;
use super::Backbone;
use crate::model::{AttnRule, LogitSel, Row, RowBatch};

/// Tokens and timings of one generation.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub stop: StopReason,
    pub prompt_tokens: usize,
    /// Decode forwards (prefill excluded).
    pub decode_forwards: usize,
    pub prefill_secs: f64,
    pub decode_secs: f64,
}

impl Generation {
    /// Decode tokens per decode forward; the prefill's token is not a decode token.
    pub fn tpf(&self) -> f64 {
        let decode_tokens = self.tokens.len().saturating_sub(1);
        if self.decode_forwards == 0 {
            0.0
        } else {
            decode_tokens as f64 / self.decode_forwards as f64
        }
    }

    /// Generated tokens per second over prefill + decode.
    pub fn tokens_per_sec(&self) -> f64 {
        let secs = self.prefill_secs + self.decode_secs;
        if secs > 0.0 {
            self.tokens.len() as f64 / secs
        } else {
            0.0
        }
    }
}

/// Greedy AR decoding of `prompt`; `on_token` sees each token as it is chosen.
pub fn generate_ar(
    model: &dyn Backbone,
    prompt: &[u32],
    max_new_tokens: usize,
    eos: &[u32],
    mut on_token: impl FnMut(u32) -> Result<()>,
) -> Result<Generation> {
    let max_pos = model.config().max_position_embeddings;
    super::check_prompt_len(prompt.len(), max_pos)?;
    ensure!(max_new_tokens > 0, "max_new_tokens must be at least 1");
    let mut cache = model.new_cache();
    let start = Instant::now();
    let row = Row::new(0, prompt.to_vec(), AttnRule::Causal)
        .commit()
        .logits(LogitSel::Last);
    let logits = model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    let mut next = crate::model::backbone::argmax_no_mask(model.config(), &logits[0].get(0)?)?;
    let prefill_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut tokens = Vec::new();
    let mut forwards = 0;
    let stop = loop {
        tokens.push(next);
        on_token(next)?;
        if eos.contains(&next) {
            break StopReason::Eos;
        }
        if tokens.len() >= max_new_tokens {
            break StopReason::MaxTokens;
        }
        if cache.len() + 1 >= max_pos {
            break StopReason::Context;
        }
        let row = Row::new(0, vec![next], AttnRule::Causal)
            .commit()
            .logits(LogitSel::Last);
        let logits = model.forward(&RowBatch::single(row), &mut [&mut cache])?;
        forwards += 1;
        next = crate::model::backbone::argmax_no_mask(model.config(), &logits[0].get(0)?)?;
    };
    Ok(Generation {
        tokens,
        stop,
        prompt_tokens: prompt.len(),
        decode_forwards: forwards,
        prefill_secs,
        decode_secs: start.elapsed().as_secs_f64(),
    })
}
