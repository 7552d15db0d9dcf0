//! What a command writes: never one of the files it reads, and whole. A JSON output is
//! written to a temporary file beside it and renamed into place, so a crash leaves the
//! old file or the new one, and two runs writing one name leave one run's file, never
//! their lines interleaved (a recording, written as it goes, takes a lock instead:
//! `trace::writer`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// `path` made absolute with its directory resolved (the file itself may not exist).
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let name = path.file_name()?;
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.canonicalize().ok()?,
        None => std::env::current_dir().ok()?,
    };
    Some(dir.join(name))
}

/// Refuses an output (`flag` names it) that is one of the run's `inputs` (files, or
/// directories whose files the run reads): writing it would replace what was read.
pub fn refuse_inputs(out: &Path, flag: &str, inputs: &[PathBuf]) -> Result<()> {
    let Some(target) = resolved(out) else {
        return Ok(());
    };
    for input in inputs {
        let Some(inp) = resolved(input) else {
            continue;
        };
        let clash = if inp.is_dir() {
            target.starts_with(&inp)
        } else {
            target == inp
        };
        if clash {
            bail!(
                "{flag} {}: that is {} this run reads ({}); choose another output",
                out.display(),
                if inp.is_dir() {
                    "inside a directory"
                } else {
                    "a file"
                },
                input.display()
            );
        }
    }
    Ok(())
}

/// Text from a file or the user as a terminal shows it: control characters (an
/// escape sequence in a log's `backend`, a recording's `model`) become spaces.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The one rule for every output a command names (`flag`): never one of the run's
/// `inputs`, never a directory, and a file that exists (one this run did not make) is
/// replaced only with `--force`. A device or a pipe (`/dev/stdout`) is written as it is.
/// Called before the run's work, so a refused output costs nothing.
pub fn claim(out: &Path, flag: &str, force: bool, inputs: &[PathBuf]) -> Result<()> {
    refuse_inputs(out, flag, inputs)?;
    match std::fs::metadata(out) {
        Ok(m) if m.is_dir() => bail!(
            "{flag} {}: that is a directory; name a file in it",
            out.display()
        ),
        Ok(m) if m.is_file() && !force => bail!(
            "{flag} {}: the file exists; pass --force to replace it (or choose another name)",
            out.display()
        ),
        _ => Ok(()),
    }
}

/// [`claim`] for a directory a command writes files into (`names`, known up front or
/// once drawn): each that exists is replaced only with `--force`.
pub fn claim_in(dir: &Path, names: &[String], flag: &str, force: bool) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("{flag} {}: not a directory", dir.display());
    }
    let taken: Vec<&String> = names.iter().filter(|n| dir.join(n).exists()).collect();
    if !force && !taken.is_empty() {
        bail!(
            "{flag} {}: {} already there; pass --force to replace {}",
            dir.display(),
            taken
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if taken.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// Writes `text` to `path` whole: a new temporary file in the same directory (created
/// exclusively, so no other file or link is written through), synced, renamed over
/// it; removed on any error. A path that is not a regular file (`/dev/stdout`, a
/// pipe) is written directly.
pub fn write_whole(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    if path.exists() && !path.is_file() {
        return std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(
            ".{}.{}.{nanos}.{attempt}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
        };
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write {}", path.display()));
        }
        return Ok(());
    }
    anyhow::bail!(
        "cannot write {}: no free temporary name beside it",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of naming an input (the same path, through `..`, relative, a file of
    /// an input directory) is refused; other names are not.
    #[test]
    fn an_output_that_is_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir(d.join("model")).unwrap();
        std::fs::write(d.join("model/config.json"), "{}").unwrap();
        std::fs::write(d.join("prompts.jsonl"), "").unwrap();
        let inputs = [d.join("prompts.jsonl"), d.join("model")];
        let clashes = [
            d.join("prompts.jsonl"),
            d.join("model/../prompts.jsonl"),
            d.join("model/config.json"),
            d.join("model/new.json"),
        ];
        for out in &clashes {
            let e = refuse_inputs(out, "--out", &inputs)
                .unwrap_err()
                .to_string();
            assert!(e.contains("--out") && e.contains("this run reads"), "{e}");
        }
        for out in [
            d.join("out.json"),
            d.join("model.json"),
            d.join("nodir/x.json"),
        ] {
            refuse_inputs(&out, "--out", &inputs).unwrap();
        }
    }

    #[test]
    fn written_whole_and_nothing_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_whole(&p, "one").unwrap();
        write_whole(&p, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_whole(&dir.path().join("no/such/dir.json"), "x").is_err());
    }
}
