//! The training data: the corpus rendered with the chat template, the held-out
//! prompts written beside it, the tokenizer, and the two phases' token streams
//! packed into sequences.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, ensure, Context, Result};

use super::corpus::{self, Family};
use super::trainer::TrainOptions;
use crate::model::synthetic;
use crate::model::tokenizer::render_template;
use crate::model::ChatMessage;

/// The conversation as the model sees it at inference: history rendered by the chat
/// template with the generation prompt, then the final answer and end of turn.
pub fn render_exchange(messages: &[ChatMessage]) -> Result<String> {
    let (last, history) = messages.split_last().context("empty exchange")?;
    let prefix = render_template(
        synthetic::CHAT_TEMPLATE,
        history,
        false,
        "<s>",
        "<|im_end|>",
    )?;
    Ok(format!("{prefix}{}<|im_end|>\n", last.content))
}

/// Packs exchanges into sequences of `len` tokens that each start at an exchange, so
/// an answer is trained on with its prompt in view (copying from the prompt is what
/// the model must learn). Whole exchanges fill a sequence; the room left takes the
/// start of the next one, which then opens the next sequence in full. An exchange
/// longer than `len` is cut.
pub fn pack(exchanges: &[Vec<u32>], len: usize) -> Vec<u32> {
    let mut out = Vec::new();
    let mut seq: Vec<u32> = Vec::with_capacity(len);
    let mut i = 0;
    while i < exchanges.len() {
        let e = &exchanges[i];
        if seq.len() + e.len() <= len {
            seq.extend_from_slice(e);
            i += 1;
            if seq.len() == len {
                out.append(&mut seq);
            }
            continue;
        }
        if seq.is_empty() {
            // Longer than a sequence: its first `len` tokens.
            out.extend_from_slice(&e[..len]);
            i += 1;
            continue;
        }
        let room = len - seq.len();
        seq.extend_from_slice(&e[..room]);
        out.append(&mut seq);
    }
    out
}

/// Seed of the held-out prompts.
fn heldout_seed(o: &TrainOptions) -> u64 {
    o.seed + 1_000_003
}

/// Writes the held-out prompt files, none of which occur in the main training
/// exchanges (`train`, their prompt keys); the annealing stream is kept off them too.
fn write_heldout(dir: &Path, o: &TrainOptions, train: &HashSet<String>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for f in Family::ALL {
        let path = dir.join(format!("{}.jsonl", f.name()));
        let mut out = String::new();
        for p in corpus::heldout(heldout_seed(o), f, o.heldout_per_family, train) {
            out.push_str(&serde_json::to_string(&p)?);
            out.push('\n');
        }
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The packed token streams of the two phases: the main corpus, and the annealing
/// stream (its own seed, never a held-out prompt; empty when the phase has no steps).
pub(super) struct Streams {
    pub(super) main: Vec<u32>,
    pub(super) anneal: Vec<u32>,
}

impl Streams {
    /// Generates the corpus, writes the held-out prompts, trains (or reads) the
    /// tokenizer and packs every stream into sequences of `o.seq_len`.
    pub(super) fn build(o: &TrainOptions, note: &mut impl FnMut(&str)) -> Result<Self> {
        let started = Instant::now();
        let main_exchanges = corpus::generate(o.seed, o.exchanges);
        let train_keys: HashSet<String> = main_exchanges.iter().map(corpus::prompt_key).collect();
        if let Some(dir) = &o.prompts_dir {
            write_heldout(dir, o, &train_keys)?;
        }
        let texts = render_all(&main_exchanges)?;
        let tokenizer = tokenizer_for(o, &texts)?;
        let encode = |texts: &[String]| -> Result<(Vec<u32>, usize)> {
            let mut encoded: Vec<Vec<u32>> = Vec::with_capacity(texts.len());
            for t in texts {
                let enc = tokenizer
                    .encode(t.as_str(), false)
                    .map_err(|e| anyhow!("tokenize corpus: {e}"))?;
                encoded.push(enc.get_ids().to_vec());
            }
            let stream_len = encoded.iter().map(Vec::len).sum();
            Ok((pack(&encoded, o.seq_len), stream_len))
        };
        let (main, stream_len) = encode(&texts)?;
        let seqs = main.len() / o.seq_len;
        ensure!(seqs >= o.batch, "corpus too small: {seqs} sequences");
        note(&format!(
            "{} exchanges, {} tokens ({:.0} per exchange), {seqs} sequences of {}; corpus + tokenizer in {:.1}s",
            texts.len(),
            stream_len,
            stream_len as f64 / texts.len() as f64,
            o.seq_len,
            started.elapsed().as_secs_f64()
        ));
        // The annealing stream: its own seed, never a held-out prompt.
        let mut anneal = Vec::new();
        if o.anneal_steps > 0 {
            let mut heldout = HashSet::new();
            for f in [Family::Math, Family::Code, Family::Qa] {
                let n = o.heldout_per_family;
                for e in corpus::heldout_exchanges(heldout_seed(o), f, n, &train_keys) {
                    heldout.insert(corpus::prompt_key(&e));
                }
            }
            let exchanges = corpus::generate_anneal(o.seed + 2_000_003, o.exchanges / 2, &heldout);
            let texts = render_all(&exchanges)?;
            let (packed, len) = encode(&texts)?;
            note(&format!(
                "annealing stream for {} steps: {} exchanges, {len} tokens",
                o.anneal_steps,
                texts.len()
            ));
            ensure!(
                packed.len() / o.seq_len >= o.batch,
                "annealing corpus too small: {} sequences",
                packed.len() / o.seq_len
            );
            anneal = packed;
        }
        Ok(Self { main, anneal })
    }
}

fn render_all(exchanges: &[corpus::Exchange]) -> Result<Vec<String>> {
    exchanges
        .iter()
        .map(|e| render_exchange(&e.messages))
        .collect()
}

/// The run's tokenizer: the one in `o.out` (a resumed run), else one trained on the
/// corpus.
fn tokenizer_for(o: &TrainOptions, texts: &[String]) -> Result<tokenizers::Tokenizer> {
    let tok_path = o.out.join("tokenizer.json");
    let tokenizer = if tok_path.is_file() {
        tokenizers::Tokenizer::from_file(&tok_path)
            .map_err(|e| anyhow!("cannot read {}: {e}", tok_path.display()))?
    } else {
        let sample: Vec<String> = texts.iter().take(6000).cloned().collect();
        super::bpe::train_tokenizer(&sample, o.spec.vocab_size, &tok_path)?
    };
    ensure!(
        tokenizer.get_vocab_size(true) <= o.spec.vocab_size,
        "tokenizer has {} tokens, more than vocab_size {}",
        tokenizer.get_vocab_size(true),
        o.spec.vocab_size
    );
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::pack;

    #[test]
    fn pack_starts_every_sequence_at_an_exchange() {
        let ex = vec![
            vec![1, 1, 1],
            vec![2, 2],
            vec![3, 3, 3, 3],
            vec![4; 9],
            vec![5],
        ];
        let out = pack(&ex, 4);
        let seqs: Vec<&[u32]> = out.chunks(4).collect();
        assert_eq!(
            seqs,
            [
                &[1, 1, 1, 2][..],
                &[2, 2, 3, 3],
                &[3, 3, 3, 3],
                &[4, 4, 4, 4],
            ]
        );
        assert_eq!(out.len() % 4, 0, "the unfinished last sequence is dropped");
    }
}
