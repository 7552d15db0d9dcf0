//! specscope: interactive diffusion-AR self-speculative decoding.
//!
//! `model` is the tri-mode backbone (causal, bidirectional and mixed rows over one
//! committed KV cache); `engine` decodes with it.

pub mod bench;
pub mod engine;
pub mod model;
pub mod rng;
pub mod trace;
pub mod train;
pub mod tui;
