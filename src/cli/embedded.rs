//! The bundled drill model, its prompt sets and the demo recording, inside the binary:
//! an installed or copied `specscope` has no source tree to find them in. A run away
//! from the tree unpacks them into a folder of the data directory named by their
//! content (`source::installed_assets_dir`), compares that copy with them at every
//! start and rewrites what differs, and reads from there as from a checkout (the
//! loader, the tokenizer and the templates read files; one path for both). Only the
//! binary carries them: the library and the test binaries do not.

use std::path::Path;

use specscope::model::source;

macro_rules! assets {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!("../../assets/", $path)))),*]
    };
}

/// (path under `assets/`, bytes).
const ASSETS: &[(&str, &[u8])] = assets!(
    "tiny-nld/config.json",
    "tiny-nld/generation_config.json",
    "tiny-nld/tokenizer.json",
    "tiny-nld/tokenizer_config.json",
    "tiny-nld/chat_template.jinja",
    "tiny-nld/model.safetensors",
    "tiny-nld/README.md",
    "tiny-nld/train_state.json",
    "prompts/first.jsonl",
    "prompts/math.jsonl",
    "prompts/code.jsonl",
    "prompts/qa.jsonl",
    "demo.jsonl",
);

/// Written beside the unpacked copy for whoever looks: which binary unpacked it. Never
/// read back: the files themselves are compared with the binary's.
const MARKER: &str = ".specscope-assets";

/// Held while checking and unpacking, so runs started at once unpack once (the others
/// wait, then find the copy current). Atomic renames keep them safe without it.
const LOCK: &str = ".specscope-unpack.lock";

/// How long a run waits for another's unpack before going on without the lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

fn fingerprint() -> String {
    let bytes: usize = ASSETS.iter().map(|(_, b)| b.len()).sum();
    format!(
        "specscope {} · {} files · {bytes} bytes\n",
        env!("CARGO_PKG_VERSION"),
        ASSETS.len()
    )
}

/// The bundled files that `dir` does not hold exactly as the binary carries them:
/// missing, not a regular file (a link, a FIFO, a directory), another size or other
/// bytes. Reads at most each file's own size plus one byte.
fn stale(
    files: &[(&'static str, &'static [u8])],
    dir: &Path,
) -> Vec<(&'static str, &'static [u8])> {
    files
        .iter()
        .filter(|(rel, bytes)| !holds(&dir.join(rel), bytes))
        .copied()
        .collect()
}

fn holds(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read;
    // Opened without following a link or waiting on a FIFO, and judged by what was
    // opened: a file swapped after a look at its name cannot hang the start.
    let Ok(file) = open_no_wait(std::fs::OpenOptions::new().read(true), path) else {
        return false;
    };
    if !file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
    {
        return false;
    }
    let mut got = Vec::with_capacity(bytes.len());
    file.take(bytes.len() as u64 + 1)
        .read_to_end(&mut got)
        .is_ok_and(|_| got == bytes)
}

/// `open` that neither follows a link nor blocks on a FIFO (on Unix).
fn open_no_wait(open: &mut std::fs::OpenOptions, path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(open, libc::O_NONBLOCK | libc::O_NOFOLLOW);
    open.open(path)
}

/// Removes the temporary files of unpacks that were killed half-way (each process
/// names its own, so none is overwritten later): called under the lock.
fn remove_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => remove_partials(&p),
            Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "partial") => {
                let _ = std::fs::remove_file(&p);
            }
            _ => {}
        }
    }
}

/// Takes the unpack lock in `dir`, waiting up to [`LOCK_WAIT`]; `None` where the
/// file system offers no lock or another run holds it longer.
fn lock(dir: &Path) -> Option<std::fs::File> {
    // Something else at the lock's name (a FIFO, a link) is never waited on.
    let file = open_no_wait(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
        &dir.join(LOCK),
    )
    .ok()?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Some(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(_) => return None,
        }
    }
}

/// What [`ensure_assets`] said at start-up: the screen repeats it on its messages page.
static NOTE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The start-up note of this run, if there was one.
pub fn note() -> Option<&'static str> {
    NOTE.get().map(String::as_str)
}

/// [`ensure_assets`], with its note kept for [`note`] and printed on stderr.
pub fn ensure_assets_and_say() {
    if let Some(n) = ensure_assets() {
        eprintln!("specscope: {n}");
        let _ = NOTE.set(n);
    }
}

/// Unpacks the assets where no assets directory holds the bundled model, and repairs
/// the files of our own copy that differ from what the binary carries (an older
/// binary's, a truncated or edited file); a note says what was done, once. A failure
/// is a note too: commands that do not need the model still run.
fn ensure_assets() -> Option<String> {
    let dir = source::installed_assets_dir()?;
    if source::found_assets_dir().is_some_and(|found| !found.starts_with(&dir)) {
        // A checkout's, a tree copy's or $SPECSCOPE_ASSETS' assets.
        return None;
    }
    let todo = stale(ASSETS, &dir);
    if todo.is_empty() {
        return None;
    }
    Some(match unpack(ASSETS, &dir) {
        Ok(None) => return None,
        Ok(Some(repaired)) if repaired.len() == ASSETS.len() => format!(
            "unpacked the bundled model and prompt sets into {}",
            dir.display()
        ),
        Ok(Some(repaired)) => format!(
            "repaired the bundled assets in {}: rewrote {} (not as this binary carries {})",
            dir.display(),
            repaired.join(", "),
            if repaired.len() == 1 { "it" } else { "them" }
        ),
        Err(e) => format!(
            "cannot unpack the bundled model into {}: {e:#}. Set SPECSCOPE_DATA_DIR to a directory you can write, or pass --model",
            dir.display()
        ),
    })
}

/// Under the lock: writes the files still stale once it is held (another run may have
/// written them meanwhile) and returns their names, or `None` when none was left.
fn unpack(
    files: &[(&'static str, &'static [u8])],
    dir: &Path,
) -> anyhow::Result<Option<Vec<&'static str>>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let held = lock(dir);
    if held.is_some() {
        remove_partials(dir);
    }
    let todo = stale(files, dir);
    if todo.is_empty() {
        return Ok(None);
    }
    source::unpack_assets(&todo, dir)?;
    // For whoever looks, and nothing reads it back: replaced (never written through,
    // whatever sits there), and no failure of it is one of the unpack's.
    let marker = dir.join(MARKER);
    let _ = std::fs::remove_file(&marker);
    let _ = std::fs::write(&marker, fingerprint());
    Ok(Some(todo.iter().map(|(rel, _)| *rel).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the binary carries is the tree's assets byte for byte, unpacked whole, and
    /// the bundled model is read from there as from a checkout.
    #[test]
    fn unpacked_assets_are_the_trees_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let done = unpack(ASSETS, dir.path()).unwrap().unwrap();
        assert_eq!(done.len(), ASSETS.len());
        let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        for (rel, bytes) in ASSETS {
            let got = std::fs::read(dir.path().join(rel)).unwrap();
            assert_eq!(&got[..], *bytes, "{rel}");
            assert_eq!(got, std::fs::read(tree.join(rel)).unwrap(), "{rel}");
        }
        // Every file the model directory needs to load is there.
        let model = dir.path().join("tiny-nld");
        let files = source::ModelSource::Local(model).resolve().unwrap();
        assert!(files.weights.iter().all(|w| w.is_file()));
        assert!(files.chat_template.as_ref().is_some_and(|p| p.is_file()));
        assert_eq!(partials(dir.path()), 0);
        // A current copy is left alone.
        assert_eq!(unpack(ASSETS, dir.path()).unwrap(), None);
        // What a killed unpack left behind goes with the next run's.
        let left = dir.path().join("tiny-nld/model.4242-0.partial");
        std::fs::write(&left, b"half").unwrap();
        assert_eq!(unpack(ASSETS, dir.path()).unwrap(), None);
        assert!(!left.exists());
    }

    /// Every way one unpacked file can be damaged, for every file: the next run finds
    /// exactly that file stale, rewrites it alone, and leaves the copy exact. The
    /// marker is never read: a FIFO or an endless file there changes nothing.
    #[cfg(unix)]
    #[test]
    fn each_damaged_file_is_found_and_rewritten_alone() {
        type Damage = fn(&Path, &[u8]);
        let damages: [(&str, Damage); 8] = [
            ("missing", |p, _| std::fs::remove_file(p).unwrap()),
            ("empty", |p, _| std::fs::write(p, b"").unwrap()),
            ("truncated", |p, b| {
                std::fs::write(p, &b[..b.len() / 2]).unwrap()
            }),
            ("one byte longer", |p, b| {
                std::fs::write(p, [b, b"x".as_slice()].concat()).unwrap()
            }),
            ("one byte flipped", |p, b| {
                let mut v = b.to_vec();
                let i = v.len() / 3;
                v[i] ^= 1;
                std::fs::write(p, v).unwrap()
            }),
            ("a directory", |p, _| {
                std::fs::remove_file(p).unwrap();
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("x"), b"x").unwrap();
            }),
            ("a link to /dev/zero", |p, _| {
                std::fs::remove_file(p).unwrap();
                std::os::unix::fs::symlink("/dev/zero", p).unwrap();
            }),
            ("a FIFO", |p, _| {
                std::fs::remove_file(p).unwrap();
                mkfifo(p);
            }),
        ];
        let dir = tempfile::tempdir().unwrap();
        unpack(ASSETS, dir.path()).unwrap();
        let marker = dir.path().join(MARKER);
        std::fs::remove_file(&marker).unwrap();
        mkfifo(&marker);
        for (i, (rel, bytes)) in ASSETS.iter().enumerate() {
            let (what, damage) = &damages[i % damages.len()];
            let path = dir.path().join(rel);
            damage(&path, bytes);
            let todo: Vec<_> = stale(ASSETS, dir.path()).iter().map(|f| f.0).collect();
            assert_eq!(todo, [*rel], "{rel} {what}");
            if path.is_dir() {
                // Not ours to delete: the rename into place fails, and says where.
                let e = unpack(ASSETS, dir.path()).unwrap_err();
                assert!(format!("{e:#}").contains(rel), "{e:#}");
                std::fs::remove_dir_all(&path).unwrap();
            }
            assert_eq!(
                unpack(ASSETS, dir.path()).unwrap(),
                Some(vec![*rel]),
                "{rel} {what}"
            );
            assert!(stale(ASSETS, dir.path()).is_empty(), "{rel} {what}");
        }
        // Each damage met at least one of the files.
        assert!(ASSETS.len() >= damages.len());
        assert_eq!(partials(dir.path()), 0);
    }

    /// First runs at once all succeed, and one of them does the unpack.
    #[test]
    fn first_runs_at_once_all_succeed() {
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let runs: Vec<_> = (0..6)
                .map(|_| {
                    let d = dir.path().to_path_buf();
                    std::thread::spawn(move || unpack(ASSETS, &d))
                })
                .collect();
            let done: Vec<_> = runs
                .into_iter()
                .map(|r| r.join().unwrap().unwrap())
                .collect();
            assert_eq!(done.iter().filter(|d| d.is_some()).count(), 1, "{done:?}");
            assert!(stale(ASSETS, dir.path()).is_empty());
            assert_eq!(partials(dir.path()), 0);
        }
    }

    /// A data directory that cannot hold the assets is one error naming the path.
    #[test]
    fn a_broken_data_directory_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        for target in [file.clone(), file.join("assets")] {
            let e = format!("{:#}", unpack(ASSETS, &target).unwrap_err());
            assert!(e.contains(&*file.to_string_lossy()), "{e}");
        }
    }

    #[cfg(unix)]
    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    fn partials(d: &Path) -> usize {
        let mut n = 0;
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                n += partials(&p);
            } else if p.extension().is_some_and(|e| e == "partial") {
                n += 1;
            }
        }
        n
    }
}
