//! `specscope plot`: every figure from a small bench JSON, a recording and a profile
//! made by the binary on the toy checkpoint; each SVG parsed and checked for its
//! series, labels and source caption (no golden pixels). Bad inputs fail naming them.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn specscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specscope"))
        .args(args)
        .env_remove("SPECSCOPE_MODEL")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run specscope")
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "failed: {err}");
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// All text of an SVG, after checking it parses as XML with an `svg` root.
fn svg_texts(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{}: not well-formed XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .map(str::to_string)
        .collect()
}

fn has(texts: &[String], needle: &str) -> bool {
    texts.iter().any(|t| t.contains(needle))
}

/// The three inputs, made by the binary on the toy fixture.
fn inputs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let model = common::fixture_dir();
    let m = s(&model);
    let bench = dir.join("bench.json");
    ok(&specscope(&[
        "bench",
        "--model",
        m,
        "--limit",
        "1",
        "--concurrency",
        "1,2",
        "--max-new-tokens",
        "24",
        "--configs",
        "ar,linear,recguide,recguide-throughput",
        "--blocks",
        "4,8",
        "--json",
        s(&bench),
    ]));
    let rec = dir.join("session.jsonl");
    ok(&specscope(&[
        "trace",
        "record",
        "--model",
        m,
        "--limit",
        "1",
        "--max-new-tokens",
        "32",
        "--out",
        s(&rec),
    ]));
    let profile = dir.join("profile.json");
    ok(&specscope(&[
        "profile",
        "--model",
        m,
        "--repeats",
        "1",
        "--rows",
        "1,2",
        "--tokens",
        "1,4,8",
        "--cache",
        "16,32,64",
        "--json",
        s(&profile),
    ]));
    (bench, rec, profile)
}

#[test]
fn every_figure_from_a_bench_a_recording_and_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (bench, rec, profile) = inputs(dir.path());

    // From the bench and the profile alone.
    let out = dir.path().join("bench-figs");
    let listed = ok(&specscope(&[
        "plot",
        "--bench",
        s(&bench),
        "--profile",
        s(&profile),
        "--out",
        s(&out),
    ]));
    for name in [
        "acceptance-length",
        "position-acceptance",
        "forward-latency",
        "throughput",
        "block-sizes",
        "branches",
    ] {
        let p = out.join(format!("{name}.svg"));
        assert!(listed.contains(s(&p)), "{name} not listed: {listed}");
        let t = svg_texts(&p);
        assert!(has(&t, "source:"), "{name}: no caption");
        assert!(has(&t, "toy-nld"), "{name}: the caption names no model");
        assert!(has(&t, "date: 20"), "{name}: no date");
    }
    let t = svg_texts(&out.join("throughput.svg"));
    for label in [
        "ar",
        "linear B=4",
        "linear B=8",
        "recguide",
        "best LinearSS",
        "TPF",
    ] {
        assert!(
            t.iter().any(|x| x == label || x.contains(label)),
            "throughput lacks {label}"
        );
    }
    assert!(
        has(&t, "`specscope bench --model"),
        "the caption gives the command"
    );
    assert!(has(&t, "modeled"), "the modeled panel is labelled");
    let t = svg_texts(&out.join("acceptance-length.svg"));
    assert!(
        has(&t, "linear B=8 at C = 1"),
        "figure 1 reads the largest fixed block"
    );
    assert!(has(&t, "full block"));
    let t = svg_texts(&out.join("position-acceptance.svg"));
    assert!(has(&t, "B = 4") && has(&t, "B = 8"));
    let t = svg_texts(&out.join("forward-latency.svg"));
    assert!(has(&t, "1 row(s), measured") && has(&t, "2 row(s), fitted"));
    assert!(
        has(&t, "after 32 cached positions"),
        "the middle cache length"
    );
    let t = svg_texts(&out.join("branches.svg"));
    assert!(
        has(&t, "(continuation)") || has(&t, "(correction)"),
        "branch kinds are named: {t:?}"
    );

    // From the recording.
    let out = dir.path().join("rec-figs");
    ok(&specscope(&[
        "plot",
        "--recording",
        s(&rec),
        "--out",
        s(&out),
    ]));
    for name in [
        "acceptance-length",
        "position-acceptance",
        "block-timeline",
        "branches",
    ] {
        let t = svg_texts(&out.join(format!("{name}.svg")));
        assert!(
            has(&t, "source:") && has(&t, "trace record"),
            "{name}: caption {t:?}"
        );
    }
    let t = svg_texts(&out.join("acceptance-length.svg"));
    for family in ["math rounds", "code rounds", "qa rounds"] {
        assert!(has(&t, family), "figure 1 lacks {family}");
    }
    let t = svg_texts(&out.join("branches.svg"));
    assert!(has(&t, "draft margin at the first rejection"));
    assert!(has(&t, "2nd choice"));
    let t = svg_texts(&out.join("block-timeline.svg"));
    assert!(has(&t, "request 1"));
}

#[test]
fn bad_or_empty_inputs_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"model\": 3").unwrap();
    let no_results = dir.path().join("none.json");
    std::fs::write(
        &no_results,
        r#"{"format_version": 2, "model": "m", "results": []}"#,
    )
    .unwrap();
    let out = dir.path().join("figs");
    for (flag, file, needle) in [
        ("--bench", &empty, "empty file"),
        ("--bench", &junk, "not a bench result file"),
        ("--bench", &no_results, "holds no results"),
        ("--profile", &junk, "not a profile"),
        ("--recording", &empty, "empty file"),
        ("--recording", &junk, "junk.json:1"),
        ("--bench", &dir.path().join("missing.json"), "cannot read"),
    ] {
        let o = specscope(&["plot", flag, s(file), "--out", s(&out)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{flag} {file:?} succeeded");
        assert!(err.contains(needle), "{flag}: {err}");
        assert!(
            err.contains(file.file_name().unwrap().to_str().unwrap()),
            "{flag}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = specscope(&["plot", "--out", s(&out)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to plot"));
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

/// Bench files with numbers no bench writes (a block size past 256 in a
/// configuration's options, a count of 2^64 − 1, a load of 0, a negative rate), an
/// older or newer format, or control characters in their provenance: a clean error
/// naming the file, or figures that are well-formed XML; never a hang.
#[test]
fn hostile_bench_files_are_refused_or_drawn_as_valid_xml() {
    use clap::ValueEnum;
    use specscope::bench::sweep::{configs, BenchResult, Config};
    use specscope::engine::overlap::RowTable;
    let dir = tempfile::tempdir().unwrap();
    let table = configs(
        Config::value_variants(),
        &[8],
        &[RowTable::default()],
        &[],
        &Default::default(),
    )
    .unwrap();
    let good = |config: &str, c: usize| {
        let cfg = table.iter().find(|x| x.name == config).unwrap();
        let mut r = BenchResult::empty(cfg, c, c);
        // Four rounds of one token each: counts that agree with each other.
        r.tally.rounds = 4;
        r.tally.accept_hist = vec![0, 4];
        r.tally.blocks = [(1, 4)].into();
        r.tally.new_tokens = 5;
        r.tally.decode_tokens = 4;
        r.tally.verify_forwards = 4;
        r.accept_hist_by_family = [("math".to_string(), vec![0, 4])].into();
        r.tokens_per_sec = 100.0;
        r.modeled_secs = 0.1;
        r.modeled_tokens_per_sec = 50.0;
        r.tpf = r.tally.tpf();
        r.mean_accept = r.tally.mean_accept();
        serde_json::to_value(r).unwrap()
    };
    let base = serde_json::json!({
        "format_version": specscope::files::BENCH_VERSION,
        "model": "m",
        "results": [good("ar", 1), good("linear B=8", 1), good("recguide", 1)],
        "provenance": {"command": "specscope bench", "machine": "x", "date": "2026-12-05"}
    });
    type Mutation = Box<dyn Fn(&mut serde_json::Value)>;
    let mutations: Vec<(&str, Mutation)> = vec![
        (
            "B=0",
            Box::new(|v| v["results"][1]["options"]["blocks"] = serde_json::json!({"fixed": 0})),
        ),
        (
            "B=257",
            Box::new(|v| v["results"][1]["options"]["blocks"] = serde_json::json!({"fixed": 257})),
        ),
        (
            "B=2^64-1",
            Box::new(|v| {
                v["results"][1]["options"]["blocks"] = serde_json::json!({"fixed": u64::MAX})
            }),
        ),
        (
            "no options",
            Box::new(|v| {
                v["results"][1].as_object_mut().unwrap().remove("options");
            }),
        ),
        (
            "an older format",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("format_version");
            }),
        ),
        (
            "a name that says B = 8 over options of B = 32",
            Box::new(|v| v["results"][1]["options"]["blocks"] = serde_json::json!({"fixed": 32})),
        ),
        (
            "a RecGuide name over LinearSS options",
            Box::new(|v| v["results"][2]["options"]["mode"] = "linear".into()),
        ),
        (
            "a name no sweep makes",
            Box::new(|v| v["results"][1]["config"] = "linear B=9000".into()),
        ),
        (
            "another batching",
            Box::new(|v| v["results"][2]["batching"] = "lockstep".into()),
        ),
        (
            "more right than checked",
            Box::new(|v| {
                v["results"][1]["answers_checked"] = 1.into();
                v["results"][1]["answers_right"] = 2.into();
            }),
        ),
        (
            "more checked than requests",
            Box::new(|v| v["results"][1]["answers_checked"] = 5.into()),
        ),
        (
            "more ended than requests",
            Box::new(|v| v["results"][1]["ended_at_eos"] = 5.into()),
        ),
        (
            "requests 0",
            Box::new(|v| v["results"][1]["requests"] = 0.into()),
        ),
        (
            "requests below the load",
            Box::new(|v| {
                v["results"][1]["concurrency"] = 129.into();
            }),
        ),
        (
            "requests 2^64-1",
            Box::new(|v| v["results"][1]["requests"] = u64::MAX.into()),
        ),
        (
            "mean_accept 300",
            Box::new(|v| v["results"][1]["mean_accept"] = 300.into()),
        ),
        (
            "tpf not its counts'",
            Box::new(|v| v["results"][1]["tpf"] = 2.5.into()),
        ),
        (
            "a family histogram off the tally",
            Box::new(|v| {
                v["results"][1]["accept_hist_by_family"] = serde_json::json!({"math": [0, 3]})
            }),
        ),
        (
            "rounds longer than the block",
            Box::new(|v| {
                let t = &mut v["results"][1]["tally"];
                t["accept_hist"] = serde_json::json!([0, 3, 0, 0, 0, 0, 0, 0, 0, 1]);
                v["results"][1]["accept_hist_by_family"] =
                    serde_json::json!({"math": [0, 3, 0, 0, 0, 0, 0, 0, 0, 1]});
            }),
        ),
        (
            "a configuration name with a control character",
            Box::new(|v| v["results"][0]["config"] = "ar\u{7}".into()),
        ),
        (
            "a family name with a control character",
            Box::new(|v| {
                v["results"][1]["accept_hist_by_family"] = serde_json::json!({"ma\u{1b}th": [0, 4]})
            }),
        ),
        (
            "huge counts",
            Box::new(|v| {
                let n = 1u64 << 32;
                let r = &mut v["results"][1];
                r["tally"]["rounds"] = n.into();
                r["tally"]["accept_hist"] = serde_json::json!([0, n]);
                r["tally"]["blocks"] = serde_json::json!({"1": n});
                r["tally"]["new_tokens"] = (n + 1).into();
                r["tally"]["decode_tokens"] = n.into();
                r["tally"]["verify_forwards"] = n.into();
                r["accept_hist_by_family"] = serde_json::json!({"math": [0, n]});
                r["modeled_tokens_per_sec"] = ((n + 1) as f64 / 0.1).into();
            }),
        ),
        (
            "C=0",
            Box::new(|v| v["results"][0]["concurrency"] = 0.into()),
        ),
        (
            "C=2^40",
            Box::new(|v| v["results"][0]["concurrency"] = (1u64 << 40).into()),
        ),
        (
            "hist",
            Box::new(|v| {
                v["results"][1]["accept_hist_by_family"] =
                    serde_json::json!({"math": [0, u64::MAX]})
            }),
        ),
        (
            "rounds",
            Box::new(|v| v["results"][1]["tally"]["rounds"] = u64::MAX.into()),
        ),
        (
            "rate",
            Box::new(|v| v["results"][2]["modeled_tokens_per_sec"] = (-1.0).into()),
        ),
        (
            "huge rate",
            Box::new(|v| v["results"][2]["tokens_per_sec"] = 1e300.into()),
        ),
        (
            "control",
            Box::new(|v| v["provenance"]["command"] = "bench \u{1}\u{7}\u{1b}[31m".into()),
        ),
        (
            "control model",
            Box::new(|v| v["model"] = "m\u{0}\u{8}".into()),
        ),
        (
            "a newer format",
            Box::new(|v| v["format_version"] = 99.into()),
        ),
    ];
    for (name, m) in mutations {
        let mut v = base.clone();
        m(&mut v);
        let file = dir
            .path()
            .join(format!("{}.json", name.replace(['^', ' '], "_")));
        std::fs::write(&file, v.to_string()).unwrap();
        let out = dir
            .path()
            .join(format!("out-{}", name.replace(['^', ' '], "_")));
        let o = specscope(&["plot", "--bench", s(&file), "--out", s(&out)]);
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() {
            for f in std::fs::read_dir(&out).unwrap() {
                svg_texts(&f.unwrap().path());
            }
        } else {
            assert!(
                err.contains(s(&file)) && !err.contains("panicked"),
                "{name}: {err}"
            );
        }
        if name == "an older format" {
            assert!(err.contains("run the bench again"), "{err}");
        }
        // The numbers no bench writes are refused (control characters in provenance
        // are drawn as spaces; huge counts that agree are drawn).
        assert_eq!(
            o.status.success(),
            name.starts_with("control") || name == "huge counts",
            "{name}: {err}"
        );
    }
}

/// A bench of the simulated NLD-8B draws its block sizes beside the paper's shares (at
/// the loads the paper gives), and says the acceptance is simulated.
#[test]
fn a_simulated_bench_draws_the_papers_block_shares_beside_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("sim.json");
    ok(&specscope(&[
        "bench",
        "--model",
        "sim:nld-8b",
        "--limit",
        "1",
        "--concurrency",
        "2,128",
        "--requests-per-slot",
        "0",
        "--max-new-tokens",
        "48",
        "--configs",
        "ar,recguide",
        "--json",
        s(&bench),
    ]));
    let out = dir.path().join("figs");
    ok(&specscope(&[
        "plot",
        "--bench",
        s(&bench),
        "--out",
        s(&out),
    ]));
    let svg = out.join("block-sizes.svg");
    let texts = svg_texts(&svg);
    assert!(has(&texts, "simulated NLD-8B acceptance"), "{texts:?}");
    assert!(has(&texts, "beside the paper's"), "{texts:?}");
    // The paper's bars: one pale rectangle per block size at each of its two loads,
    // besides ours (which a bench without the simulator draws alone).
    let rects = std::fs::read_to_string(&svg)
        .unwrap()
        .matches("<rect")
        .count();
    let plain = dir.path().join("plain.json");
    let text = std::fs::read_to_string(&bench)
        .unwrap()
        .replace("\"sim:nld-8b\"", "\"bundled:tiny-nld\"");
    std::fs::write(&plain, text).unwrap();
    let out2 = dir.path().join("figs2");
    ok(&specscope(&[
        "plot",
        "--bench",
        s(&plain),
        "--out",
        s(&out2),
    ]));
    let without = std::fs::read_to_string(out2.join("block-sizes.svg"))
        .unwrap()
        .matches("<rect")
        .count();
    let plain_texts = svg_texts(&out2.join("block-sizes.svg"));
    assert!(!has(&plain_texts, "paper"), "{plain_texts:?}");
    assert_eq!(
        texts.iter().filter(|t| t.trim() == "paper").count(),
        2,
        "one paper bar named per load: {texts:?}"
    );
    // Fill and outline per size at each of the paper's two loads, at least.
    assert!(
        rects >= without + 2 * 2 * 2,
        "{rects} rectangles against {without}"
    );
}
