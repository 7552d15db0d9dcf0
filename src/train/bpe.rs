//! Byte-level BPE trained with the `tokenizers` crate, special tokens in NLD's manner,
//! digits split one by one.

use std::path::Path;

use anyhow::{anyhow, Result};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer};

use crate::model::synthetic::SPECIAL_TOKENS;

/// Trains a byte-level BPE of `vocab_size` tokens (special tokens first, at the ids of
/// [`SPECIAL_TOKENS`]) on `texts` and writes `tokenizer.json`.
pub fn train_tokenizer(texts: &[String], vocab_size: usize, out: &Path) -> Result<Tokenizer> {
    let specials: Vec<AddedToken> = SPECIAL_TOKENS
        .iter()
        .map(|t| AddedToken::from(t.to_string(), true))
        .collect();
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut trainer = TrainerWrapper::BpeTrainer(trainer);
    let mut tok = Tokenizer::new(BPE::default());
    // Digits one by one (as Llama and Mistral tokenizers split them): a number's
    // digits line up with its place values, which makes arithmetic learnable.
    tok.with_pre_tokenizer(Some(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
    ])));
    tok.with_decoder(Some(ByteLevel::default()));
    tok.train(&mut trainer, texts.iter().map(String::as_str))
        .map_err(|e| anyhow!("tokenizer training failed: {e}"))?;
    for (id, t) in SPECIAL_TOKENS.iter().enumerate() {
        let got = tok.token_to_id(t);
        anyhow::ensure!(
            got == Some(id as u32),
            "special token {t} got id {got:?}, expected {id}"
        );
    }
    tok.save(out, true)
        .map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    Ok(tok)
}
