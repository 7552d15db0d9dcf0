//! Making the bundled model: corpus, tokenizer, joint AR + block-diffusion training.

mod adamw;
pub mod bpe;
pub mod corpus;
pub mod objective;
mod streams;
pub mod trainer;
