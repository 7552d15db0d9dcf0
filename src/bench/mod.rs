//! Benchmarks: every configuration run side by side in one process, so ratios compare
//! like with like on a noisy machine.

pub mod acceptance;
pub mod prompts;
pub mod report;
pub mod run;
pub mod sweep;
