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

/// candle asks for its thread count on every matmul, and without `RAYON_NUM_THREADS` set
/// that answer comes from reading /proc/cpuinfo each time: measured at about 7% of the
/// CPU time of decoding with the bundled model. Asking once, before any thread starts,
/// and setting the variable makes every later answer an environment look-up. Call it
/// first thing in `main`: setting the environment is only sound before threads start.
pub fn settle_thread_count() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = candle_core::utils::get_num_threads();
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
}
