//! Where user files live, and line numbers for messages about them.

use std::path::PathBuf;

/// The user's config directory: `$SPECSCOPE_CONFIG_DIR`, else the platform's
/// (`~/.config/specscope` on Linux).
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SPECSCOPE_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    directories::ProjectDirs::from("", "", "specscope").map(|d| d.config_dir().to_path_buf())
}

/// Where recordings started with the record key go.
pub fn recordings_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SPECSCOPE_DATA_DIR") {
        return PathBuf::from(d).join("recordings");
    }
    directories::ProjectDirs::from("", "", "specscope")
        .map(|d| d.data_dir().join("recordings"))
        .unwrap_or_else(|| PathBuf::from("recordings"))
}

/// 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// 1-based line where `key` is defined (`key =` or `"key" =`), or 0 when not found.
pub fn line_of_key(text: &str, key: &str) -> usize {
    let quoted = format!("\"{key}\"");
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            (l.starts_with(&quoted) || l.starts_with(key))
                && l[if l.starts_with(&quoted) {
                    quoted.len()
                } else {
                    key.len()
                }..]
                    .trim_start()
                    .starts_with('=')
        })
        .map_or(0, |i| i + 1)
}
