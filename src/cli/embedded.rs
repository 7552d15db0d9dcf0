//! The bundled drill model, its prompt sets and the demo recording, inside the binary:
//! an installed or copied `specscope` has no source tree to find them in. On the first
//! run that finds no assets directory they are unpacked into the data directory, and
//! read from there as from a checkout (the loader, the tokenizer and the templates
//! read files; one path for both). Only the binary carries them: the library and the
//! test binaries do not.

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
    "prompts/first.jsonl",
    "prompts/math.jsonl",
    "prompts/code.jsonl",
    "prompts/qa.jsonl",
    "demo.jsonl",
);

/// Written beside the unpacked copy: what it was unpacked from, so a newer binary
/// replaces an older one's copy instead of loading it.
const MARKER: &str = ".specscope-assets";

fn fingerprint() -> String {
    let bytes: usize = ASSETS.iter().map(|(_, b)| b.len()).sum();
    format!(
        "specscope {} · {} files · {bytes} bytes",
        env!("CARGO_PKG_VERSION"),
        ASSETS.len()
    )
}

/// Unpacks the assets where no assets directory holds the bundled model, or where the
/// one found is an older binary's copy; a note says where, once. A failure is a note
/// too: commands that do not need the model still run.
pub fn ensure_assets() -> Option<String> {
    let dir = source::installed_assets_dir()?;
    let found = source::bundled_dir();
    let ours = found.starts_with(&dir);
    if found.join("config.json").is_file() {
        // A checkout's (or $SPECSCOPE_ASSETS') assets, or our own current copy.
        let current = std::fs::read_to_string(dir.join(MARKER)).ok() == Some(fingerprint());
        if !ours || current {
            return None;
        }
    }
    let done = source::unpack_assets(ASSETS, &dir).and_then(|()| {
        std::fs::write(dir.join(MARKER), fingerprint())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.join(MARKER).display()))
    });
    Some(match done {
        Ok(()) => format!(
            "unpacked the bundled model and prompt sets into {}",
            dir.display()
        ),
        Err(e) => format!("cannot unpack the bundled model: {e:#}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the binary carries is the tree's assets byte for byte, unpacked whole, and
    /// the bundled model is read from there as from a checkout.
    #[test]
    fn unpacked_assets_are_the_trees_and_load() {
        let dir = tempfile::tempdir().unwrap();
        source::unpack_assets(ASSETS, dir.path()).unwrap();
        let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
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
        // No temporary file is left.
        let partial = walk(dir.path())
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "partial"))
            .count();
        assert_eq!(partial, 0);
    }

    fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
