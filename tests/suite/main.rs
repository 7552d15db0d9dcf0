//! The integration tests, one binary with a module per subject: one link instead of
//! fifteen (each test binary links candle, tokenizers and ratatui), so a clean
//! `cargo test` builds in minutes and takes a fraction of the disk. Run one subject with
//! `cargo test --test suite lossless::`.
#![allow(clippy::unwrap_used, clippy::too_many_lines)] // test code: a panic is the failure, a scenario reads top to bottom

mod common;

mod away;
mod backbone;
mod bad_input;
mod cli;
mod device;
mod dtype;
mod e2e_tmux;
mod engine;
mod lossless;
mod nld;
mod plot;
mod sim;
mod tokenizer;
mod trace;
mod train;
mod tui;
