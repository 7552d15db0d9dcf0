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

/// A text file read whole, refusing one larger than `max` bytes (a device like
/// /dev/zero, or a file that is not what it claims): config files are small.
pub fn read_bounded(path: &std::path::Path, max: u64) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context(format!("cannot read {}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context(format!("cannot read {}", path.display())))?;
    if bytes.len() as u64 > max {
        anyhow::bail!(
            "{} is larger than {} KiB: not a config file",
            path.display(),
            max / 1024
        );
    }
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))
}
