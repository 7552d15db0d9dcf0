//! Bad model directories: every case is a clear error naming the file and the field
//! or tensor, or it loads and decodes; never a panic, a hang, an allocation in
//! proportion to an absurd number, or a silent wrong answer. A mutation loop over the
//! toy checkpoint's config.json generates cases (`SPECSCOPE_MUTATIONS` sets how many).

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use proptest::prelude::*;
use specscope::engine::{generate_ar, NullSink, Scheduler, Submit};
use specscope::model::synthetic::{self, Spec};
use specscope::model::{self, ChatMessage, LoadOptions, ModelSource};

fn files(dir: &Path) -> specscope::model::ModelFiles {
    ModelSource::Local(dir.to_path_buf()).resolve().unwrap()
}

fn load_err(dir: &Path) -> String {
    match model::load(&files(dir), &Device::Cpu, LoadOptions::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => format!("{e:#}"),
    }
}

fn edit_config(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(p, v.to_string()).unwrap();
}

fn weights(dir: &Path) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap()
}

fn save(dir: &Path, name: &str, w: &HashMap<String, Tensor>) {
    candle_core::safetensors::save(w, dir.join(name)).unwrap();
}

/// model.safetensors with tensor `name` set to `t` (added or replaced).
fn set_weight(dir: &Path, name: &str, t: Tensor) {
    let mut w = weights(dir);
    w.insert(name.into(), t);
    save(dir, "model.safetensors", &w);
}

#[test]
fn absurd_sizes_fail_before_allocating_naming_the_field() {
    for (field, value) in [
        ("num_hidden_layers", serde_json::json!(1_000_000_000u64)),
        ("num_hidden_layers", serde_json::json!(u64::MAX)),
        ("num_attention_heads", serde_json::json!(1u64 << 58)),
        ("vocab_size", serde_json::json!(1u64 << 40)),
        ("max_position_embeddings", serde_json::json!(u64::MAX)),
    ] {
        let dir = common::checkpoint(&Spec::toy());
        edit_config(dir.path(), |v| v[field] = value.clone());
        let e = load_err(dir.path());
        assert!(
            e.contains(field) && e.contains("config.json"),
            "{field}: {e}"
        );
    }
    // A layer count the weights do not hold.
    let dir = common::checkpoint(&Spec::toy());
    edit_config(dir.path(), |v| v["num_hidden_layers"] = 1.into());
    let e = load_err(dir.path());
    assert!(
        e.contains("num_hidden_layers") && e.contains("2 layers"),
        "{e}"
    );
    let dir = common::checkpoint(&Spec::toy());
    edit_config(dir.path(), |v| v["num_hidden_layers"] = 5.into());
    assert!(load_err(dir.path()).contains("num_hidden_layers"));
}

#[test]
fn unusable_numbers_in_the_config_are_refused() {
    for (name, edit) in [
        (
            "rms_norm_eps",
            Box::new(|v: &mut serde_json::Value| v["rms_norm_eps"] = 1e300.into())
                as Box<dyn Fn(&mut serde_json::Value)>,
        ),
        (
            "original_max_position_embeddings",
            Box::new(|v: &mut serde_json::Value| {
                v["rope_parameters"] = serde_json::json!({"rope_type": "yarn", "rope_theta": 1e4,
                    "original_max_position_embeddings": 0});
            }),
        ),
        (
            "sliding_window",
            Box::new(|v: &mut serde_json::Value| v["sliding_window"] = 16.into()),
        ),
        (
            "rope_theta",
            Box::new(|v: &mut serde_json::Value| v["rope_parameters"]["rope_theta"] = 1e300.into()),
        ),
    ] {
        let dir = common::checkpoint(&Spec::toy());
        edit_config(dir.path(), |v| edit(v));
        let e = load_err(dir.path());
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn nan_weights_are_refused_naming_the_file_and_tensor() {
    for bad in [f32::NAN, f32::INFINITY] {
        let dir = common::checkpoint(&Spec::toy());
        let h = weights(dir.path())["encoder.norm.weight"].dims1().unwrap();
        let mut v = vec![1.0f32; h];
        v[3] = bad;
        v[5] = bad;
        set_weight(
            dir.path(),
            "encoder.norm.weight",
            Tensor::from_vec(v, h, &Device::Cpu).unwrap(),
        );
        let e = load_err(dir.path());
        assert!(
            e.contains("model.safetensors")
                && e.contains("encoder.norm.weight")
                && e.contains("2 NaN or infinite values (the first at element 3)"),
            "{e}"
        );
    }
}

/// Finite weights whose products overflow: the request stops with an error instead
/// of emitting token 0 for ever.
#[test]
fn overflowing_weights_stop_the_request_with_an_error_not_token_0_forever() {
    let dir = common::checkpoint(&Spec::toy());
    let h = weights(dir.path())["encoder.norm.weight"].dims1().unwrap();
    set_weight(
        dir.path(),
        "encoder.norm.weight",
        Tensor::from_vec(vec![f32::MAX; h], h, &Device::Cpu).unwrap(),
    );
    let (m, _) = model::load(&files(dir.path()), &Device::Cpu, LoadOptions::default()).unwrap();
    let e = generate_ar(&m, &[1, 20, 21], 8, &[], |_| Ok(())).unwrap_err();
    assert!(format!("{e:#}").contains("non-finite logits"), "{e:#}");
    let mut sched = Scheduler::new(m, None);
    sched
        .submit(
            Submit {
                prompt: vec![1, 20, 21],
                options: Default::default(),
                family: None,
            },
            &mut NullSink,
        )
        .unwrap();
    let e = sched.run_to_completion(&mut NullSink).unwrap_err();
    assert!(format!("{e:#}").contains("non-finite logits"), "{e:#}");
}

#[test]
fn weights_the_config_does_not_describe_are_errors() {
    // Integer weights.
    let dir = common::checkpoint(&Spec::toy());
    let mut w = weights(dir.path());
    let t = w["encoder.norm.weight"].to_dtype(DType::I64).unwrap();
    w.insert("encoder.norm.weight".into(), t);
    save(dir.path(), "model.safetensors", &w);
    let e = load_err(dir.path());
    assert!(
        e.contains("encoder.norm.weight") && e.contains("I64"),
        "{e}"
    );
    // A tensor the architecture does not use.
    let dir = common::checkpoint(&Spec::toy());
    set_weight(
        dir.path(),
        "encoder.layers.0.extra.weight",
        Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap(),
    );
    let e = load_err(dir.path());
    assert!(
        e.contains("model.safetensors: holds a tensor this architecture does not use")
            && e.contains("encoder.layers.0.extra.weight")
            && e.contains("config.json"),
        "{e}"
    );
    // A wrong shape names the tensor.
    let dir = common::checkpoint(&Spec::toy());
    edit_config(dir.path(), |v| v["intermediate_size"] = 96.into());
    assert!(load_err(dir.path()).contains("mlp"));
}

/// Writes the toy checkpoint as two shards with an index; `dup`: the embedding is in
/// both shards, the second one's zeroed.
fn sharded(dup: bool) -> tempfile::TempDir {
    let dir = common::checkpoint(&Spec::toy());
    let w = weights(dir.path());
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let (mut a, mut b) = (HashMap::new(), HashMap::new());
    let mut map = serde_json::Map::new();
    for (k, t) in w {
        let first = k.contains("layers.0") || k.contains("embed");
        map.insert(
            k.clone(),
            if first {
                "a.safetensors"
            } else {
                "b.safetensors"
            }
            .into(),
        );
        if first {
            if dup && k.contains("embed") {
                b.insert(k.clone(), t.zeros_like().unwrap());
            }
            a.insert(k, t);
        } else {
            b.insert(k, t);
        }
    }
    save(dir.path(), "a.safetensors", &a);
    save(dir.path(), "b.safetensors", &b);
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        serde_json::json!({"weight_map": map}).to_string(),
    )
    .unwrap();
    dir
}

#[test]
fn shards_are_read_as_the_index_says() {
    let reference = common::checkpoint(&Spec::toy());
    let want = common::causal_all(&common::load(reference.path()), &[1, 20, 21]);
    let dir = sharded(true);
    let got = common::causal_all(&common::load(dir.path()), &[1, 20, 21]);
    assert!(
        common::rel_err(&got, &want) < 1e-6,
        "the index's shard, not the other"
    );
    // Without the index, a tensor in two shards is an error naming both.
    let st = dir.path();
    let mut f = files(st);
    f.index = None;
    let e = format!(
        "{:#}",
        model::load(&f, &Device::Cpu, LoadOptions::default()).unwrap_err()
    );
    assert!(
        e.contains("a.safetensors") && e.contains("b.safetensors"),
        "{e}"
    );
    // A bad weight_map names the index.
    for bad in [
        serde_json::json!({}),
        serde_json::json!({"x": 3}),
        serde_json::json!([1]),
    ] {
        std::fs::write(
            st.join("model.safetensors.index.json"),
            serde_json::json!({ "weight_map": bad }).to_string(),
        )
        .unwrap();
        let e = format!(
            "{:#}",
            ModelSource::Local(st.to_path_buf()).resolve().unwrap_err()
        );
        assert!(
            e.contains("model.safetensors.index.json") && e.contains("weight_map"),
            "{e}"
        );
    }
}

#[test]
fn generation_config_eos_is_used() {
    let dir = common::checkpoint(&Spec::toy());
    edit_config(dir.path(), |v| {
        v.as_object_mut().unwrap().remove("eos_token_id");
    });
    std::fs::write(
        dir.path().join("generation_config.json"),
        serde_json::json!({"eos_token_id": [6, 2]}).to_string(),
    )
    .unwrap();
    let (m, _) = model::load(&files(dir.path()), &Device::Cpu, LoadOptions::default()).unwrap();
    assert_eq!(m.config().eos_token_ids(), vec![6, 2]);
}

#[test]
fn templates_are_bounded_and_tokenizers_checked() {
    let dir = common::checkpoint(&Spec::toy());
    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    )
    .unwrap();
    let f = files(dir.path());
    let tok = specscope::model::TextTokenizer::load(&f, Some(1)).unwrap();
    let e = format!(
        "{:#}",
        tok.encode_chat(&[ChatMessage::new("user", "hi")], false)
            .unwrap_err()
    );
    assert!(e.contains("chat_template.jinja"), "{e}");
    // An unknown bos_token is an error, not text.
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::json!({"bos_token": "<|begin_of_nothing|>"}).to_string(),
    )
    .unwrap();
    let e = format!(
        "{:#}",
        specscope::model::TextTokenizer::load(&f, Some(1))
            .err()
            .unwrap()
    );
    assert!(
        e.contains("bos_token") && e.contains("<|begin_of_nothing|>"),
        "{e}"
    );
    // A model vocabulary beyond the tokenizer's is said.
    let big = Spec {
        vocab_size: 4096,
        ..Spec::toy()
    };
    let dir = common::checkpoint(&big);
    let f = files(dir.path());
    let (m, _) = model::load(&f, &Device::Cpu, LoadOptions::default()).unwrap();
    let tok = model::load_tokenizer(&f, m.config()).unwrap();
    let w = tok.vocab_warning(m.config()).expect("a warning");
    assert!(w.contains("4096"), "{w}");
    // A tokenizer id the embedding has no row for is said when it loads (it was
    // found only when a prompt used it).
    let mut small = m.config().clone();
    small.vocab_size = 100;
    let w = tok.vocab_warning(&small).expect("a warning");
    assert!(
        w.contains("vocab_size is 100") && w.contains("no embedding"),
        "{w}"
    );
}

/// Prompt files: an empty one, a `--skip` past every prompt and a prompt longer than
/// the context each fail naming the file (and line).
#[test]
fn prompt_files_fail_naming_their_line() {
    use specscope::bench::prompts::{encode, read_prompt_file};
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let e = format!("{:#}", read_prompt_file(&empty).unwrap_err());
    assert!(e.contains("empty.jsonl: no prompts"), "{e}");

    let file = dir.path().join("p.jsonl");
    let long = "word ".repeat(3000);
    std::fs::write(
        &file,
        format!(
            "{}\n\n{}\n",
            serde_json::json!({"prompt": "hi", "family": "qa"}),
            serde_json::json!({"prompt": long, "family": "qa"})
        ),
    )
    .unwrap();
    let records = read_prompt_file(&file).unwrap();
    let files = ModelSource::Local(common::fixture_dir()).resolve().unwrap();
    let (m, _) = model::load(&files, &Device::Cpu, LoadOptions::default()).unwrap();
    let tok = model::load_tokenizer(&files, m.config()).unwrap();
    let context = m.config().max_position_embeddings;
    let e = format!(
        "{:#}",
        encode(&records, &tok, 0, None, context).unwrap_err()
    );
    assert!(
        e.contains("p.jsonl:3: the prompt has") && e.contains(&format!("context is {context}")),
        "{e}"
    );
    assert_eq!(
        encode(&records, &tok, 0, Some(1), context).unwrap().len(),
        1
    );
    let e = format!(
        "{:#}",
        encode(&records, &tok, 2, None, context).unwrap_err()
    );
    assert!(e.contains("--skip 2"), "{e}");
}

/// Cases of the mutation loop.
fn mutation_cases() -> u32 {
    std::env::var("SPECSCOPE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(120, |n| n.max(1))
}

const FIELDS: &[&str] = &[
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "rms_norm_eps",
    "mask_token_id",
    "bos_token_id",
    "eos_token_id",
    "sliding_window",
    "tie_word_embeddings",
    "rope_parameters",
];

fn value(i: usize) -> serde_json::Value {
    use serde_json::json;
    [
        json!(0),
        json!(1),
        json!(-1),
        json!(3),
        json!(64),
        json!(1u64 << 32),
        json!(u64::MAX),
        json!(1e300),
        json!(-1e-300),
        json!(null),
        json!("x"),
        json!([1, 2]),
        json!({"rope_type": "yarn", "factor": 0}),
        json!(true),
    ][i % 14]
        .clone()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(mutation_cases()))]

    /// A field of config.json set to anything: a clear error naming config.json, or a
    /// model that loads and decodes a few tokens (or stops with an error).
    #[test]
    fn mutated_configs_fail_cleanly_or_work(field in 0usize..FIELDS.len(), v in 0usize..14, remove in proptest::bool::weighted(0.1)) {
        let dir = common::checkpoint(&Spec::toy());
        let field = FIELDS[field];
        edit_config(dir.path(), |c| {
            if remove {
                c.as_object_mut().unwrap().remove(field);
            } else {
                c[field] = value(v);
            }
        });
        match model::load(&files(dir.path()), &Device::Cpu, LoadOptions::default()) {
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.contains("config.json") || msg.contains("weights") || msg.contains("tensor"), "{msg}");
            }
            Ok((m, _)) => {
                let eos = m.config().eos_token_ids();
                let _ = generate_ar(&m, &[1, 20, 21], 4, &eos, |_| Ok(()));
            }
        }
    }
}

#[test]
fn synthetic_checkpoints_are_what_the_tests_mutate() {
    // The mutation loop starts from a checkpoint that loads and decodes.
    let dir = common::checkpoint(&Spec::toy());
    let (m, r) = model::load(&files(dir.path()), &Device::Cpu, LoadOptions::default()).unwrap();
    assert_eq!(
        r.tensors,
        synthetic::random_weights(&Spec::toy()).unwrap().len()
    );
    generate_ar(&m, &[1, 20, 21], 4, &[], |_| Ok(())).unwrap();
}

/// Every file specscope reads whole is read with a bound: a device that never ends
/// (or a huge file) is an error naming it, not an allocation without end.
#[test]
fn files_read_whole_are_bounded() {
    let zero = Path::new("/dev/zero");
    if !zero.exists() {
        eprintln!("skipped: no /dev/zero here");
        return;
    }
    let e = specscope::engine::cost::CostModel::from_file(zero).unwrap_err();
    assert!(format!("{e:#}").contains("/dev/zero"), "{e:#}");
    let e = specscope::engine::policy::SurvivalTables::from_file(zero).unwrap_err();
    assert!(format!("{e:#}").contains("/dev/zero"), "{e:#}");
    let e = specscope::bench::prompts::read_prompt_file(zero).unwrap_err();
    assert!(format!("{e:#}").contains("not a file"), "{e:#}");
}

/// Chat templates that render without the user's message (empty, blank, ignoring
/// `messages`, writing only roles): refused when the model loads, naming the template.
#[test]
fn templates_that_drop_the_message_are_refused() {
    let dir = common::checkpoint(&Spec::toy());
    let templates = [
        "",
        "   \n",
        "{{ 'system' }}",
        "{% for m in messages %}{% endfor %}<|im_start|>assistant\n",
        "{% for m in messages %}{{ m.role }}{% endfor %}",
        "{% if false %}{{ messages[0].content }}{% endif %}answer",
        "{{ messages[0].content[:3] }}",
    ];
    for t in templates {
        std::fs::write(dir.path().join("chat_template.jinja"), t).unwrap();
        let e = specscope::model::TextTokenizer::load(&files(dir.path()), Some(1))
            .err()
            .map(|e| format!("{e:#}"));
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("chat_template.jinja")
                    && e.contains("leaves the user's message out")),
            "{t:?}: {e:?}"
        );
    }
    // A template that writes the message loads and encodes it.
    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    )
    .unwrap();
    let tok = specscope::model::TextTokenizer::load(&files(dir.path()), Some(1)).unwrap();
    tok.encode_chat(&[ChatMessage::new("user", "hi there")], false)
        .unwrap();
}

/// Special ids that contradict each other or the tokenizer: mask shared with eos, bos
/// or pad (in config.json or generation_config.json), and mask or eos on an ordinary
/// token. Each is refused when the model loads, naming the field.
#[test]
fn special_ids_that_contradict_the_tokenizer_are_refused() {
    let spec = Spec::toy();
    let base = common::checkpoint(&spec);
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.path().join("config.json")).unwrap())
            .unwrap();
    let mask = cfg["mask_token_id"].as_u64().unwrap();
    let eos = cfg["eos_token_id"].clone();
    // An ordinary token: a byte of the byte-level vocabulary ('A').
    let word = u64::from(synthetic::BYTE_BASE) + 65;
    let config_cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("eos_token_id", serde_json::json!(mask), "eos_token_id"),
        (
            "eos_token_id",
            serde_json::json!([eos.clone(), mask]),
            "eos_token_id",
        ),
        ("bos_token_id", serde_json::json!(mask), "bos_token_id"),
        ("pad_token_id", serde_json::json!(mask), "pad_token_id"),
        ("mask_token_id", serde_json::json!(word), "mask_token_id"),
        ("eos_token_id", serde_json::json!(word), "eos_token_id"),
    ];
    for (field, value, needle) in config_cases {
        let dir = common::checkpoint(&spec);
        let mut c = cfg.clone();
        c[field] = value.clone();
        std::fs::write(dir.path().join("config.json"), c.to_string()).unwrap();
        // Its eos would replace config.json's.
        let _ = std::fs::remove_file(dir.path().join("generation_config.json"));
        let f = files(dir.path());
        let e = match model::load(&f, &Device::Cpu, LoadOptions::default()) {
            Err(e) => format!("{e:#}"),
            Ok((m, _)) => match model::load_tokenizer(&f, m.config()) {
                Err(e) => format!("{e:#}"),
                Ok(_) => String::from("loaded"),
            },
        };
        assert!(
            e.contains(needle) && e.contains("config.json"),
            "{field} = {value}: {e}"
        );
    }
    // generation_config.json's eos replacing config.json's with the mask.
    let dir = common::checkpoint(&spec);
    std::fs::write(
        dir.path().join("generation_config.json"),
        serde_json::json!({"eos_token_id": [mask]}).to_string(),
    )
    .unwrap();
    let e = load_err(dir.path());
    assert!(
        e.contains("generation_config.json") && e.contains("mask_token_id"),
        "{e}"
    );
}

/// Draft adapters that would change the draft silently: a `lora_alpha` that drowns
/// it, a rank out of range, matrices for a layer the model lacks or another module.
#[test]
fn hostile_draft_adapters_are_refused() {
    let spec = Spec {
        lora_rank: Some(4),
        ..Spec::toy()
    };
    type Break = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Break)> = vec![
        (
            "lora_alpha",
            Box::new(|d| set_adapter(d, "lora_alpha", serde_json::json!(1e30))),
        ),
        (
            "lora_alpha",
            Box::new(|d| set_adapter(d, "lora_alpha", serde_json::json!(-1e30))),
        ),
        (
            "lora_alpha",
            Box::new(|d| set_adapter(d, "lora_alpha", serde_json::json!(1e5))),
        ),
        (
            "`r`",
            Box::new(|d| set_adapter(d, "r", serde_json::json!(1u64 << 40))),
        ),
        (
            "layers",
            Box::new(move |d| {
                add_adapter_tensor(
                    d,
                    &format!(
                        "base_model.model.encoder.layers.{}.self_attn.o_proj.lora_A.weight",
                        Spec::toy().num_hidden_layers
                    ),
                )
            }),
        ),
        (
            "not an o_proj",
            Box::new(|d| {
                add_adapter_tensor(
                    d,
                    "base_model.model.encoder.layers.0.self_attn.q_proj.lora_A.weight",
                )
            }),
        ),
    ];
    for (needle, break_it) in cases {
        let dir = common::checkpoint(&spec);
        break_it(dir.path());
        let e = load_err(dir.path());
        assert!(
            e.contains(needle) && e.contains("linear_spec_lora"),
            "{needle}: {e}"
        );
    }
}

fn set_adapter(dir: &Path, field: &str, v: serde_json::Value) {
    let p = dir.join("linear_spec_lora/adapter_config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    c[field] = v;
    std::fs::write(&p, c.to_string()).unwrap();
}

fn add_adapter_tensor(dir: &Path, name: &str) {
    let p = dir.join("linear_spec_lora/adapter_model.safetensors");
    let mut t = candle_core::safetensors::load(&p, &Device::Cpu).unwrap();
    let like = t.values().next().unwrap().clone();
    t.insert(name.to_string(), like);
    candle_core::safetensors::save(&t, &p).unwrap();
}

/// A safetensors header whose tensors share bytes (each of several pairs of tensors of
/// one size pointed at the same data): refused naming both, not loaded twice.
#[test]
fn overlapping_tensors_in_a_weight_file_are_refused() {
    let base = common::checkpoint(&Spec::toy());
    let bytes = std::fs::read(base.path().join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let len = |e: &serde_json::Value| {
        let o = e["data_offsets"].as_array().unwrap();
        o[1].as_u64().unwrap() - o[0].as_u64().unwrap()
    };
    let names: Vec<String> = header
        .keys()
        .filter(|k| *k != "__metadata__")
        .cloned()
        .collect();
    let mut cases = 0;
    for (i, a) in names.iter().enumerate() {
        let Some(b) = names[i + 1..]
            .iter()
            .find(|b| len(&header[b.as_str()]) == len(&header[a.as_str()]))
        else {
            continue;
        };
        let mut h = header.clone();
        let offsets = header[a.as_str()]["data_offsets"].clone();
        h.insert(b.clone(), {
            let mut e = header[b.as_str()].clone();
            e["data_offsets"] = offsets;
            e
        });
        let mut text = serde_json::to_vec(&h).unwrap();
        if text.len() > n {
            continue;
        }
        text.resize(n, b' ');
        let dir = common::checkpoint(&Spec::toy());
        let mut out = bytes[..8].to_vec();
        out.extend_from_slice(&text);
        out.extend_from_slice(&bytes[8 + n..]);
        std::fs::write(dir.path().join("model.safetensors"), out).unwrap();
        let e = load_err(dir.path());
        assert!(
            e.contains("overlap") && e.contains("model.safetensors"),
            "{a} {b}: {e}"
        );
        cases += 1;
        if cases == 6 {
            break;
        }
    }
    assert!(cases >= 3, "{cases}");
}
