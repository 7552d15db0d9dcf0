//! Helpers shared by the integration tests: checkpoints written on the fly.
#![allow(dead_code)]

use std::path::Path;

use candle_core::{Device, Tensor};
use specscope::model::synthetic::{self, Spec};
use specscope::model::{self, AttnRule, KvCache, LogitSel, Model, ModelSource, Row, RowBatch};

/// The device the model tests run on: `SPECSCOPE_TEST_DEVICE=cuda` on a GPU machine
/// (with `--features cuda`; `scripts/gpu-check.sh` sets it), the CPU otherwise.
pub fn device() -> Device {
    match std::env::var("SPECSCOPE_TEST_DEVICE").as_deref() {
        Ok("cuda") => {
            model::select_device(model::DeviceChoice::Cuda)
                .expect("SPECSCOPE_TEST_DEVICE=cuda needs a `--features cuda` build and a GPU")
                .0
        }
        Ok("cpu") | Err(_) => Device::Cpu,
        Ok(other) => panic!("SPECSCOPE_TEST_DEVICE={other}: expected cpu or cuda"),
    }
}

/// Writes a synthetic checkpoint into a fresh temporary directory.
pub fn checkpoint(spec: &Spec) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    synthetic::write_checkpoint(dir.path(), spec).expect("write checkpoint");
    dir
}

/// Loads a model directory the way the binary does.
pub fn load(dir: &Path) -> Model {
    let files = ModelSource::Local(dir.to_path_buf())
        .resolve()
        .expect("resolve");
    model::load(&files, &device(), model::LoadOptions::default())
        .expect("load")
        .0
}

/// Deterministic pseudo-random token ids below `vocab`, avoiding the mask token.
pub fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut rng = synthetic::Rng::new(seed);
    (0..n)
        .map(|_| loop {
            let t = (rng.next_u64() % vocab as u64) as u32;
            if t != synthetic::MASK_ID {
                break t;
            }
        })
        .collect()
}

/// Runs one row alone against `cache` and returns its logits.
pub fn run_row(model: &Model, cache: &mut KvCache, row: Row) -> Tensor {
    model
        .forward(&RowBatch::single(row), &mut [cache])
        .expect("forward")
        .remove(0)
}

/// Causal logits for every position of `ids` from an empty cache.
pub fn causal_all(model: &Model, ids: &[u32]) -> Tensor {
    let mut cache = model.new_cache();
    run_row(
        model,
        &mut cache,
        Row::new(0, ids.to_vec(), AttnRule::Causal).logits(LogitSel::All),
    )
}

/// max |a - b| / max |b|.
pub fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    let diff = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let scale = b
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    diff / scale.max(1e-12)
}

/// The trained toy checkpoint committed under tests/fixtures (non-trivial acceptance).
pub fn fixture_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toy-nld")
}

/// Held-out chat prompts of every family, encoded with the fixture's tokenizer.
pub fn fixture_prompts(n_per_family: usize) -> (Model, Vec<Vec<u32>>) {
    use specscope::train::corpus::{self, Family};
    let files = ModelSource::Local(fixture_dir())
        .resolve()
        .expect("fixture");
    let (model, _) =
        model::load(&files, &device(), model::LoadOptions::default()).expect("load fixture");
    let tok = model::load_tokenizer(&files, model.config()).expect("tokenizer");
    let none = std::collections::HashSet::new();
    let mut prompts = Vec::new();
    for f in Family::ALL {
        for p in corpus::heldout(77, f, n_per_family, &none) {
            prompts.push(tok.encode_chat(&p.messages(), false).expect("encode"));
        }
    }
    (model, prompts)
}
