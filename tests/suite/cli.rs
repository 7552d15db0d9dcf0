//! The binary as a user runs it: generation, inspection and every kind of bad input.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::checkpoint;
use specscope::files;
use specscope::model::synthetic::{self, Spec};

fn specscope(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_specscope"));
    cmd.args(args)
        .env_remove("SPECSCOPE_MODEL")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null());
    cmd
}

fn run(args: &[&str]) -> Output {
    specscope(args).output().expect("run specscope")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Fails cleanly: non-zero exit, a message containing `needle`, no panic.
fn assert_clean_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert!(err.contains(needle), "message lacks {needle:?}: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
}

fn dir_arg(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn run_json_generates_and_reports_stats() {
    let dir = checkpoint(&Spec::toy());
    let o = run(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "--prompt",
        "hello",
        "--max-new-tokens",
        "12",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Read with the type `run` writes it with.
    let v: files::RunDoc = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.format, files::Format::new("run", files::RUN_VERSION));
    let tokens = &v.tokens;
    assert!(!tokens.is_empty() && tokens.len() <= 12);
    let prompt = &v.prompt_tokens;
    assert_eq!(prompt[0], synthetic::BOS_ID, "starts with BOS");
    assert_eq!(
        prompt.iter().filter(|&&t| t == synthetic::BOS_ID).count(),
        1,
        "exactly one BOS"
    );
    assert_eq!(v.stats.new_tokens, tokens.len());
    assert!(tokens.iter().all(|&t| t != synthetic::MASK_ID));
    // Deterministic: same command, same tokens; the prompt also comes from stdin.
    let mut cmd = specscope(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "--max-new-tokens",
        "12",
        "--json",
    ]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let o2 = child.wait_with_output().unwrap();
    assert!(o2.status.success(), "{}", stderr(&o2));
    let v2: files::RunDoc = serde_json::from_slice(&o2.stdout).unwrap();
    assert_eq!(v.tokens, v2.tokens);
}

#[test]
fn run_streams_text() {
    let dir = checkpoint(&Spec::toy());
    let o = run(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "--prompt",
        "hi",
        "--max-new-tokens",
        "5",
        "--raw",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("decode forwards"));
}

#[test]
fn inspect_prints_causal_and_bidirectional_top_k() {
    let dir = checkpoint(&Spec {
        lora_rank: Some(2),
        ..Spec::toy()
    });
    let o = run(&[
        "inspect",
        "--model",
        &dir_arg(dir.path()),
        "--prompt",
        "2+2=",
        "--block",
        "4",
        "--top-k",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: files::InspectDoc = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v.format,
        files::Format::new("inspect", files::INSPECT_VERSION)
    );
    assert_eq!(v.causal.top.len(), 3);
    let positions = &v.bidirectional.positions;
    assert_eq!(positions.len(), 4);
    assert_eq!(positions[0].position, v.prompt_tokens.len());
    assert_eq!(v.causal.position, v.prompt_tokens.len() - 1);
    assert_eq!(v.weights.tensors, 9 * 2 + 3);
    assert!(v.bidirectional.lora);
    let top = &v.causal.top;
    assert!(top[0].logit >= top[1].logit);
}

/// Edits one JSON file of a fresh checkpoint.
fn with_config(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = checkpoint(&Spec::toy());
    let p = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
    dir
}

fn run_on(dir: &Path) -> Output {
    run(&[
        "run",
        "--model",
        &dir_arg(dir),
        "--prompt",
        "x",
        "--max-new-tokens",
        "2",
    ])
}

#[test]
fn bad_config_files_are_named() {
    let dir = checkpoint(&Spec::toy());
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    assert_clean_error(&run_on(dir.path()), "config.json");

    let dir = with_config(|v| v["model_type"] = "llama".into());
    assert_clean_error(&run_on(dir.path()), "model_type");

    let dir = with_config(|v| v["mask_token_id"] = 100_000.into());
    assert_clean_error(&run_on(dir.path()), "mask_token_id");

    let dir = checkpoint(&Spec::toy());
    std::fs::write(dir.path().join("config.json"), "{ not json").unwrap();
    assert_clean_error(&run_on(dir.path()), "config.json");
}

#[test]
fn bad_weights_are_named() {
    // A missing tensor: drop one layer's q_proj.
    let spec = Spec::toy();
    let dir = checkpoint(&spec);
    let mut w = synthetic::random_weights(&spec).unwrap();
    w.remove("encoder.layers.1.self_attn.q_proj.weight");
    candle_core::safetensors::save(&w, dir.path().join("model.safetensors")).unwrap();
    assert_clean_error(
        &run_on(dir.path()),
        "encoder.layers.1.self_attn.q_proj.weight",
    );

    // A wrong shape: the config says a wider intermediate size than the tensors have.
    let dir = with_config(|v| v["intermediate_size"] = 96.into());
    assert_clean_error(&run_on(dir.path()), "mlp.gate_proj");

    // Not a safetensors file at all.
    let dir = checkpoint(&spec);
    std::fs::write(dir.path().join("model.safetensors"), b"garbage").unwrap();
    assert_clean_error(&run_on(dir.path()), "model.safetensors");

    let dir = checkpoint(&spec);
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    assert_clean_error(&run_on(dir.path()), "model.safetensors");
}

#[test]
fn unreadable_tokenizer_is_named() {
    let dir = checkpoint(&Spec::toy());
    std::fs::write(dir.path().join("tokenizer.json"), "{\"broken\": ").unwrap();
    assert_clean_error(&run_on(dir.path()), "tokenizer.json");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    assert_clean_error(&run_on(dir.path()), "tokenizer.json");
}

#[test]
fn offline_uncached_hub_id_fails_without_the_network() {
    let home = tempfile::tempdir().unwrap();
    let o = specscope(&[
        "run",
        "--model",
        "nvidia/Nemotron-Labs-Diffusion-8B",
        "--prompt",
        "x",
    ])
    .env("HF_HOME", home.path())
    .env_remove("HF_HUB_CACHE")
    .output()
    .unwrap();
    assert_clean_error(&o, "HF_HUB_OFFLINE");
    assert!(stderr(&o).contains("config.json"));
}

#[test]
fn hub_id_resolves_from_the_cache_offline() {
    // Lay out a checkpoint the way the HF cache stores it: refs/main -> snapshots/<commit>.
    let home = tempfile::tempdir().unwrap();
    let repo = home.path().join("hub").join("models--acme--tiny");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    synthetic::write_checkpoint(&snapshot, &Spec::toy()).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), commit).unwrap();
    let o = specscope(&[
        "run",
        "--model",
        "acme/tiny",
        "--prompt",
        "x",
        "--max-new-tokens",
        "3",
        "--json",
    ])
    .env("HF_HOME", home.path())
    .env_remove("HF_HUB_CACHE")
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: files::RunDoc = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.model, "acme/tiny@main");
    assert_eq!(v.commit.as_deref(), Some(commit));
}

#[test]
fn bad_arguments_are_named() {
    let dir = checkpoint(&Spec::toy());
    assert_clean_error(
        &run(&["run", "--model", "./missing/dir", "--prompt", "x"]),
        "local path",
    );
    let o = run(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "--prompt",
        "x",
        "--mode",
        "warp",
    ]);
    assert_clean_error(&o, "'warp' for '--mode");
    let o = run(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "--prompt",
        "x",
        "--max-new-tokens",
        "0",
    ]);
    assert_clean_error(&o, "--max-new-tokens");
    let o = run(&["run", "--model", &dir_arg(dir.path())]);
    assert_clean_error(&o, "prompt");
}

#[test]
fn over_long_prompt_names_the_context() {
    let dir = with_config(|v| v["max_position_embeddings"] = 64.into());
    let long = "abcdefgh".repeat(20);
    let o = run(&["run", "--model", &dir_arg(dir.path()), "--prompt", &long]);
    assert_clean_error(&o, "context");
}

#[test]
fn run_modes_agree_with_ar_on_the_trained_fixture() {
    let dir = common::fixture_dir();
    let tokens = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--model",
            dir.to_str().unwrap(),
            "--prompt",
            "List 5 fruits.",
            "--max-new-tokens",
            "40",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let v: files::RunDoc = serde_json::from_slice(&o.stdout).unwrap();
        (v.tokens, v.stats)
    };
    let (ar, ar_stats) = tokens(&["--mode", "ar"]);
    assert_eq!(ar_stats.tpf, 1.0);
    for m in [
        &["--mode", "linear", "--block", "8"][..],
        &["--mode", "recguide"],
        &["--mode", "recguide", "--adaptive-blocks", "8,16,32"],
    ] {
        let (t, stats) = tokens(m);
        assert_eq!(t, ar, "{m:?}");
        assert!(stats.forwards.decode_total > 0);
        // Rounds by how far they advanced: as many as the rounds run.
        assert_eq!(
            stats.acceptance_histogram.iter().sum::<usize>(),
            stats.rounds,
            "{m:?}"
        );
        // A RecGuide run reports its branch rows; the others have none.
        assert_eq!(stats.branches.is_some(), m.contains(&"recguide"), "{m:?}");
    }
    let run_x = |extra: &[&str]| {
        let mut args = vec!["run", "--model", dir.to_str().unwrap(), "--prompt", "x"];
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = run_x(&["--mode", "linear", "--block", "0"]);
    assert_clean_error(&o, "block size");
    let o = run_x(&["--adaptive-blocks", "8,0"]);
    assert_clean_error(&o, "block size 0 is out of range");
    // A set of adaptive sizes where the block is fixed is refused, not ignored.
    for fixed in [
        &["--mode", "linear"][..],
        &["--mode", "ar"],
        &["--mode", "diffusion"],
        &["--no-adaptive"],
        &["--block", "8"],
    ] {
        let o = run_x(&[fixed, &["--adaptive-blocks", "8,16"]].concat());
        assert_clean_error(&o, "--adaptive-blocks sets the sizes");
    }
    let o = run_x(&["--mode", "linear", "--block", "1000000"]);
    assert_clean_error(&o, "block size 1000000 is out of range");
    let o = run_x(&["--risk-threshold", "-1"]);
    assert_clean_error(&o, "risk threshold must be in [0, 1]");
    let o = run_x(&["--mode", "warp"]);
    assert!(!o.status.success() && stderr(&o).contains("warp"));
}

#[test]
fn bench_runs_side_by_side_and_names_bad_prompt_lines() {
    let dir = common::fixture_dir();
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("p.jsonl");
    std::fs::write(&prompts, "{\"prompt\": \"List 5 fruits.\", \"family\": \"qa\"}\n{\"prompt\": \"Reverse the word 'planet'.\", \"family\": \"qa\"}\n").unwrap();
    let json = tmp.path().join("out.json");
    // `bench` on the fixture model and this prompt file, plus `extra`.
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--model",
            dir.to_str().unwrap(),
            "--prompts",
            prompts.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = bench(&[
        "--configs",
        "ar,linear,recguide",
        "--blocks",
        "8",
        "--concurrency",
        "1,2",
        "--max-new-tokens",
        "24",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("linear B=8") && table.contains("xAR"),
        "{table}"
    );
    // Read as `plot` reads it: the type the bench wrote it with.
    let doc = |json: &std::path::Path| -> specscope::files::BenchDoc {
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
    };
    let v = doc(&json);
    assert_eq!(v.format_version, Some(specscope::files::BENCH_VERSION));
    assert_eq!(v.results.len(), 6);
    assert!(v.results.iter().all(|r| r.identical_to_ar == Some(true)));
    // Two prompts hold C = 2 only repeated: 4 requests there (2 per slot), each once
    // at C = 1.
    let requests: Vec<usize> = v.results.iter().map(|r| r.requests).collect();
    assert_eq!(requests, [2, 2, 2, 4, 4, 4]);
    assert!(
        table.contains(
            "run again, in order, to hold each load (--requests-per-slot 2): C = 2: 4 (2 each)"
        ),
        "{table}"
    );
    assert_eq!(v.requests_per_slot, 2);
    // 0: each prompt once, and again up to the load where the list is shorter: C = 4
    // over 2 prompts starts 4 requests, C = 3 three.
    let o = bench(&[
        "--configs",
        "linear",
        "--blocks",
        "8",
        "--concurrency",
        "3,4",
        "--max-new-tokens",
        "8",
        "--requests-per-slot",
        "0",
        // The same file as the run above: replaced only when asked.
        "--force",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        table.contains(
            "(--requests-per-slot 0): C = 3: 3 (1 each, the first 1 once more), C = 4: 4 (2 each)"
        ),
        "{table}"
    );
    let v = doc(&json);
    assert_eq!((v.results[0].requests, v.results[1].requests), (3, 4));

    std::fs::write(&prompts, "{\"prompt\": \"ok\"}\n{not json}\n").unwrap();
    assert_clean_error(&bench(&[]), "p.jsonl:2");
    assert_clean_error(&bench(&["--configs", "warp"]), "invalid value 'warp'");
    assert_clean_error(&bench(&["--blocks", "0"]), "'0' for '--blocks");
}

/// `eval` on the bundled model: every figure printed, the JSON consistent with itself
/// (the low-margin share is the misplaced and in-place shares' weighted mean).
#[test]
fn eval_prints_the_first_rejection_split_and_keeps_it_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("eval.json");
    let o = run(&[
        "eval",
        "--prompts",
        "assets/prompts/math.jsonl,assets/prompts/qa.jsonl",
        "--limit",
        "3",
        "--blocks",
        "8",
        "--max-new-tokens",
        "96",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for figure in [
        "math exact answers",
        "LinearSS output identical to AR: yes",
        "margin<0.50 at 1st reject",
        "1st rejections with the drafted token misplaced",
        "calibration error",
    ] {
        assert!(out.contains(figure), "no {figure:?} in:\n{out}");
    }
    let v: files::EvalDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v.format, files::Format::new("eval", files::EVAL_VERSION));
    let b = &v.report.blocks[0];
    let mis = b.misplaced_at_reject;
    assert!(
        mis > 0.0 && mis < 1.0,
        "both kinds of rejection occur: {mis}"
    );
    let mixed = mis * b.low_margin_misplaced + (1.0 - mis) * b.low_margin_in_place;
    assert!((mixed - b.low_margin_at_reject).abs() < 1e-9, "{b:?}");
    // Rounds advance exactly the answers' tokens after the prefill's first: an
    // answer's last round counts up to its eos, not what the verifier said after.
    let prompts = v.report.ar.prompts as f64;
    let answers = v.report.ar.mean_answer_tokens * prompts;
    let advanced = b.mean_accept * b.rounds as f64;
    assert!(
        (advanced - (answers - prompts)).abs() < 1e-6,
        "rounds advanced {advanced} tokens, the answers have {answers} in {prompts} prompts"
    );
}

/// Output into a closed pipe ends quietly, as Unix tools do: no panic, no message.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_quietly() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    for args in [
        vec!["trace", "summary", demo.to_str().unwrap(), "--json"],
        vec!["trace", "summary", demo.to_str().unwrap()],
    ] {
        let mut child = specscope(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Hang up before the program writes anything (it takes longer to start).
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{err}"
        );
    }
}

/// A keymap that is not a small text file, or that leaves no way to quit.
#[test]
fn keymaps_are_bounded_and_keep_a_quit_key() {
    use specscope::tui::action::Action;
    use specscope::tui::keymap::Keymap;
    #[cfg(unix)]
    {
        let (km, w) = Keymap::load(Path::new("/dev/zero"));
        assert!(
            w[0].contains("/dev/zero") && w[0].contains("not a file"),
            "{w:?}"
        );
        assert!(!km.keys_for(Action::Quit).is_empty());
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("keymap.toml");
    std::fs::write(&p, "[keys]\n\"ctrl-q\" = \"none\"\n").unwrap();
    let (km, w) = Keymap::load(&p);
    assert!(w[0].contains("no key quits"), "{w:?}");
    assert_eq!(km.keys_for(Action::Quit), vec!["ctrl-q"]);
    // Every way of binding quit only to a key that cannot be pressed (shift with a
    // character: the terminal reports the shifted character), the usual quit keys
    // unbound: each such entry is named, and the built-in quit key stays.
    let builtin_quit = Keymap::builtin().keys_for(Action::Quit).len();
    for c in ['x', 'Q', '?', '1', ' ', '-'] {
        let spec = match c {
            ' ' => "shift-space".to_string(),
            '-' => "shift-minus".to_string(),
            c => format!("shift-{c}"),
        };
        let file = format!(
            "[keys]\n\"ctrl-q\" = \"none\"\n\"ctrl-c\" = \"none\"\n\"{spec}\" = \"quit\"\n\"alt-z\" = \"warp\"\n\"ctrl-y\" = \"help\"\n"
        );
        std::fs::write(&p, &file).unwrap();
        let (km, w) = Keymap::load(&p);
        let all = w.join("\n");
        assert!(
            all.contains("keymap.toml:4") && all.contains("never be pressed"),
            "{spec}: {all}"
        );
        assert!(
            all.contains("keymap.toml:5") && all.contains("warp"),
            "{spec}: every error: {all}"
        );
        assert!(all.contains("no key quits"), "{spec}: {all}");
        assert!(
            km.keys_for(Action::Quit).len() >= builtin_quit.min(1),
            "{spec}"
        );
        let shown = specscope::tui::keymap::pretty(&spec);
        assert!(
            !km.help_rows()
                .iter()
                .any(|r| r.0.split(' ').any(|k| k == shown)),
            "{spec}: an unpressable key is not listed in help"
        );
        // The rest of the file applies.
        assert!(km.keys_for(Action::Help).contains(&"ctrl-y"), "{spec}");
    }
}

/// A profile whose points cannot separate every term prints what it measured and fits
/// what they allow.
#[test]
fn profile_with_one_row_count_fits_what_it_can() {
    let o = run(&[
        "profile",
        "--synthetic",
        "--rows",
        "1",
        "--tokens",
        "1,4,8",
        "--cache",
        "16,32",
        "--repeats",
        "1",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).lines().count() > 3,
        "the table is printed"
    );
    assert!(err.contains("one row count"), "{err}");
}

/// Every command that writes a file, pointed at each file it reads (a prompt file,
/// the model's config, tokenizer and weights): refused with a message naming the flag,
/// the input left as it was.
#[test]
fn an_output_never_replaces_an_input() {
    let model = checkpoint(&Spec::toy());
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("p.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"What is 2 plus 2?\", \"family\": \"math\"}\n",
    )
    .unwrap();
    let m = dir_arg(model.path());
    let p = dir_arg(&prompts);
    let inputs = [
        prompts.clone(),
        model.path().join("config.json"),
        model.path().join("tokenizer.json"),
        model.path().join("model.safetensors"),
    ];
    let commands: [(&[&str], &str); 4] = [
        (&["trace", "record"], "--out"),
        (&["bench"], "--json"),
        (&["eval"], "--json"),
        (&["survival"], "--out"),
    ];
    for input in &inputs {
        let before = std::fs::read(input).unwrap();
        for (cmd, flag) in commands {
            let out = dir_arg(input);
            let mut args: Vec<&str> = cmd.to_vec();
            args.extend(["--model", &m, "--prompts", &p, "--limit", "1", flag, &out]);
            let o = run(&args);
            assert_clean_error(&o, flag);
            assert_clean_error(&o, "this run reads");
            assert_eq!(std::fs::read(input).unwrap(), before, "{args:?} changed it");
        }
    }
}

/// Two `trace record` runs writing one file at once: one of them is refused (the
/// file's lock), and the file that is left reads as one run's recording.
#[cfg(unix)]
#[test]
fn two_recordings_of_one_file_do_not_interleave() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rec.jsonl");
    let o = dir_arg(&out);
    let args = [
        "trace",
        "record",
        "--limit",
        "6",
        "--max-new-tokens",
        "128",
        "--out",
        &o,
    ];
    let a = specscope(&args).stderr(Stdio::piped()).spawn().unwrap();
    // The first holds the lock once its header is written.
    let start = std::time::Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) == 0 {
        assert!(
            start.elapsed().as_secs() < 60,
            "the first run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // With --force (the file exists once the first run starts): the lock refuses it.
    let mut forced = args.to_vec();
    forced.push("--force");
    let b = run(&forced);
    let a = a.wait_with_output().unwrap();
    assert!(a.status.success(), "{}", stderr(&a));
    assert_clean_error(&b, "being written by another process");
    let t = specscope::trace::read_trace(&out).expect("one run's recording");
    assert!(t.recorded_summary().is_some());
}

/// Every command that prints, with standard output on a full disk (`> /dev/full`): a
/// clean error and a non-zero exit, never "failed printing to stdout".
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_on_stdout_is_an_error_not_a_panic() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.jsonl");
    let commands: [&[&str]; 7] = [
        &["run", "--prompt", "hi", "--max-new-tokens", "4", "--json"],
        &["run", "--prompt", "hi", "--max-new-tokens", "4"],
        &["inspect", "--prompt", "hi"],
        &["trace", "summary", demo],
        &[
            "bench",
            "--configs",
            "ar",
            "--limit",
            "1",
            "--concurrency",
            "1",
            "--max-new-tokens",
            "4",
        ],
        &[
            "eval",
            "--limit",
            "1",
            "--max-new-tokens",
            "4",
            "--blocks",
            "8",
        ],
        &[
            "profile",
            "--rows",
            "1",
            "--tokens",
            "1",
            "--cache",
            "16",
            "--repeats",
            "1",
        ],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = specscope(args).stdout(full).output().unwrap();
        assert_clean_error(&o, "cannot write to standard output");
    }
}

/// Every counted flag, at 0, past its range and at 2^64 − 1: refused by the parser,
/// naming the flag and its range, before anything is allocated.
#[test]
fn counted_flags_outside_their_range_are_refused() {
    let flags: [(&[&str], &str, u64, u64); 15] = [
        (&["inspect", "--prompt", "hi"], "--block", 1, 256),
        (&["inspect", "--prompt", "hi"], "--top-k", 1, 1000),
        (&["profile"], "--rows", 1, 256),
        (&["profile"], "--tokens", 1, 4096),
        (&["profile"], "--cache", 0, 1 << 20),
        (&["profile"], "--repeats", 1, 1000),
        (&["survival"], "--bins", 1, 64),
        (&["survival"], "--max-new-tokens", 1, 1 << 20),
        (&["eval"], "--max-new-tokens", 1, 1 << 20),
        (&["eval"], "--blocks", 2, 256),
        (&["bench"], "--concurrency", 1, 1024),
        (&["bench"], "--max-new-tokens", 1, 1 << 20),
        (&["bench"], "--requests-per-slot", 0, 64),
        (&["run", "--prompt", "hi"], "--max-new-tokens", 1, 1 << 20),
        (&["ui-bench"], "--width", 20, 1000),
    ];
    for (cmd, flag, lo, hi) in flags {
        let mut bad = vec![hi + 1, u64::MAX];
        if lo > 0 {
            bad.push(lo - 1);
        }
        for v in bad {
            let v = v.to_string();
            let mut args = cmd.to_vec();
            args.extend([flag, v.as_str()]);
            let o = run(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            assert_clean_error(&o, flag);
            let e = stderr(&o);
            assert!(
                e.contains("is not in") || e.contains("too large"),
                "{args:?}: {e}"
            );
        }
    }
    // Within the parser's range but past the model's context window: refused by name.
    let o = run(&[
        "profile", "--cache", "1000000", "--rows", "1", "--tokens", "1",
    ]);
    assert_clean_error(&o, "context window");
}

/// Every file a command reads, pointed at an endless device (/dev/zero): a clean error
/// at once, never a hang or a read of everything.
#[cfg(unix)]
#[test]
fn endless_inputs_are_refused_not_read() {
    let zero = "/dev/zero";
    let cases: [&[&str]; 7] = [
        &["trace", "summary", zero],
        &["replay", zero],
        &["plot", "--bench", zero],
        &["plot", "--recording", zero],
        &["plot", "--profile", zero],
        &["run", "--prompt", "hi", "--cost-profile", zero],
        &["bench", "--tables", zero, "--limit", "1"],
    ];
    for args in cases {
        assert_clean_error(&run(args), "/dev/zero");
    }
    // A prompt on an endless standard input.
    let o = specscope(&["run", "--max-new-tokens", "1"])
        .stdin(std::fs::File::open(zero).unwrap())
        .output()
        .unwrap();
    assert_clean_error(&o, "longer than");
}

/// An empty or blank prompt is an error, not an answer to nothing.
#[test]
fn an_empty_prompt_is_refused() {
    for p in ["", " ", "\n\t "] {
        let o = run(&["run", "--prompt", p, "--max-new-tokens", "4"]);
        assert_clean_error(&o, "--prompt is empty");
    }
}

/// A draft adapter holding infinities: `inspect` refuses it as `run` does, rather than
/// printing `null` logits.
#[test]
fn non_finite_adapter_weights_are_refused_by_inspect_and_run() {
    let dir = checkpoint(&Spec {
        lora_rank: Some(4),
        ..Spec::toy()
    });
    let p = dir
        .path()
        .join("linear_spec_lora/adapter_model.safetensors");
    let mut t = candle_core::safetensors::load(&p, &candle_core::Device::Cpu).unwrap();
    for v in t.values_mut() {
        *v = (v.ones_like().unwrap() * f64::INFINITY).unwrap();
    }
    candle_core::safetensors::save(&t, &p).unwrap();
    let m = dir_arg(dir.path());
    for args in [
        vec!["inspect", "--model", &m, "--prompt", "hi"],
        vec![
            "run",
            "--model",
            &m,
            "--prompt",
            "hi",
            "--max-new-tokens",
            "8",
            "--mode",
            "linear",
        ],
    ] {
        assert_clean_error(&run(&args), "non-finite logits");
    }
}

/// `specscope synthetic` writes a checkpoint the binary runs, and will not replace one
/// without `--force`.
#[test]
fn synthetic_writes_a_checkpoint_and_keeps_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("toy");
    let o = run(&["synthetic", &dir_arg(&out), "--geometry", "toy"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "run",
        "--model",
        &dir_arg(&out),
        "-p",
        "hi",
        "--max-new-tokens",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["synthetic", &dir_arg(&out), "--geometry", "toy"]);
    assert_clean_error(&o, "--force");
    let o = run(&["synthetic", &dir_arg(&out), "--geometry", "nld-99b"]);
    assert_clean_error(&o, "nld-8b");
}

/// A tiled checkpoint (the GPU check's NLD geometries) repeats one random run in each
/// large tensor, and loads and decodes like any other.
#[test]
fn tiled_checkpoints_repeat_a_run_and_load() {
    let spec = Spec {
        vocab_size: 8192, // an embedding of 2M values: more than one run
        tiled: true,
        ..Spec::small_4m()
    };
    let dir = checkpoint(&spec);
    let w = candle_core::safetensors::load(
        dir.path().join("model.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let emb = w["encoder.embed_tokens.weight"]
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let run_len = 1 << 20;
    assert_eq!(emb.len(), 2 * run_len);
    assert_eq!(emb[..run_len], emb[run_len..]);
    assert_ne!(emb[0], emb[1]);
    let o = run(&[
        "run",
        "--model",
        &dir_arg(dir.path()),
        "-p",
        "hi",
        "--max-new-tokens",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `specscope check` on the CPU: bf16 against f32, every mode = AR, as lines and JSON.
#[test]
fn check_compares_a_dtype_with_f32_and_every_mode_with_ar() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let args = [
        "check",
        "--device",
        "cpu",
        "--dtype",
        "bf16",
        "--limit",
        "1",
        "--max-new-tokens",
        "8",
        "--concurrency",
        "1,3",
    ];
    let mut with_json = args.to_vec();
    let json_arg = dir_arg(&json);
    with_json.extend(["--json", &json_arg]);
    let o = run(&with_json);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(text.contains("kernel     ok"), "{text}");
    assert!(text.contains("lossless   ok"), "{text}");
    let v: files::CheckDoc = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v.format, files::Format::new("check", files::CHECK_VERSION));
    assert!(v.passed);
    assert_eq!(v.checks.len(), 4);
    // A share is between 0 and 1.
    let mut strict = args.to_vec();
    strict.extend(["--min-agreement", "1.5"]);
    assert_clean_error(&run(&strict), "--min-agreement");
}

/// Defaults never write over what ships: `train` refuses the bundled model and its
/// prompt sets, `survival` an existing table, unless told with --force.
#[test]
fn train_and_survival_keep_shipped_files_without_force() {
    let assets = specscope::model::source::assets_dir();
    let o = run(&["train", "--out", &dir_arg(&assets.join("tiny-nld"))]);
    assert_clean_error(&o, "--force");
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "train",
        "--out",
        &dir_arg(&dir.path().join("m")),
        "--prompts",
        &dir_arg(&assets.join("prompts")),
    ]);
    assert_clean_error(&o, "shipped held-out sets");
    let table = dir.path().join("t.json");
    std::fs::write(&table, "{}").unwrap();
    let o = run(&["survival", "--limit", "1", "--out", &dir_arg(&table)]);
    assert_clean_error(&o, "--force");
    assert_eq!(std::fs::read_to_string(&table).unwrap(), "{}");
}

/// `--device` and `--dtype` take their listed values only, named in the error.
#[test]
fn device_and_dtype_are_typed() {
    assert_clean_error(&run(&["run", "--device", "gpu", "-p", "hi"]), "cuda");
    assert_clean_error(&run(&["run", "--dtype", "f64", "-p", "hi"]), "bf16");
}

/// A ui-bench over a few short answers says its ratio is noise instead of
/// presenting it as a figure (it once read 216% at `--limit 1`), whatever the pass
/// count; with `--json` it says so in a field.
#[test]
fn ui_bench_on_too_little_decoding_calls_its_ratio_noise() {
    for repeats in ["1", "2"] {
        let o = run(&[
            "ui-bench",
            "--limit",
            "1",
            "--repeats",
            repeats,
            "--max-new-tokens",
            "8",
            "--width",
            "80",
            "--height",
            "24",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("mostly noise"), "{out}");
    }
    let o = run(&[
        "ui-bench",
        "--limit",
        "1",
        "--repeats",
        "1",
        "--max-new-tokens",
        "8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: files::UiBenchDoc = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v.format,
        files::Format::new("ui-bench", files::UI_BENCH_VERSION)
    );
    assert!(!v.ratio_reliable, "{v:?}");
}

/// The one rule for every writer, walked over each subcommand's output flag: a file
/// that exists is kept (and the command refuses, naming --force) unless --force says
/// so; an input of the same run and a directory are refused; a device is written as
/// it is.
#[test]
fn no_output_replaces_a_file_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.jsonl");
    let math = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/prompts/math.jsonl");
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nld/raw_trace_gsm8k.head12.jsonl"
    );
    // (the command before its output flag, the flag, an input of the run)
    let quick = ["--limit", "1", "--max-new-tokens", "4"];
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter().chain(tail).map(|s| s.to_string()).collect()
    };
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            with(
                &[
                    "bench",
                    "--configs",
                    "ar",
                    "--concurrency",
                    "1",
                    "--prompts",
                    math,
                ],
                &quick,
            ),
            "--json",
            math,
        ),
        (
            with(&["eval", "--blocks", "8", "--prompts", math], &quick),
            "--json",
            math,
        ),
        (
            with(&["survival", "--blocks", "8", "--prompts", math], &quick),
            "--out",
            math,
        ),
        (
            with(&["check", "--concurrency", "1", "--prompts", math], &quick),
            "--json",
            math,
        ),
        (
            with(&["trace", "record", "--prompts", math], &quick),
            "--out",
            math,
        ),
        (
            with(
                &["profile", "--rows", "1", "--tokens", "1", "--cache", "16"],
                &["--repeats", "1"],
            ),
            "--json",
            concat!(env!("CARGO_MANIFEST_DIR"), "/assets/tiny-nld/config.json"),
        ),
        (with(&["trace", "import", log], &[]), "--out", log),
        (with(&["trace", "export", demo], &[]), "--out", demo),
        (with(&["trace", "compare", demo], &[]), "--figure", demo),
    ];
    for (i, (args, flag, input)) in cases.iter().enumerate() {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let go = |out: &str, force: bool| {
            let mut v = a.clone();
            v.extend([*flag, out]);
            if force {
                v.push("--force");
            }
            run(&v)
        };
        let existing = t.join(format!("existing-{i}"));
        std::fs::write(&existing, "keep me").unwrap();
        let o = go(&dir_arg(&existing), false);
        assert_clean_error(&o, "--force");
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "keep me",
            "{a:?}"
        );
        assert_clean_error(&go(input, true), "this run reads");
        assert_clean_error(&go(&dir_arg(t), true), "directory");
        let o = go(&dir_arg(&existing), true);
        assert!(o.status.success(), "{a:?} --force: {}", stderr(&o));
        assert_ne!(std::fs::read_to_string(&existing).unwrap(), "keep me");
        #[cfg(unix)]
        {
            let o = go("/dev/null", false);
            assert!(o.status.success(), "{a:?} /dev/null: {}", stderr(&o));
        }
    }
    // Directories of several files: the figures `plot` draws, a checkpoint.
    let figs = t.join("figs");
    std::fs::create_dir(&figs).unwrap();
    std::fs::write(figs.join("acceptance-length.svg"), "keep me").unwrap();
    let o = run(&["plot", "--recording", demo, "--out", &dir_arg(&figs)]);
    assert_clean_error(&o, "acceptance-length.svg already there; pass --force");
    let o = run(&[
        "plot",
        "--recording",
        demo,
        "--out",
        &dir_arg(&figs),
        "--force",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "plot",
        "--recording",
        demo,
        "--out",
        &dir_arg(&t.join("existing-0")),
    ]);
    assert_clean_error(&o, "not a directory");
    let ckpt = t.join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    std::fs::write(ckpt.join("tokenizer.json"), "keep me").unwrap();
    let o = run(&["synthetic", &dir_arg(&ckpt), "--geometry", "toy"]);
    assert_clean_error(&o, "tokenizer.json already there; pass --force");
    assert_eq!(
        std::fs::read_to_string(ckpt.join("tokenizer.json")).unwrap(),
        "keep me"
    );
    // `train --prompts` into files a new run did not write.
    let prompts = t.join("prompts");
    std::fs::create_dir(&prompts).unwrap();
    std::fs::write(prompts.join("qa.jsonl"), "keep me").unwrap();
    let o = run(&[
        "train",
        "--preset",
        "toy",
        "--out",
        &dir_arg(&t.join("model")),
        "--state",
        &dir_arg(&t.join("state.json")),
        "--prompts",
        &dir_arg(&prompts),
    ]);
    assert_clean_error(&o, "qa.jsonl already there; pass --force");
    // --help names what --force guards.
    for sub in [
        &["bench"][..],
        &["trace", "record"],
        &["plot"],
        &["synthetic"],
    ] {
        let mut v = sub.to_vec();
        v.push("--help");
        let o = run(&v);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("--force"), "{sub:?}: {text}");
    }
}

/// `scripts/gpu-check.sh` checks its inputs before any step: BUDGET is a plain number
/// of seconds (text in it never reaches the shell's arithmetic, where it would run),
/// the device and GPU are ones it knows, and the report goes into a directory.
#[cfg(unix)]
#[test]
fn the_gpu_check_refuses_bad_inputs_before_running_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let marker = t.join("ran");
    let file = t.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-check.sh");
    let out = dir_arg(&t.join("report"));
    let injected = format!("PATH[$(touch {})]", marker.display());
    let budgets = [
        injected.as_str(),
        "10m",
        "-5",
        "5",
        " 480",
        "1e3",
        "99999999",
    ];
    // (environment, report directory, what the refusal says)
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, &'a str);
    let mut cases: Vec<Case> = budgets
        .iter()
        .map(|b| (vec![("BUDGET", *b)], out.clone(), "BUDGET="))
        .collect();
    cases.push((
        vec![("GPU_CHECK_DEVICE", "gpu")],
        out.clone(),
        "GPU_CHECK_DEVICE=",
    ));
    cases.push((vec![("GPU", "a100")], out.clone(), "GPU=a100"));
    cases.push((vec![], dir_arg(&file), "is not a directory"));
    for (env, dir, want) in cases {
        let mut cmd = Command::new("bash");
        cmd.arg(script)
            .arg(&dir)
            .env("GPU_CHECK_DEVICE", "cpu")
            .env("SPECSCOPE_BIN", env!("CARGO_BIN_EXE_specscope"));
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{env:?} {dir}: {err}");
        assert!(err.contains(want), "{env:?}: {err}");
        assert!(!t.join("report").exists(), "{env:?}: wrote a report");
    }
    assert!(!marker.exists(), "text in BUDGET ran");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

/// How standard output is broken for a run.
#[cfg(unix)]
#[derive(Debug, Clone, Copy)]
enum Broken {
    /// Descriptor 1 closed (`>&-`).
    Closed,
    /// A device that refuses every write (a full disk).
    Full,
}

#[cfg(unix)]
fn with_stdout(args: &[&str], broken: Broken) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = specscope(args);
    cmd.stderr(Stdio::piped());
    match broken {
        Broken::Closed => {
            // SAFETY: close(2) is async-signal-safe; the child has one thread here.
            unsafe {
                cmd.stdout(Stdio::inherit()).pre_exec(|| {
                    libc::close(1);
                    Ok(())
                });
            }
        }
        Broken::Full => {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap();
            cmd.stdout(Stdio::from(full));
        }
    }
    cmd.output().unwrap()
}

/// The subcommands `specscope [PARENT] --help` lists.
fn subcommands(parent: &[&str]) -> Vec<String> {
    let help = run(&[parent, &["--help"]].concat());
    let text = String::from_utf8_lossy(&help.stdout).to_string();
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Output that cannot be written is never a success: for every subcommand's help, for
/// `--help`, `--version` and `help CMD`, and for commands that print, a closed or
/// full stdout is a non-zero exit with one line on stderr and no panic.
#[cfg(unix)]
#[test]
fn output_that_cannot_be_written_is_never_a_success() {
    let top = subcommands(&[]);
    assert!(top.len() >= 15, "{top:?}");
    let mut cases: Vec<Vec<String>> = vec![
        vec!["--help".into()],
        vec!["--version".into()],
        vec!["help".into()],
    ];
    for c in &top {
        cases.push(vec![c.clone(), "--help".into()]);
        cases.push(vec!["help".into(), c.clone()]);
        for sub in subcommands(&[c]) {
            cases.push(vec![c.clone(), sub, "--help".into()]);
        }
    }
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let demo = demo.to_str().unwrap();
    for printing in [
        vec!["trace", "summary", demo],
        vec!["trace", "summary", demo, "--json"],
        vec!["trace", "compare", demo],
        vec!["run", "--prompt", "What is 12 plus 7?"],
        vec!["run", "--prompt", "What is 12 plus 7?", "--json"],
        vec!["run", "--model", "sim:nld-8b", "--prompt", "hi"],
    ] {
        cases.push(printing.into_iter().map(str::to_string).collect());
    }
    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        for broken in [Broken::Closed, Broken::Full] {
            let o = with_stdout(&args, broken);
            let err = stderr(&o);
            assert!(!o.status.success(), "{args:?} {broken:?}: exit 0, {err}");
            assert!(!err.contains("panicked"), "{args:?} {broken:?}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
            assert_eq!(lines.len(), 1, "{args:?} {broken:?}: {err}");
            assert!(
                lines[0].contains("standard output"),
                "{args:?} {broken:?}: {err}"
            );
        }
    }
}

/// `replay --snapshot` prints the screen without a terminal (stdin and stdout are
/// pipes here): the size asked, the round asked, paused there; bad sizes and rounds
/// past the recording are refused by name.
#[test]
fn replay_snapshot_prints_the_screen_as_text() {
    let cfg = tempfile::tempdir().unwrap();
    let o = specscope(&["replay", "--demo", "--snapshot", "80x24", "--at-round", "3"])
        .env("SPECSCOPE_CONFIG_DIR", cfg.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 24, "{text}");
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
    assert!(lines[0].contains("round 3 · request 1"), "{text}");
    assert!(
        lines[23].contains("⏸") && lines[23].contains("F1 help"),
        "{text}"
    );
    for (args, needle) in [
        (&["--snapshot", "10x2"][..], "WIDTHxHEIGHT"),
        (&["--snapshot", "80by24"][..], "WIDTHxHEIGHT"),
        (
            &["--snapshot", "80x24", "--at-round", "100000"][..],
            "past its end",
        ),
        (&["--at-round", "3"][..], "--snapshot"),
    ] {
        let mut a = vec!["replay", "--demo"];
        a.extend_from_slice(args);
        assert_clean_error(&run(&a), needle);
    }
}
