//! Where a checkpoint comes from: the bundled model, a local directory or a hub id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hf_hub::{Repo, RepoType};

/// The shipped assets (the bundled model, the prompt sets, the survival tables, the
/// demo): `$SPECSCOPE_ASSETS`, else the source tree the binary was built from while
/// it runs from that tree (`target/…`; an installed copy reads what it carries, not a
/// tree that may have moved on since), else an `assets/` above the executable (a
/// prebuilt binary run in a copy of the tree, as on a lent GPU machine), else the data
/// directory an installed binary unpacks into. The first
/// that holds the bundled model wins; the source tree's path when none does (its
/// error names it), or the data directory's for an installed binary.
pub fn assets_dir() -> PathBuf {
    found_assets_dir().unwrap_or_else(|| {
        let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        if runs_from_tree() {
            built
        } else {
            installed_assets_dir().unwrap_or(built)
        }
    })
}

/// Whether this executable lies in the source tree it was built from.
fn runs_from_tree() -> bool {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
    std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .is_some_and(|e| e.starts_with(tree))
}

/// The first of [`assets_dir`]'s places that holds the bundled model.
pub fn found_assets_dir() -> Option<PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut candidates: Vec<PathBuf> = std::env::var_os("SPECSCOPE_ASSETS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if runs_from_tree() {
        candidates.push(built);
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/release/specscope → the tree's root is three levels up.
        candidates.extend(exe.ancestors().skip(1).take(3).map(|d| d.join("assets")));
    }
    // Where an installed binary unpacks its own copy (`unpack_assets`).
    candidates.extend(installed_assets_dir());
    candidates
        .into_iter()
        .find(|d| d.join("tiny-nld").join("config.json").is_file())
}

/// Where an installed binary keeps the assets it carries: a folder named by their
/// version and content (`ASSETS_KEY`) under `$SPECSCOPE_DATA_DIR/assets`, else under
/// the platform's data directory (`~/.local/share/specscope/assets` on Linux). Two
/// installed binaries that carry different assets keep two copies, never rewriting
/// each other's; an older one's folder can be removed.
pub fn installed_assets_dir() -> Option<PathBuf> {
    let root = match std::env::var_os("SPECSCOPE_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => directories::ProjectDirs::from("", "", "specscope")?
            .data_dir()
            .to_path_buf(),
    };
    Some(root.join("assets").join(ASSETS_KEY))
}

/// The carried assets' version and content key (build.rs).
pub const ASSETS_KEY: &str = env!("SPECSCOPE_ASSETS_KEY");

/// Numbers this process's temporary files, so no two writers share one.
static UNPACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `files` (path under the assets directory, bytes) into `dir`, each through a
/// temporary file of this process's own and a rename, the model's config last: a run
/// killed half-way leaves no directory that looks complete, and runs unpacking at
/// once each put whole files in place.
pub fn unpack_assets(files: &[(&str, &[u8])], dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let (last, rest): (Vec<_>, Vec<_>) = files
        .iter()
        .partition(|(p, _)| *p == "tiny-nld/config.json");
    for (rel, bytes) in rest.into_iter().chain(last) {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let tmp = path.with_extension(format!(
            "{}-{}.partial",
            std::process::id(),
            UNPACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let written = std::fs::write(&tmp, bytes)
            .with_context(|| format!("cannot write {}", tmp.display()))
            .and_then(|()| {
                std::fs::rename(&tmp, &path)
                    .with_context(|| format!("cannot move {} into place", path.display()))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
    }
    Ok(())
}

/// Directory of the bundled tiny model (made by `specscope train`).
pub fn bundled_dir() -> PathBuf {
    assets_dir().join("tiny-nld")
}

/// The files of one checkpoint, resolved on disk.
#[derive(Debug, Clone)]
pub struct ModelFiles {
    /// What the user asked for, as shown on screen and in recordings.
    pub label: String,
    /// The hub commit the files come from, when known.
    pub commit: Option<String>,
    pub config: PathBuf,
    pub weights: Vec<PathBuf>,
    pub tokenizer: PathBuf,
    pub tokenizer_config: Option<PathBuf>,
    pub chat_template: Option<PathBuf>,
    pub generation_config: Option<PathBuf>,
    /// `linear_spec_lora/` holding `adapter_config.json` and `adapter_model.safetensors`.
    pub lora_dir: Option<PathBuf>,
    /// `model.safetensors.index.json` and its map from tensor to shard, when sharded:
    /// each tensor is read from the shard the index names.
    pub index: Option<(PathBuf, BTreeMap<String, PathBuf>)>,
    /// What resolving found worth telling the user (the caller prints it).
    pub notes: Vec<String>,
}

impl ModelFiles {
    /// Every file and directory the model is read from (what no output may replace).
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut out = vec![self.config.clone(), self.tokenizer.clone()];
        out.extend(self.weights.iter().cloned());
        out.extend(self.tokenizer_config.iter().cloned());
        out.extend(self.chat_template.iter().cloned());
        out.extend(self.generation_config.iter().cloned());
        out.extend(self.lora_dir.iter().cloned());
        if let Some((index, shards)) = &self.index {
            out.push(index.clone());
            out.extend(shards.values().cloned());
        }
        out
    }
}

/// How `--model` was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Bundled,
    Local(PathBuf),
    Hub { id: String, revision: String },
}

impl ModelSource {
    /// Interprets `--model`: nothing is the bundled model, an existing directory (or
    /// anything that looks like a path) is local, `owner/name` is a hub id.
    pub fn parse(spec: Option<&str>, revision: Option<&str>) -> Result<Self> {
        let Some(spec) = spec else {
            return Ok(ModelSource::Bundled);
        };
        let path = Path::new(spec);
        if path.is_dir() {
            // The bundled model's own directory is the bundled model: its label, its
            // introduction and its chat defaults.
            let bundled = bundled_dir().canonicalize().ok();
            if bundled.is_some() && path.canonicalize().ok() == bundled {
                return Ok(ModelSource::Bundled);
            }
            return Ok(ModelSource::Local(path.to_path_buf()));
        }
        // `owner/name`, or an owner-less id of the hub's characters (`gpt2`).
        let id_chars = spec
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        let looks_like_path = spec.starts_with('.')
            || spec.starts_with('/')
            || spec.starts_with('~')
            || spec.matches('/').count() > 1
            || !id_chars
            || path.exists();
        if looks_like_path {
            bail!("--model {spec}: looks like a local path but is not a directory");
        }
        Ok(ModelSource::Hub {
            id: spec.to_string(),
            revision: revision.unwrap_or("main").to_string(),
        })
    }

    /// Finds (and for a hub id, downloads or looks up in the HF cache) every file.
    pub fn resolve(&self) -> Result<ModelFiles> {
        match self {
            ModelSource::Bundled => {
                let dir = bundled_dir();
                if !dir.join("config.json").is_file() {
                    bail!(
                        "no --model given and the bundled model is not at {}: an installed binary unpacks its own copy into {} when it starts (where it cannot, a note above says why; SPECSCOPE_DATA_DIR moves it), and a checkout keeps it in assets/tiny-nld; pass --model DIR or --model OWNER/NAME",
                        dir.display(),
                        installed_assets_dir().map_or_else(|| "the data directory".to_string(), |d| d.display().to_string())
                    );
                }
                local_files(&dir, "bundled:tiny-nld".to_string())
            }
            ModelSource::Local(dir) => local_files(dir, dir.display().to_string()),
            ModelSource::Hub { id, revision } => hub_files(id, revision),
        }
    }
}

fn existing(p: PathBuf) -> Option<PathBuf> {
    p.is_file().then_some(p)
}

/// `model.safetensors.index.json`: its `weight_map` (tensor → shard file name),
/// checked: a non-empty object of plain file names in the checkpoint's directory.
pub fn read_index(index: &Path) -> Result<BTreeMap<String, String>> {
    let text = crate::read_bounded(index, 64 << 20)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("invalid JSON in {}", index.display()))?;
    let map = v
        .get("weight_map")
        .with_context(|| format!("{}: field `weight_map` is missing", index.display()))?
        .as_object()
        .with_context(|| format!("{}: field `weight_map` is not an object", index.display()))?;
    if map.is_empty() {
        bail!("{}: field `weight_map` is empty", index.display());
    }
    let mut out = BTreeMap::new();
    for (tensor, file) in map {
        let file = file.as_str().with_context(|| {
            format!(
                "{}: `weight_map` entry `{tensor}` is not a file name",
                index.display()
            )
        })?;
        let plain = Path::new(file)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || file.is_empty() {
            bail!(
                "{}: `weight_map` entry `{tensor}` names `{file}`, not a file in the checkpoint's directory",
                index.display()
            );
        }
        out.insert(tensor.clone(), file.to_string());
    }
    Ok(out)
}

/// Shard names in first-seen order.
fn shards_of(map: &BTreeMap<String, String>) -> Vec<String> {
    let mut shards: Vec<String> = Vec::new();
    for file in map.values() {
        if !shards.iter().any(|s| s == file) {
            shards.push(file.clone());
        }
    }
    shards
}

fn local_files(dir: &Path, label: String) -> Result<ModelFiles> {
    let config = dir.join("config.json");
    if !config.is_file() {
        bail!(
            "{}: missing config.json (is this a model directory?)",
            config.display()
        );
    }
    let single = dir.join("model.safetensors");
    let index = dir.join("model.safetensors.index.json");
    let (weights, routed) = if single.is_file() {
        (vec![single], None)
    } else if index.is_file() {
        let map = read_index(&index)?;
        let weights = shards_of(&map).into_iter().map(|s| dir.join(s)).collect();
        let routes = map.into_iter().map(|(t, f)| (t, dir.join(f))).collect();
        (weights, Some((index, routes)))
    } else {
        bail!(
            "{}: missing model.safetensors (or model.safetensors.index.json)",
            single.display()
        );
    };
    let lora = dir.join("linear_spec_lora");
    Ok(ModelFiles {
        label,
        commit: None,
        config,
        weights,
        tokenizer: dir.join("tokenizer.json"),
        tokenizer_config: existing(dir.join("tokenizer_config.json")),
        chat_template: existing(dir.join("chat_template.jinja")),
        generation_config: existing(dir.join("generation_config.json")),
        lora_dir: lora.join("adapter_config.json").is_file().then_some(lora),
        index: routed,
        notes: Vec::new(),
    })
}

fn env_truthy(name: &str) -> bool {
    std::env::var(name)
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
        .unwrap_or(false)
}

/// The HF cache directory: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn hf_cache_dir() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("HF_HUB_CACHE") {
        return Ok(PathBuf::from(p));
    }
    if let Ok(p) = std::env::var("HF_HOME") {
        return Ok(PathBuf::from(p).join("hub"));
    }
    let home = std::env::var_os("HOME")
        .context("neither HF_HOME nor HOME is set: cannot locate the HF cache")?;
    Ok(PathBuf::from(home)
        .join(".cache")
        .join("huggingface")
        .join("hub"))
}

/// Fetches one file: from the cache only when offline, else cache first then network.
struct HubFetcher {
    id: String,
    revision: String,
    cache: hf_hub::Cache,
    offline: bool,
    api: Option<hf_hub::api::sync::ApiRepo>,
}

impl HubFetcher {
    fn new(id: &str, revision: &str) -> Result<Self> {
        let cache = hf_hub::Cache::new(hf_cache_dir()?);
        let offline = env_truthy("HF_HUB_OFFLINE");
        let repo = Repo::with_revision(id.to_string(), RepoType::Model, revision.to_string());
        let api = if offline {
            None
        } else {
            let mut b =
                hf_hub::api::sync::ApiBuilder::from_cache(cache.clone()).with_progress(true);
            if let Ok(endpoint) = std::env::var("HF_ENDPOINT") {
                b = b.with_endpoint(endpoint);
            }
            // A token in the environment wins over the one `hf auth login` saved in the
            // cache directory (which the builder reads by itself).
            if let Some(token) = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()) {
                b = b.with_token(Some(token));
            }
            Some(
                b.build()
                    .context("cannot start the HF hub client")?
                    .repo(repo),
            )
        };
        Ok(Self {
            id: id.to_string(),
            revision: revision.to_string(),
            cache,
            offline,
            api,
        })
    }

    fn get(&self, file: &str) -> Result<PathBuf> {
        let repo = Repo::with_revision(self.id.clone(), RepoType::Model, self.revision.clone());
        if let Some(p) = self.cache.repo(repo).get(file) {
            return Ok(p);
        }
        match &self.api {
            None => bail!(
                "HF_HUB_OFFLINE is set and {file} of {}@{} is not in the HF cache {}; download it first (huggingface-cli download {}) or unset HF_HUB_OFFLINE",
                self.id,
                self.revision,
                self.cache.path().display(),
                self.id
            ),
            Some(api) => api.get(file).with_context(|| {
                format!(
                    "cannot download {file} of {}@{} from the hub (set HF_HUB_OFFLINE=1 to use only the cache at {})",
                    self.id,
                    self.revision,
                    self.cache.path().display()
                )
            }),
        }
    }

    fn optional(&self, file: &str) -> Option<PathBuf> {
        self.get(file).ok()
    }

    fn commit(&self) -> Option<String> {
        let refs = self
            .cache
            .path()
            .join(format!("models--{}", self.id.replace('/', "--")))
            .join("refs")
            .join(&self.revision);
        crate::read_bounded(&refs, 4096)
            .ok()
            .map(|s| s.trim().to_string())
    }
}

fn hub_files(id: &str, revision: &str) -> Result<ModelFiles> {
    let f = HubFetcher::new(id, revision)?;
    let config = f.get("config.json")?;
    let (weights, routed) = match f.get("model.safetensors") {
        Ok(p) => (vec![p], None),
        Err(single_err) => match f.optional("model.safetensors.index.json") {
            Some(index) => {
                let map = read_index(&index)?;
                let mut paths = BTreeMap::new();
                for shard in shards_of(&map) {
                    paths.insert(shard.clone(), f.get(&shard)?);
                }
                let routes = map
                    .into_iter()
                    .map(|(t, s)| (t, paths[&s].clone()))
                    .collect();
                (paths.into_values().collect(), Some((index, routes)))
            }
            None => return Err(single_err),
        },
    };
    let tokenizer = f.get("tokenizer.json")?;
    let lora_dir = f
        .optional("linear_spec_lora/adapter_config.json")
        .and_then(|c| {
            f.optional("linear_spec_lora/adapter_model.safetensors")
                .map(|_| c)
        })
        .and_then(|c| c.parent().map(Path::to_path_buf));
    let mut notes = Vec::new();
    if lora_dir.is_none() && !f.offline {
        notes.push(format!(
            "{id}@{revision} has no linear_spec_lora/; drafting without the adapter"
        ));
    }
    Ok(ModelFiles {
        notes,
        label: format!("{id}@{revision}"),
        commit: f.commit(),
        config,
        weights,
        tokenizer,
        tokenizer_config: f.optional("tokenizer_config.json"),
        chat_template: f.optional("chat_template.jinja"),
        generation_config: f.optional("generation_config.json"),
        lora_dir,
        index: routed,
    })
}

/// A hub model's `tokenizer.json` alone (the HF cache first; no weights are fetched).
pub fn hub_tokenizer(id: &str, revision: &str) -> Result<PathBuf> {
    HubFetcher::new(id, revision)?.get("tokenizer.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_tells_paths_from_hub_ids() {
        assert_eq!(
            ModelSource::parse(None, None).unwrap(),
            ModelSource::Bundled
        );
        assert_eq!(
            ModelSource::parse(Some("nvidia/Nemotron-Labs-Diffusion-8B"), None).unwrap(),
            ModelSource::Hub {
                id: "nvidia/Nemotron-Labs-Diffusion-8B".into(),
                revision: "main".into()
            }
        );
        let err = ModelSource::parse(Some("./no/such/dir"), None).unwrap_err();
        assert!(err.to_string().contains("local path"), "{err}");
        // An owner-less id is a hub id where no such directory exists.
        assert_eq!(
            ModelSource::parse(Some("gpt2"), Some("v1")).unwrap(),
            ModelSource::Hub {
                id: "gpt2".into(),
                revision: "v1".into()
            }
        );
        for path in ["a/b/c", "my model", "~/m"] {
            let err = ModelSource::parse(Some(path), None).unwrap_err();
            assert!(err.to_string().contains("local path"), "{path}: {err}");
        }
        let tmp = tempfile::tempdir().unwrap();
        let spec = tmp.path().to_str().unwrap();
        assert_eq!(
            ModelSource::parse(Some(spec), None).unwrap(),
            ModelSource::Local(tmp.path().to_path_buf())
        );
        let own = bundled_dir();
        let own = own.to_str().unwrap();
        assert_eq!(
            ModelSource::parse(Some(own), None).unwrap(),
            ModelSource::Bundled
        );
    }
}
