//! The binary away from its source tree, as `cargo install` leaves it: the first run
//! unpacks the bundled model into the data directory, runs started at once all
//! succeed, a damaged copy is repaired, what sits at the marker's or the lock's name is
//! never waited on, and a data directory that cannot hold the assets is one error.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A copy of the binary outside the tree, with its own data directory and working
/// directory: what an installed `specscope` sees.
struct Away {
    root: tempfile::TempDir,
    bin: PathBuf,
}

impl Away {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin").join("specscope");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        let built = env!("CARGO_BIN_EXE_specscope");
        if std::fs::hard_link(built, &bin).is_err() {
            std::fs::copy(built, &bin).unwrap();
        }
        std::fs::create_dir_all(root.path().join("cwd")).unwrap();
        Self { root, bin }
    }

    fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The folder the binary unpacks into: named by what it carries.
    fn assets(&self) -> PathBuf {
        self.data()
            .join("assets")
            .join(env!("SPECSCOPE_ASSETS_KEY"))
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .current_dir(self.root.path().join("cwd"))
            .env("SPECSCOPE_DATA_DIR", self.data())
            .env_remove("SPECSCOPE_ASSETS")
            .env_remove("SPECSCOPE_MODEL")
            .env("HF_HUB_OFFLINE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn answer(&self) -> Child {
        self.cmd(&["run", "--prompt", "What is 12 plus 7?"])
            .spawn()
            .unwrap()
    }
}

/// Waits for `child` at most three minutes (longer than a run waits for another's
/// unpack lock): a hang is a failure, not a stuck suite. Its output is read as it
/// comes, so a full pipe cannot stall it.
fn finish(mut child: Child) -> Output {
    use std::io::Read;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("still running after three minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// The tree's assets, relative path and bytes, for every file the binary carries.
fn tree_file(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(rel),
    )
    .unwrap()
}

const CARRIED: [&str; 3] = [
    "tiny-nld/model.safetensors",
    "tiny-nld/config.json",
    "demo.jsonl",
];

#[cfg(unix)]
fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Four first runs at once, three times over: every one answers, one unpacks, the
/// copy is the tree's byte for byte, and a later run says nothing about assets.
#[test]
fn first_runs_at_once_all_answer_and_one_unpacks() {
    for _ in 0..3 {
        let away = Away::new();
        let runs: Vec<Child> = (0..4).map(|_| away.answer()).collect();
        let outs: Vec<Output> = runs.into_iter().map(finish).collect();
        let mut unpacked = 0;
        for o in &outs {
            let err = text(&o.stderr);
            assert!(o.status.success(), "{err}");
            assert!(text(&o.stdout).contains("19"), "{}", text(&o.stdout));
            unpacked += usize::from(err.contains("unpacked the bundled model"));
            assert!(!err.contains("cannot"), "{err}");
        }
        assert_eq!(unpacked, 1);
        for rel in CARRIED {
            assert_eq!(
                std::fs::read(away.assets().join(rel)).unwrap(),
                tree_file(rel)
            );
        }
        let again = finish(away.answer());
        assert!(again.status.success());
        assert!(
            !text(&again.stderr).contains("bundled"),
            "{}",
            text(&again.stderr)
        );
    }
}

/// Each kind of damage to the unpacked copy, and each kind of thing at the marker's
/// and the lock's names: the run answers within the minute, repairs what differs and
/// says which file, and leaves the rest alone.
#[cfg(unix)]
#[test]
fn a_damaged_copy_is_repaired_and_nothing_at_the_markers_blocks() {
    let away = Away::new();
    assert!(finish(away.answer()).status.success());
    let model = away.assets().join("tiny-nld/model.safetensors");
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 5] = [
        ("truncated", |p| {
            let b = std::fs::read(p).unwrap();
            std::fs::write(p, &b[..b.len() / 2]).unwrap();
        }),
        ("one byte flipped", |p| {
            let mut b = std::fs::read(p).unwrap();
            let i = b.len() - 7;
            b[i] ^= 0x40;
            std::fs::write(p, b).unwrap();
        }),
        ("removed", |p| std::fs::remove_file(p).unwrap()),
        ("a link to /dev/zero", |p| {
            std::fs::remove_file(p).unwrap();
            std::os::unix::fs::symlink("/dev/zero", p).unwrap();
        }),
        ("a FIFO", |p| {
            std::fs::remove_file(p).unwrap();
            mkfifo(p);
        }),
    ];
    for (what, damage) in damages {
        damage(&model);
        let o = finish(away.answer());
        let err = text(&o.stderr);
        assert!(o.status.success(), "{what}: {err}");
        assert!(
            err.contains("repaired") && err.contains("tiny-nld/model.safetensors"),
            "{what}: {err}"
        );
        assert_eq!(
            std::fs::read(&model).unwrap(),
            tree_file("tiny-nld/model.safetensors")
        );
    }
    // Whatever sits at the marker's or the lock's name, a current copy is used as it
    // is, and a stale one is still repaired.
    for name in [".specscope-assets", ".specscope-unpack.lock"] {
        let at = away.assets().join(name);
        let things: [(&str, Damage); 3] = [
            ("a FIFO", |p| mkfifo(p)),
            ("a link to /dev/zero", |p| {
                std::os::unix::fs::symlink("/dev/zero", p).unwrap();
            }),
            ("a directory", |p| std::fs::create_dir(p).unwrap()),
        ];
        for (what, put) in things {
            let _ = std::fs::remove_file(&at);
            let _ = std::fs::remove_dir_all(&at);
            put(&at);
            let o = finish(away.answer());
            assert!(o.status.success(), "{name} {what}: {}", text(&o.stderr));
            assert!(!text(&o.stderr).contains("bundled"), "{}", text(&o.stderr));
            std::fs::remove_file(&model).unwrap();
            let o = finish(away.answer());
            assert!(o.status.success(), "{name} {what}: {}", text(&o.stderr));
            assert!(text(&o.stderr).contains("repaired"), "{}", text(&o.stderr));
        }
    }
}

/// A data directory that cannot hold the assets: a run that needs the model fails with
/// one error that names the directory and how to move it; one that needs no model
/// still runs.
#[test]
fn a_data_directory_that_cannot_hold_the_assets_is_one_clear_error() {
    let away = Away::new();
    std::fs::write(away.data(), b"not a directory").unwrap();
    let o = finish(away.answer());
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains(&*away.data().to_string_lossy()), "{err}");
    assert!(err.contains("SPECSCOPE_DATA_DIR"), "{err}");
    assert!(!err.contains("specscope train"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let o = finish(
        away.cmd(&["trace", "summary", demo.to_str().unwrap()])
            .spawn()
            .unwrap(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// The demo from anywhere: `replay --demo` finds the unpacked copy (and stops only for
/// want of a terminal here); the README's tree path points to it.
#[test]
fn the_demo_replays_from_anywhere() {
    let away = Away::new();
    let o = finish(away.cmd(&["replay", "--demo"]).spawn().unwrap());
    let err = text(&o.stderr);
    assert!(err.contains("needs a terminal"), "{err}");
    let o = finish(away.cmd(&["replay", "assets/demo.jsonl"]).spawn().unwrap());
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("replay --demo"), "{err}");
    assert!(
        err.contains(&*away.assets().join("demo.jsonl").to_string_lossy()),
        "{err}"
    );
}
