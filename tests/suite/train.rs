//! Training: the objective on a toy config, and the bundled model it produced.

use crate::common;

use crate::common::{checkpoint, load, rel_err, run_row, tokens};
use candle_core::{DType, Device, IndexOp, Tensor};
use specscope::engine::generate_ar;
use specscope::model::synthetic::Spec;
use specscope::model::{self, AttnRule, LogitSel, ModelSource, Row};
use specscope::train::trainer::{self, TrainOptions};

/// `ids` as a training batch of one: (1, T) ids, positions 0..T, a causal (T, T) mask.
fn causal_batch(ids: &[u32]) -> (Tensor, Vec<usize>, Tensor) {
    let n = ids.len();
    let mask: Vec<f32> = (0..n * n)
        .map(|i| {
            if i % n > i / n {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let mask = Tensor::from_vec(mask, (n, n), &Device::Cpu).unwrap();
    let input = Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    (input, (0..n).collect(), mask)
}

/// The differentiable training forward equals the fused inference forward.
#[test]
fn training_path_matches_inference_path() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let ids = tokens(20, spec.vocab_size, 3);
    let full = common::causal_all(&model, &ids);
    let (input, positions, mask) = causal_batch(&ids);
    let train = model
        .forward_train(&input, &positions, &mask, None)
        .unwrap()
        .i(0)
        .unwrap();
    assert!(rel_err(&train, &full) < 1e-4, "{}", rel_err(&train, &full));
}

/// The training forward applies the draft adapter as inference does.
#[test]
fn training_path_applies_the_adapter_as_inference_does() {
    let spec = Spec {
        lora_rank: Some(4),
        ..Spec::toy()
    };
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    assert!(model.has_lora());
    let ids = tokens(12, spec.vocab_size, 7);
    let mut cache = model.new_cache();
    let row = Row::new(0, ids.clone(), AttnRule::Causal)
        .lora_from(0)
        .logits(LogitSel::All);
    let inference = run_row(&model, &mut cache, row);
    let (input, positions, mask) = causal_batch(&ids);
    let train = |upto| {
        model
            .forward_train(&input, &positions, &mask, upto)
            .unwrap()
            .i(0)
            .unwrap()
    };
    let with = train(Some(ids.len()));
    assert!(
        rel_err(&with, &inference) < 1e-4,
        "{}",
        rel_err(&with, &inference)
    );
    assert!(
        rel_err(&train(None), &inference) > 1e-3,
        "the adapter changes logits"
    );
}

/// The toy preset's options for a short run in `dir` (no annealing, no held-out files).
fn toy_options(dir: &std::path::Path) -> TrainOptions {
    TrainOptions {
        out: dir.join("model"),
        state: dir.join("state"),
        spec: Spec::toy_trainable(),
        steps: 24,
        anneal_steps: 0,
        draft_shaped: 0.25,
        batch: 4,
        seq_len: 64,
        lr: 5e-3,
        min_lr: 5e-4,
        warmup: 4,
        weight_decay: 0.01,
        clip: 1.0,
        seed: 5,
        exchanges: 400,
        checkpoint_every: 12,
        max_minutes: None,
        prompts_dir: None,
        heldout_per_family: 5,
    }
}

/// A few steps on a toy config lower the loss and leave a checkpoint that loads and
/// generates; running again resumes instead of starting over.
#[test]
fn toy_training_lowers_the_loss_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = TrainOptions {
        prompts_dir: Some(tmp.path().join("prompts")),
        ..toy_options(tmp.path())
    };
    o.steps = 12;
    let first = trainer::train(&o, "test", |_| {}, |_| {}).unwrap();
    assert_eq!(first.step, 12);
    o.steps = 24;
    let state = trainer::train(&o, "test", |_| {}, |_| {}).unwrap();
    assert_eq!(state.step, 24, "resumed from step 12");
    let start: f32 = state.losses[..3].iter().map(|l| l.1).sum::<f32>() / 3.0;
    let end: f32 = state.losses[21..].iter().map(|l| l.1).sum::<f32>() / 3.0;
    assert!(end < start - 0.5, "AR loss {start} -> {end}");
    for f in ["math", "code", "qa"] {
        let text = std::fs::read_to_string(tmp.path().join(format!("prompts/{f}.jsonl"))).unwrap();
        assert_eq!(text.lines().count(), 5);
    }
    let files = ModelSource::Local(o.out.clone()).resolve().unwrap();
    let (m, _) = model::load(&files, &Device::Cpu, model::LoadOptions::default()).unwrap();
    let tok = model::load_tokenizer(&files, m.config()).unwrap();
    let ids = tok
        .encode_raw("<|im_start|>user\nList 5 fruits.<|im_end|>\n")
        .unwrap();
    let g = generate_ar(&m, &ids, 8, &[], |_| Ok(())).unwrap();
    assert_eq!(g.tokens.len(), 8);
}

/// A run is its seed's: the same options elsewhere give the same losses (the weights'
/// draws do not follow a hash map's order or the device's generator).
#[test]
fn toy_training_is_its_seeds() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |dir: &std::path::Path| {
        let o = TrainOptions {
            steps: 12,
            ..toy_options(dir)
        };
        trainer::train(&o, "test", |_| {}, |_| {}).unwrap().losses
    };
    let first = run(one.path());
    assert_eq!(first.len(), 12);
    // A draft adapter left beside the weights drafts for the old ones: training on
    // removes it.
    let adapter = two.path().join("model/linear_spec_lora");
    std::fs::create_dir_all(&adapter).unwrap();
    assert_eq!(first, run(two.path()));
    assert!(!adapter.exists(), "stale adapter removed");
}

/// The annealing phase switches to its own stream and schedule: the learning rate
/// re-warms to a third of the peak and decays to the floor at the last step, and the
/// run finishes with every step logged.
#[test]
fn toy_training_anneals_with_its_own_stream_and_schedule() {
    let tmp = tempfile::tempdir().unwrap();
    let o = TrainOptions {
        steps: 48,
        anneal_steps: 24,
        exchanges: 600,
        checkpoint_every: 24,
        ..toy_options(tmp.path())
    };
    let lr: Vec<f64> = (0..48).map(|s| trainer::lr_at(s, &o)).collect();
    assert!((lr[3] - 5e-3).abs() < 1e-12, "main peak {lr:?}");
    assert!(
        (lr[23] - 5e-4).abs() < 1e-4,
        "main phase ends near the floor {lr:?}"
    );
    let peak = 5e-3 * trainer::ANNEAL_PEAK;
    assert!(
        lr[24] < peak / 2.0,
        "the annealing phase warms up again {lr:?}"
    );
    assert!((lr[35] - peak).abs() < 1e-12, "annealing peak {lr:?}");
    assert!(
        (lr[47] - 5e-4).abs() < 1e-4,
        "annealing ends near the floor {lr:?}"
    );

    let mut notes = Vec::new();
    let state = trainer::train(&o, "test", |_| {}, |n| notes.push(n.to_string())).unwrap();
    assert_eq!(state.step, 48);
    assert!(state
        .losses
        .iter()
        .all(|l| l.1.is_finite() && l.2.is_finite()));
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("annealing stream for 24 steps")),
        "{notes:?}"
    );
    let bad = TrainOptions {
        anneal_steps: 44,
        ..o
    };
    let err = trainer::train(&bad, "test", |_| {}, |_| {}).unwrap_err();
    assert!(format!("{err}").contains("--anneal-steps (44)"), "{err}");
}

/// The bundled model: NLD names and fields, and a chat answer that ends with eos.
#[test]
fn bundled_model_answers_in_the_chat_format() {
    let files = ModelSource::Bundled
        .resolve()
        .expect("the bundled model exists");
    let cfg = specscope::model::Config::from_file(&files.config).unwrap();
    assert_eq!(cfg.model_type, "nemotron_labs_diffusion");
    assert_eq!(cfg.architectures, vec!["NemotronLabsDiffusionModel"]);
    assert!(cfg.mask_token_id.is_some() && !cfg.eos_token_ids().is_empty());
    let st = candle_core::safetensors::load(&files.weights[0], &Device::Cpu).unwrap();
    let mut names: Vec<&String> = st.keys().collect();
    names.sort();
    let expected = specscope::model::expected_tensors(&cfg);
    assert_eq!(names.len(), expected.len());
    assert!(names.iter().all(|n| expected.contains(*n)));
    assert!(st
        .values()
        .all(|t| t.dtype() == DType::F32 || t.dtype() == DType::BF16));
    let size: u64 = std::fs::metadata(&files.weights[0]).unwrap().len();
    assert!(size <= 25 * 1024 * 1024, "{size} bytes");

    let (m, _) = model::load(&files, &Device::Cpu, model::LoadOptions::default()).unwrap();
    let tok = model::load_tokenizer(&files, m.config()).unwrap();
    let ids = tok
        .encode_chat(
            &[specscope::model::ChatMessage::new("user", "List 5 fruits.")],
            false,
        )
        .unwrap();
    let eos = cfg.eos_token_ids();
    let g = generate_ar(&m, &ids, 200, &eos, |_| Ok(())).unwrap();
    assert!(g.tokens.len() > 5);
    assert!(eos.contains(g.tokens.last().unwrap()), "ends with eos");
    let text = tok.decode(&g.tokens).unwrap();
    assert!(!text.trim().is_empty());
}
