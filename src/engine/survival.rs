//! Counterfactual rounds for the survival tables: from the same committed prefix, draft
//! and verify every tabled B (default {4, 8, 16, 32}) in one forward each, record each
//! A_B, then advance with one of them (chosen at random so every stratum gets rounds).

use std::collections::BTreeMap;

use anyhow::{ensure, Result};

use super::policy::{verify_entropy, History, RoundOutcome, SurvivalSample};
use super::round;
use super::signals;
use super::Backbone;
use crate::model::{AttnRule, LogitSel, Row, RowBatch};
use crate::rng::Rng;

/// Collects samples from greedy decoding of `prompt` (at most `max_new_tokens`) at
/// every block size of `blocks` of at least 2. A 1 in `blocks` makes some canonical
/// rounds AR steps (no table: one token exactly), so that the rounds after them, whose
/// signal comes from one verifier position, get their own stratum `b1_full`.
pub fn collect(
    model: &dyn Backbone,
    prompt: &[u32],
    max_new_tokens: usize,
    seed: u64,
    blocks: &[usize],
) -> Result<Vec<SurvivalSample>> {
    let ar_steps = blocks.contains(&1);
    let blocks: Vec<usize> = blocks.iter().copied().filter(|&b| b >= 2).collect();
    ensure!(
        !blocks.is_empty(),
        "survival tables need a block size of at least 2 (got {blocks:?})"
    );
    let widest = blocks.iter().copied().max().unwrap_or(2);
    let cfg = model.config();
    let (mask, eos, max_pos) = (
        cfg.mask_token_id(),
        cfg.eos_token_ids(),
        cfg.max_position_embeddings,
    );
    let mut rng = Rng::new(seed);
    let mut cache = model.new_cache();
    let row = Row::new(0, prompt.to_vec(), AttnRule::Causal)
        .commit()
        .logits(LogitSel::Last);
    let logits = model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    let mut seed_tok = signals::signals(&logits[0], mask)?[0].argmax;
    let mut produced = 1;
    let mut history = History::default();
    let mut samples = Vec::new();
    while produced < max_new_tokens && !eos.contains(&seed_tok) && cache.len() + widest < max_pos {
        // Drafts for every B in one forward.
        let dl = model.forward(
            &RowBatch::new(shadow_drafts(seed_tok, mask, &blocks)),
            &mut [&mut cache],
        )?;
        let drafted: Vec<Vec<u32>> = dl
            .iter()
            .map(|l| {
                let mut block = vec![seed_tok];
                block.extend(signals::signals(l, mask)?.iter().map(|s| s.argmax));
                Ok(block)
            })
            .collect::<Result<_>>()?;
        // Verify every B; the canonical one commits (index blocks.len(): an AR step,
        // which commits the seed of row 0: position 0 is the same in every causal row).
        let choices = blocks.len() + usize::from(ar_steps);
        let canonical = (rng.next_u64() % choices as u64) as usize;
        let ar_step = canonical == blocks.len();
        let rows = shadow_verifies(&drafted, |k| k == canonical || (ar_step && k == 0));
        let ctx = cache.len();
        let vl = model.forward(&RowBatch::new(rows), &mut [&mut cache])?;
        let mut advance = BTreeMap::new();
        let mut canon = None;
        for (k, (block, l)) in drafted.iter().zip(&vl).enumerate() {
            let sig = signals::signals(l, mask)?;
            let toks: Vec<u32> = sig.iter().map(|s| s.argmax).collect();
            let v = round::verify(block, &toks);
            // Positions after an accepted EOS are not part of any answer.
            let (kept, _) = round::truncate_emitted(v.emitted(), &eos, usize::MAX);
            advance.insert(blocks[k], kept.len());
            if k == canonical {
                canon = Some((v, sig));
            } else if ar_step && k == 0 {
                // The AR step: the verifier's token after the seed, nothing drafted.
                let step = round::verify(&block[..1], &toks[..1]);
                canon = Some((step, sig[..1].to_vec()));
            }
        }
        samples.push(SurvivalSample {
            signal: history.signal(),
            stratum: history.stratum(),
            advance,
        });
        let Some((v, sig)) = canon else { break };
        cache.truncate(ctx + v.advance())?;
        let b = if ar_step { 1 } else { blocks[canonical] };
        history.push(RoundOutcome {
            block: b,
            advance: v.advance(),
            full: v.first_reject.is_none(),
            verify_entropy: verify_entropy(
                &sig.iter().map(|s| s.entropy).collect::<Vec<_>>(),
                v.accepted,
            ),
        });
        let emitted = v.emitted();
        if emitted.iter().any(|t| eos.contains(t)) {
            break;
        }
        produced += emitted.len();
        seed_tok = v.bonus;
    }
    Ok(samples)
}

/// A same-state shadow's draft forward: `[seed, MASK × (B−1)]` for every B of `blocks`,
/// one bidirectional row each through the draft LoRA, logits for the drafted positions.
pub fn shadow_drafts(seed: u32, mask: u32, blocks: &[usize]) -> Vec<Row> {
    blocks
        .iter()
        .map(|&b| {
            let mut t = vec![seed];
            t.extend(std::iter::repeat_n(mask, b - 1));
            Row::new(0, t, AttnRule::Bidirectional)
                .lora_from(0)
                .logits(LogitSel::Range {
                    start: 1,
                    len: b - 1,
                })
        })
        .collect()
}

/// Its verify forward: every drafted block as a causal row; `commits(k)` says which row
/// advances the cache (the canonical one).
pub fn shadow_verifies(blocks: &[Vec<u32>], commits: impl Fn(usize) -> bool) -> Vec<Row> {
    blocks
        .iter()
        .enumerate()
        .map(|(k, b)| {
            let r = Row::new(0, b.clone(), AttnRule::Causal).logits(LogitSel::All);
            if commits(k) {
                r.commit()
            } else {
                r
            }
        })
        .collect()
}
