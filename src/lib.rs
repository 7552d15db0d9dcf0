//! specscope: interactive diffusion-AR self-speculative decoding.
//!
//! `model` is the tri-mode backbone (causal, bidirectional and mixed rows over one
//! committed KV cache); `engine` decodes with it.

pub mod bench;
pub mod engine;
pub mod files;
pub mod model;
pub mod output;
pub mod plot;
pub mod rng;
pub mod sim;
pub mod trace;
pub mod train;
pub mod tui;

/// candle asks for its thread count on every matmul, and without `RAYON_NUM_THREADS` set
/// that answer comes from reading /proc/cpuinfo each time: measured at about 7% of the
/// CPU time of decoding with the bundled model. Asking once, before any thread starts,
/// and setting the variable makes every later answer an environment look-up. Call it
/// first thing in `main`: setting the environment is only sound before threads start.
///
/// A value that is not a count, or asks for more than [`MAX_THREADS_PER_CORE`] threads
/// a core (the pool would fail to start them, which panics inside rayon), is replaced
/// by the machine's count; the returned warning says so.
pub fn settle_thread_count() -> Option<String> {
    let set = |n: usize| std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    let Some(asked) = std::env::var_os("RAYON_NUM_THREADS") else {
        set(candle_core::utils::get_num_threads().max(1));
        return None;
    };
    // The machine's own count (candle's answer is the variable being checked).
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let asked = asked.to_string_lossy();
    let most = cores * MAX_THREADS_PER_CORE;
    match asked.trim().parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => None,
        _ => {
            set(cores);
            Some(format!(
                "RAYON_NUM_THREADS={asked}: not a thread count from 1 to {most} ({MAX_THREADS_PER_CORE} a core here); using {cores}"
            ))
        }
    }
}

/// The most threads a core `RAYON_NUM_THREADS` may ask for.
pub const MAX_THREADS_PER_CORE: usize = 8;

/// A text file read whole, refusing one larger than `max` bytes (a device like
/// /dev/zero, or a file that is not what it claims): every file read this way is small.
pub fn read_bounded(path: &std::path::Path, max: u64) -> anyhow::Result<String> {
    let bytes = read_bytes_bounded(path, max)?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))
}

/// A file's bytes, refusing a device (it may never end) or more than `max` bytes (a
/// pipe is read up to the bound).
pub fn read_bytes_bounded(path: &std::path::Path, max: u64) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context(format!("cannot read {}", path.display())))?;
    let meta = file
        .metadata()
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    #[cfg(unix)]
    let readable = {
        use std::os::unix::fs::FileTypeExt;
        meta.is_file() || meta.file_type().is_fifo()
    };
    #[cfg(not(unix))]
    let readable = meta.is_file();
    anyhow::ensure!(
        !meta.is_dir(),
        "{} is a directory, not a file",
        path.display()
    );
    anyhow::ensure!(
        readable,
        "{} is not a file (a device is not read: it may never end)",
        path.display()
    );
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context(format!("cannot read {}", path.display())))?;
    if bytes.len() as u64 > max {
        anyhow::bail!(
            "{} is larger than {} KiB, the most a file of its kind may be",
            path.display(),
            max / 1024
        );
    }
    Ok(bytes)
}

/// Where a measurement was made, for the files that carry figures' sources (bench and
/// profile JSON, recording headers): the command line, the machine and the UTC date.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    pub command: String,
    pub machine: String,
    pub date: String,
}

impl Provenance {
    /// This process: its arguments, this machine, today.
    pub fn here() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let command = match args.split_first() {
            Some((exe, rest)) => {
                let name = std::path::Path::new(exe)
                    .file_name()
                    .map_or("specscope".into(), |n| n.to_string_lossy().into_owned());
                std::iter::once(name)
                    .chain(rest.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            None => String::new(),
        };
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            command,
            machine: machine(),
            date: utc_date(secs),
        }
    }
}

/// The CPU's model name and thread count (from /proc/cpuinfo where there is one).
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {threads} threads")
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub fn utc_date(unix_secs: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm).
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod provenance_tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc_date(0), "1970-01-01");
        assert_eq!(super::utc_date(951_782_400), "2000-02-29");
        assert_eq!(super::utc_date(1_796_098_254), "2026-12-01");
    }
}
