//! The tri-mode backbone against an independent implementation and its invariants.

use crate::common;

use std::collections::HashMap;

use crate::common::{causal_all, checkpoint, load, rel_err, run_row, tokens};
use candle_core::{DType, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::mistral;
use specscope::model::synthetic::{self, Spec};
use specscope::model::{AttnRule, LogitSel, Row, RowBatch};

/// Causal logits equal candle-transformers' Mistral on the same weights (names mapped).
#[test]
fn causal_logits_match_candle_mistral() {
    let spec = Spec {
        num_hidden_layers: 3,
        ..Spec::toy()
    };
    let dir = checkpoint(&spec);
    let ours = load(dir.path());

    let weights = synthetic::random_weights(&spec).unwrap();
    let mapped: HashMap<String, Tensor> = weights
        .into_iter()
        .map(|(k, v)| {
            let k = k
                .replace("encoder.", "model.")
                .replace("diffusion_head.", "lm_head.");
            (k, v)
        })
        .collect();
    let cfg = mistral::Config {
        vocab_size: spec.vocab_size,
        hidden_size: spec.hidden_size,
        intermediate_size: spec.intermediate_size,
        num_hidden_layers: spec.num_hidden_layers,
        num_attention_heads: spec.num_attention_heads,
        head_dim: Some(spec.head_dim),
        num_key_value_heads: spec.num_key_value_heads,
        hidden_act: candle_nn::Activation::Silu,
        max_position_embeddings: spec.max_position_embeddings,
        rms_norm_eps: 1e-5,
        rope_theta: spec.rope_theta,
        sliding_window: None,
        use_flash_attn: false,
    };
    let dev = common::device();
    let vb = VarBuilder::from_tensors(mapped, DType::F32, &dev);
    let mut reference = mistral::Model::new(&cfg, vb).unwrap();

    let ids = tokens(24, spec.vocab_size, 1);
    let all = causal_all(&ours, &ids);
    // Prefill 16 tokens, then one token at a time: mistral returns the last position.
    let input = Tensor::new(&ids[..16], &dev).unwrap().unsqueeze(0).unwrap();
    let theirs = reference.forward(&input, 0).unwrap().i((0, 0)).unwrap();
    let err = rel_err(&all.i(15).unwrap(), &theirs);
    assert!(err < 1e-4, "prefill: relative error {err}");
    for (i, &t) in ids.iter().enumerate().skip(16) {
        let input = Tensor::new(&[t], &dev).unwrap().unsqueeze(0).unwrap();
        let theirs = reference.forward(&input, i).unwrap().i((0, 0)).unwrap();
        let err = rel_err(&all.i(i).unwrap(), &theirs);
        assert!(err < 1e-4, "position {i}: relative error {err}");
    }
}

/// One token at a time through the cache gives the full causal recompute.
#[test]
fn incremental_decoding_matches_full_recompute() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let ids = tokens(40, spec.vocab_size, 2);
    let full = causal_all(&model, &ids);
    let mut cache = model.new_cache();
    // Uneven chunks: 10, then 1, 5, 1, 1, ...
    let mut pos = 0;
    for len in [10usize, 1, 5, 1, 1, 7, 15] {
        let row = Row::new(0, ids[pos..pos + len].to_vec(), AttnRule::Causal)
            .commit()
            .logits(LogitSel::All);
        let got = run_row(&model, &mut cache, row);
        let err = rel_err(&got, &full.narrow(0, pos, len).unwrap());
        assert!(err < 1e-5, "chunk at {pos}: {err}");
        pos += len;
    }
    assert_eq!(cache.len(), ids.len());
}

/// Causal logits at i ignore later tokens; bidirectional ones do not.
#[test]
fn causal_is_causal_and_bidirectional_is_not() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let a = tokens(12, spec.vocab_size, 3);
    let mut b = a.clone();
    b[9] = (b[9] + 1) % spec.vocab_size as u32;
    let (ca, cb) = (causal_all(&model, &a), causal_all(&model, &b));
    assert_eq!(
        rel_err(&ca.narrow(0, 0, 9).unwrap(), &cb.narrow(0, 0, 9).unwrap()),
        0.0
    );
    assert!(rel_err(&ca.i(10).unwrap(), &cb.i(10).unwrap()) > 1e-3);

    let bidi = |ids: &[u32]| {
        let mut cache = model.new_cache();
        run_row(
            &model,
            &mut cache,
            Row::new(0, ids.to_vec(), AttnRule::Bidirectional).logits(LogitSel::All),
        )
    };
    let (ba, bb) = (bidi(&a), bidi(&b));
    assert!(
        rel_err(&ba.i(2).unwrap(), &bb.i(2).unwrap()) > 1e-3,
        "earlier positions see later tokens"
    );
    assert!(
        rel_err(&ba, &ca) > 1e-3,
        "bidirectional differs from causal"
    );
}

/// Layer-0 K/V depend only on embeddings: equal in both modes; deeper layers differ.
#[test]
fn layer0_kv_agree_across_modes() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let ids = tokens(10, spec.vocab_size, 4);
    let mut causal = model.new_cache();
    let mut bidi = model.new_cache();
    run_row(
        &model,
        &mut causal,
        Row::new(0, ids.clone(), AttnRule::Causal).commit(),
    );
    run_row(
        &model,
        &mut bidi,
        Row::new(0, ids, AttnRule::Bidirectional).commit(),
    );
    let (k0c, v0c) = causal.layer_kv(0).unwrap().unwrap();
    let (k0b, v0b) = bidi.layer_kv(0).unwrap().unwrap();
    assert_eq!(rel_err(&k0c, &k0b), 0.0);
    assert_eq!(rel_err(&v0c, &v0b), 0.0);
    let (k1c, _) = causal.layer_kv(1).unwrap().unwrap();
    let (k1b, _) = bidi.layer_kv(1).unwrap().unwrap();
    assert!(rel_err(&k1c, &k1b) > 1e-4);
}

/// Read-only rows never change the cache; truncate then re-append reproduces logits.
#[test]
fn read_only_rows_and_truncation() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let ids = tokens(30, spec.vocab_size, 5);
    let mut cache = model.new_cache();
    run_row(
        &model,
        &mut cache,
        Row::new(0, ids[..20].to_vec(), AttnRule::Causal).commit(),
    );
    let before = cache.layer_kv(1).unwrap().unwrap().0;
    for rule in [
        AttnRule::Bidirectional,
        AttnRule::Causal,
        AttnRule::CausalThenBlock { causal_len: 3 },
    ] {
        run_row(
            &model,
            &mut cache,
            Row::new(0, ids[20..].to_vec(), rule).logits(LogitSel::All),
        );
        assert_eq!(cache.len(), 20, "{rule:?} changed the length");
    }
    assert_eq!(
        rel_err(&cache.layer_kv(1).unwrap().unwrap().0, &before),
        0.0
    );

    // Speculative crop: append 10 (a "verify"), keep 4, re-append the rest.
    let verify = Row::new(0, ids[20..].to_vec(), AttnRule::Causal)
        .commit()
        .logits(LogitSel::All);
    let first = run_row(&model, &mut cache, verify);
    cache.truncate(24).unwrap();
    let again = Row::new(0, ids[24..].to_vec(), AttnRule::Causal)
        .commit()
        .logits(LogitSel::All);
    let second = run_row(&model, &mut cache, again);
    assert!(rel_err(&second, &first.narrow(0, 4, 6).unwrap()) < 1e-5);
    assert_eq!(cache.len(), 30);
    assert!(cache.truncate(31).is_err());
}

/// Rows of different requests (and of one request) in one forward equal each alone.
#[test]
fn batched_rows_equal_rows_alone() {
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let pa = tokens(17, spec.vocab_size, 6);
    let pb = tokens(5, spec.vocab_size, 7);
    let mut ca = model.new_cache();
    let mut cb = model.new_cache();
    run_row(&model, &mut ca, Row::new(0, pa, AttnRule::Causal).commit());
    run_row(&model, &mut cb, Row::new(0, pb, AttnRule::Causal).commit());
    let block = tokens(8, spec.vocab_size, 8);
    let rows = vec![
        Row::new(0, block.clone(), AttnRule::Causal)
            .commit()
            .logits(LogitSel::All),
        Row::new(1, block[..4].to_vec(), AttnRule::Bidirectional).logits(LogitSel::All),
        Row::new(
            0,
            [&block[..3], &[synthetic::MASK_ID; 6][..]].concat(),
            AttnRule::CausalThenBlock { causal_len: 3 },
        )
        .logits(LogitSel::Range { start: 3, len: 6 }),
        Row::new(1, block[..6].to_vec(), AttnRule::Causal).logits(LogitSel::Last),
    ];
    // Alone first (read-only, so the caches stay as they are).
    let alone: Vec<Tensor> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.commit = false;
            let cache = if r.cache == 0 { &mut ca } else { &mut cb };
            r.cache = 0;
            run_row(&model, cache, r)
        })
        .collect();
    assert_eq!(ca.len(), 17);
    let batched = model
        .forward(&RowBatch::new(rows), &mut [&mut ca, &mut cb])
        .unwrap();
    for (i, (x, y)) in batched.iter().zip(&alone).enumerate() {
        assert_eq!(x.dims(), y.dims(), "row {i}");
        assert!(rel_err(x, y) < 1e-5, "row {i}: {}", rel_err(x, y));
    }
    assert_eq!((ca.len(), cb.len()), (25, 5), "only row 0 commits");
    // The committed K/V are the verify row's, not the later branch row's.
    let mut fresh = model.new_cache();
    let pa = tokens(17, spec.vocab_size, 6);
    run_row(
        &model,
        &mut fresh,
        Row::new(0, [pa, block].concat(), AttnRule::Causal).commit(),
    );
    for l in 0..spec.num_hidden_layers {
        let (k1, v1) = ca.layer_kv(l).unwrap().unwrap();
        let (k2, v2) = fresh.layer_kv(l).unwrap().unwrap();
        assert!(
            rel_err(&k1, &k2) < 1e-5 && rel_err(&v1, &v2) < 1e-5,
            "layer {l}"
        );
    }
}

/// The 14B geometry (head_dim ≠ hidden / heads) builds and runs at toy width.
#[test]
fn geometry_with_explicit_head_dim() {
    let spec = Spec {
        hidden_size: 40,
        num_attention_heads: 4,
        num_key_value_heads: 1,
        head_dim: 16,
        yarn: Some((16.0, 64)),
        rope_theta: 1e9,
        dtype: DType::BF16,
        ..Spec::toy()
    };
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    assert_eq!(model.config().head_dim(), 16);
    let ids = tokens(12, spec.vocab_size, 9);
    let logits = causal_all(&model, &ids);
    assert_eq!(logits.dims(), &[12, spec.vocab_size]);
    assert!(logits
        .to_vec2::<f32>()
        .unwrap()
        .iter()
        .flatten()
        .all(|x| x.is_finite()));
}

/// The Llama-4 query scale is an identity inside the original window and changes the
/// logits of positions beyond it (same weights with and without the scale).
#[test]
fn query_scale_applies_beyond_original_window_only() {
    let spec = Spec {
        yarn: Some((1.0, 64)),
        ..Spec::toy()
    };
    let with_dir = checkpoint(&spec);
    let without_dir = checkpoint(&spec);
    let cfg_path = without_dir.path().join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["rope_parameters"]
        .as_object_mut()
        .unwrap()
        .remove("llama_4_scaling_beta");
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let (with, without) = (load(with_dir.path()), load(without_dir.path()));
    let ids = tokens(100, spec.vocab_size, 10);
    let (a, b) = (causal_all(&with, &ids), causal_all(&without, &ids));
    assert_eq!(
        rel_err(&a.narrow(0, 0, 64).unwrap(), &b.narrow(0, 0, 64).unwrap()),
        0.0
    );
    assert!(rel_err(&a.narrow(0, 64, 36).unwrap(), &b.narrow(0, 64, 36).unwrap()) > 1e-4);
    let scales = with.rope().query_scales(&[10, 70, 130]).unwrap();
    assert_eq!(scales[0], 1.0);
    assert!(scales[1] > 1.06 && scales[2] > scales[1]);
    assert!(with.rope().query_scales(&[0, 63]).is_none());
}

/// The draft LoRA changes only the tokens marked for it.
#[test]
fn lora_applies_only_to_marked_tokens() {
    let spec = Spec {
        lora_rank: Some(4),
        ..Spec::toy()
    };
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    assert!(model.has_lora());
    let ids = tokens(10, spec.vocab_size, 12);
    let plain = causal_all(&model, &ids);
    let mut cache = model.new_cache();
    let row = Row::new(0, ids, AttnRule::Causal)
        .lora_from(6)
        .logits(LogitSel::All);
    let with = run_row(&model, &mut cache, row);
    assert_eq!(
        rel_err(
            &with.narrow(0, 0, 6).unwrap(),
            &plain.narrow(0, 0, 6).unwrap()
        ),
        0.0
    );
    assert!(
        rel_err(
            &with.narrow(0, 6, 4).unwrap(),
            &plain.narrow(0, 6, 4).unwrap()
        ) > 1e-4
    );
}
