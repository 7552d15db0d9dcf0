//! Real NLD logs in and out (`trace import`, `trace export`, `trace compare`): each
//! public format, the joins, every imported field against its source field, the
//! statistics against a direct computation from the source lines, cut and foreign
//! files, and import ∘ export.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};

use specscope::trace::nld::export::{confidence_lines, V2_FIELDS};
use specscope::trace::nld::import::{import, ImportOptions};
use specscope::trace::nld::ImportedRound;
use specscope::trace::{read_trace, SessionEvent, Summary, Trace, TraceEvent};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nld")
        .join(name)
}

const TRACE: &str = "raw_trace_gsm8k.head12.jsonl";
const STATS: &str = "sglang_base_graph_decode_stats.jsonl";

fn imported(files: &[&str]) -> Trace {
    let paths: Vec<PathBuf> = files.iter().map(|f| fixture(f)).collect();
    import(&paths, &ImportOptions::default()).unwrap()
}

fn lines_of(path: &Path) -> Vec<Map<String, Value>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        })
        .collect()
}

fn rounds(t: &Trace) -> Vec<&ImportedRound> {
    t.events
        .iter()
        .filter_map(|s| match &s.event {
            TraceEvent::Session(SessionEvent::ImportedRound(r)) => Some(&**r),
            _ => None,
        })
        .collect()
}

fn summary(t: &Trace) -> Summary {
    Summary::of(t.events.iter().map(|s| &s.event))
}

fn specscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_specscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Every field of every imported round is its source line's, value for value; the
/// health checks are dropped and counted.
#[test]
fn every_imported_field_is_its_source_fields() {
    let t = imported(&[TRACE]);
    let src = lines_of(&fixture(TRACE));
    let kept: Vec<(usize, &Map<String, Value>)> = src
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            !l["request_id"]
                .as_str()
                .unwrap()
                .starts_with("HEALTH_CHECK_")
        })
        .map(|(i, l)| (i + 1, l))
        .collect();
    let got = rounds(&t);
    assert_eq!(got.len(), kept.len());
    for (r, (line, l)) in got.iter().zip(&kept) {
        assert_eq!(r.line, *line);
        assert_eq!(r.confidence.as_ref(), Some(*l), "line {line}");
        // What the reader makes of it: every field the schema names, typed.
        let typed = serde_json::to_value(r.row.as_ref().unwrap()).unwrap();
        for (k, v) in typed.as_object().unwrap() {
            assert_eq!(l.get(k), Some(v), "line {line} field {k}");
        }
    }
    let h = t.header.source.as_ref().unwrap();
    assert_eq!(h.format, "linearspec-confidence v1");
    assert_eq!(
        (h.health_checks_dropped, h.health_check_rounds_dropped),
        (2, 2)
    );
    // Requests in order of first appearance, rounds counted within each.
    assert_eq!(
        got.iter().map(|r| (r.req, r.round)).collect::<Vec<_>>(),
        [
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
            (1, 5),
            (2, 1),
            (2, 2),
            (2, 3),
            (2, 4),
            (2, 5)
        ]
    );

    let s = imported(&[STATS, "sglang_base_graph_timing.jsonl"]);
    let src = lines_of(&fixture(STATS));
    for (r, l) in rounds(&s).iter().zip(&src) {
        let v = serde_json::to_value(r.sglang.as_ref().unwrap()).unwrap();
        assert_eq!(&v, &Value::Object(l.clone()));
    }
}

/// `trace summary`'s TPF and mean tokens per round are a direct computation from the
/// source lines, and for SGLang's block stats the author's own metrics summary.
#[test]
fn summary_figures_are_the_source_lines_own() {
    // The confidence trace: emitted tokens over LinearSpec's two forwards a round.
    let t = imported(&[TRACE]);
    let src: Vec<Map<String, Value>> = lines_of(&fixture(TRACE))
        .into_iter()
        .filter(|l| !l["request_id"].as_str().unwrap().starts_with("HEALTH"))
        .collect();
    let tokens: u64 = src
        .iter()
        .map(|l| l["emitted_tokens"].as_u64().unwrap())
        .sum();
    let s = summary(&t);
    assert_eq!(s.tally.new_tokens as u64, tokens);
    assert_eq!(s.tally.rounds, src.len());
    assert!((s.tpf() - tokens as f64 / (2.0 * src.len() as f64)).abs() < 1e-12);
    assert!((s.tally.mean_accept() - tokens as f64 / src.len() as f64).abs() < 1e-12);

    // SGLang's block stats joined by order with its timing records.
    let t = imported(&[STATS, "sglang_base_graph_timing.jsonl"]);
    let src = lines_of(&fixture(STATS));
    let tokens: u64 = src.iter().map(|l| l["tokens"].as_u64().unwrap()).sum();
    let forwards: u64 = src
        .iter()
        .map(|l| l["forward_passes"].as_u64().unwrap())
        .sum();
    let s = summary(&t);
    assert_eq!(
        (s.tally.new_tokens as u64, s.forwards.decode as u64),
        (tokens, forwards)
    );
    assert!((s.tpf() - tokens as f64 / forwards as f64).abs() < 1e-12);
    let metrics: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("sglang_base_graph_metrics_summary.json")).unwrap(),
    )
    .unwrap();
    let d = &metrics["decode"];
    assert!((s.tpf() - d["tokens_per_forward_pass"].as_f64().unwrap()).abs() < 1e-4);
    assert!((s.tally.mean_accept() - d["mean_tokens_per_block"].as_f64().unwrap()).abs() < 1e-4);
    assert_eq!(s.tally.rounds as u64, d["decode_blocks"].as_u64().unwrap());
    // Two requests: the blocks add up to each timing record's completion_tokens.
    assert_eq!(s.requests, 2);
    let src = t.header.source.as_ref().unwrap();
    assert!(src.joined[0].contains("by order"), "{:?}", src.joined);
}

/// A per-request file joins on request_id where the ids are shared; a file of records
/// alone, or records no round matches, is refused saying why.
#[test]
fn per_request_files_join_or_say_why_not() {
    let t = imported(&[TRACE, "sglang_lora_graph_timing.jsonl"]);
    let src = t.header.source.as_ref().unwrap();
    // The excerpt holds the warm-up request and the first eval request.
    assert!(
        src.joined[0].contains("on request_id (1 of 2 requests)"),
        "{:?}",
        src.joined
    );
    let joined: Vec<_> = t
        .events
        .iter()
        .filter_map(|s| match &s.event {
            TraceEvent::Session(SessionEvent::ImportedRequest(r)) => Some(r),
            _ => None,
        })
        .collect();
    assert!(joined[0].record.is_none());
    let rec = joined[1].record.as_ref().unwrap();
    assert_eq!(rec["request_id"], joined[1].request_id.as_deref().unwrap());
    assert_eq!(t.header.model, "nemotron-labs-diffusion-8b");

    let err = import(
        &[fixture("pytorch_request_stats.jsonl")],
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no file of rounds"), "{err:#}");
    let err = import(
        &[fixture(TRACE), fixture("pytorch_request_stats.jsonl")],
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no record joins"), "{err:#}");
}

fn temp_with(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

/// A log cut mid-line imports up to its last whole line with a warning; a bad line
/// anywhere else, a bad field, or a line of another format fails naming FILE:LINE.
#[test]
fn cut_and_malformed_logs_name_their_line() {
    let text = std::fs::read_to_string(fixture(TRACE)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for cut in [1, 10, lines[11].len() - 1] {
        let (_d, p) = temp_with("cut.jsonl", &text[..text.len() - 1 - cut]);
        let t = import(&[p], &ImportOptions::default()).unwrap();
        assert_eq!(rounds(&t).len(), 9, "cut {cut}");
        assert!(t.warnings[0].contains(":12: the last line is incomplete"));
    }
    let bad = |edit: &dyn Fn(&mut Vec<String>), want: &str| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        edit(&mut l);
        let (_d, p) = temp_with("bad.jsonl", &(l.join("\n") + "\n"));
        let err = format!("{:#}", import(&[p], &ImportOptions::default()).unwrap_err());
        assert!(err.contains(want), "{want}: {err}");
    };
    bad(&|l| l[2] = "{not json".into(), "bad.jsonl:3: bad JSON");
    bad(
        &|l| l[3] = l[3].replace("\"emitted_tokens\":3", "\"emitted_tokens\":17"),
        "bad.jsonl:4: field `emitted_tokens` is 17",
    );
    bad(
        &|l| {
            l[7] = l[7].replace(
                "\"rejected_correct_token_rank\":2",
                "\"rejected_correct_token_rank\":0",
            )
        },
        "bad.jsonl:8: field `rejected_correct_token_rank` is 0",
    );
    bad(
        &|l| l[8] = l[8].replace("\"rejected_position\":14", "\"rejected_position\":9"),
        "bad.jsonl:9: field `rejected_position` is 9 after 13",
    );
    bad(
        &|l| {
            l[4] = "{\"forward_passes\": 2, \"tokens\": 2, \"block_gen_positions\": 16, \"acceptance_rate\": 0.125}".into()
        },
        "bad.jsonl:5: a line of sglang-linearspec-stats in a file of linearspec-confidence",
    );
    bad(
        &|l| l[0] = l[0].replace("\"schema_version\":1", "\"schema_version\":3"),
        "bad.jsonl:1: field `schema_version` is 3",
    );
    bad(
        &|l| l[0] = "{\"hello\": 1}".into(),
        "bad.jsonl:1: not a format",
    );
    // Fields that contradict each other.
    bad(
        &|l| l[1] = l[1].replace("\"emitted_tokens\":2", "\"emitted_tokens\":16"),
        "bad.jsonl:2: field `emitted_tokens` is 16 after 1 accepted drafts",
    );
    bad(
        &|l| l[1] = l[1].replace("\"has_rejection\":true", "\"has_rejection\":false"),
        "bad.jsonl:2: field `has_rejection` is false but `rejected_position` is 2",
    );
    bad(
        &|l| l[1] = l[1].replace("\"matched_draft_tokens\":1", "\"matched_draft_tokens\":7"),
        "bad.jsonl:2: field `accepted_draft_tokens` is 1 against `matched_draft_tokens` 7",
    );
    bad(
        &|l| l[1] = l[1].replace("\"block_size\":16", "\"block_size\":16.0"),
        "bad.jsonl:2: bad confidence-trace line: field `block_size`",
    );
    // A specscope recording is not a log to import.
    let (_d, p) = temp_with(
        "rec.jsonl",
        "{\"format\":\"specscope-trace\",\"version\":1}\n",
    );
    let err = format!("{:#}", import(&[p], &ImportOptions::default()).unwrap_err());
    assert!(err.contains("already a specscope recording"), "{err}");
}

/// Import ∘ export keeps every field the schema has: a version-1 log exports its own
/// lines back, and a session specscope decoded exports version-2 lines that import
/// and export again unchanged.
#[test]
fn import_then_export_keeps_every_field() {
    let t = imported(&[TRACE]);
    let out = confidence_lines(&t).unwrap();
    let src: Vec<Value> = lines_of(&fixture(TRACE))
        .into_iter()
        .filter(|l| !l["request_id"].as_str().unwrap().starts_with("HEALTH"))
        .map(Value::Object)
        .collect();
    let back: Vec<Value> = out
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, src);

    // A recording of the bundled model, exported, imported and exported again.
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prompts/math.jsonl");
    let o = specscope(&[
        "trace",
        "record",
        "--mode",
        "linear",
        "--block",
        "16",
        "--limit",
        "3",
        "--prompts",
        prompts.to_str().unwrap(),
        "--out",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v2 = dir.path().join("v2.jsonl");
    let o = specscope(&[
        "trace",
        "export",
        rec.to_str().unwrap(),
        "--out",
        v2.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = std::fs::read_to_string(&v2).unwrap();
    let rows = lines_of(&v2);
    assert!(rows.len() > 3);
    for r in &rows {
        for f in V2_FIELDS {
            assert!(r.contains_key(*f), "field {f} missing");
        }
        assert_eq!(r["schema_version"], 2);
        let a = r["accepted_draft_tokens"].as_u64().unwrap() as usize;
        assert_eq!(r["accepted_draft_token_ids"].as_array().unwrap().len(), a);
        assert_eq!(r["accepted_draft_confidences"].as_array().unwrap().len(), a);
    }
    let recorded = summary(&read_trace(&rec).unwrap());
    let emitted: u64 = rows
        .iter()
        .map(|r| r["emitted_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(emitted as usize, recorded.tally.decode_tokens);
    let again = import(std::slice::from_ref(&v2), &ImportOptions::default()).unwrap();
    assert_eq!(
        again.header.source.as_ref().unwrap().format,
        "linearspec-confidence v2"
    );
    let second = confidence_lines(&again).unwrap().join("\n") + "\n";
    assert_eq!(first, second);
    // The forwards a version-2 line counts are the recording's.
    assert!((summary(&again).tpf() - recorded.tpf()).abs() < 1e-9);
}

/// The command line: `--out` is replaced only with `--force`, `trace summary` says
/// where the rounds came from and how TPF counts forwards, `compare` labels sources.
#[test]
fn the_commands_import_summarise_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imp.jsonl");
    let args = |force: bool| {
        let mut a = vec![
            "trace".to_string(),
            "import".into(),
            fixture(TRACE).display().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--label".into(),
            "SGLang LinearSpec, NLD-8B".into(),
        ];
        if force {
            a.push("--force".into());
        }
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        specscope(&a)
    };
    assert!(run(args(false)).status.success());
    let again = run(args(false));
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("pass --force"));
    assert!(run(args(true)).status.success());
    let o = specscope(&["trace", "summary", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("imported: SGLang LinearSpec, NLD-8B (from its log)"),
        "{text}"
    );
    assert!(
        text.contains("LinearSpec's draft and verify: the log counts none"),
        "{text}"
    );
    assert!(
        text.contains("health checks dropped: 2 requests, 2 rounds"),
        "{text}"
    );
    let o = specscope(&["trace", "compare", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("(imported log): imp.jsonl | 16 | 10 |"),
        "{text}"
    );
}

/// The PyTorch harness's version-2 trace: every field kept, the forwards its lines
/// count (a draft and a verify a round, `nfe_after_round` rising by two), and its
/// request stats joined on the request's id.
#[test]
fn a_version_2_trace_counts_its_own_forwards() {
    const V2: &str = "pytorch_raw_trace_gsm8k.head6.jsonl";
    let t = imported(&[V2, "pytorch_request_stats.jsonl"]);
    let src = t.header.source.as_ref().unwrap();
    assert_eq!(src.format, "linearspec-confidence v2");
    assert!(
        src.joined[0].contains("on request_id (1 of 1 requests)"),
        "{:?}",
        src.joined
    );
    assert_eq!(t.header.device, "native_pytorch");
    let lines = lines_of(&fixture(V2));
    let got = rounds(&t);
    for (r, l) in got.iter().zip(&lines) {
        assert_eq!(r.confidence.as_ref(), Some(l));
        assert_eq!(r.forwards(), Some(2));
    }
    // The forwards between the first and last line, as nfe_after_round counts them.
    let nfe = |l: &Map<String, Value>| l["nfe_after_round"].as_u64().unwrap();
    let s = summary(&t);
    assert_eq!(
        s.forwards.decode as u64 - 2,
        nfe(lines.last().unwrap()) - nfe(&lines[0])
    );
    assert!(!src.absent.iter().any(|a| a.contains("forward counts")));
    let out: Vec<Value> = confidence_lines(&t)
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        out,
        lines.into_iter().map(Value::Object).collect::<Vec<_>>()
    );
}

/// `--tokenizer` gives the ids a log holds their text (here the bundled model's
/// tokenizer: ids past its vocabulary stay numbers), and `plot` draws an imported
/// recording's rounds.
#[test]
fn token_text_and_figures_of_an_imported_log() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imp.jsonl");
    let tok = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/tiny-nld");
    let o = specscope(&[
        "trace",
        "import",
        fixture(TRACE).to_str().unwrap(),
        "--tokenizer",
        tok.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = read_trace(&out).unwrap();
    let texts: Vec<u32> = t
        .events
        .iter()
        .filter_map(|s| match &s.event {
            TraceEvent::Session(SessionEvent::TokenText { tokens }) => Some(tokens),
            _ => None,
        })
        .flatten()
        .map(|(id, _)| *id)
        .collect();
    // Line 1's rejected draft (1044) and line 2's ids (1395, 1058) are in the bundled
    // vocabulary (2048 ids); line 1's verifier token (2613) and line 3's (44642) not.
    for id in [1044, 1395, 1058] {
        assert!(texts.contains(&id), "{id}: {texts:?}");
    }
    for id in [2613, 44642] {
        assert!(!texts.contains(&id), "{id}: {texts:?}");
    }
    let figs = dir.path().join("figs");
    let o = specscope(&[
        "plot",
        "--recording",
        out.to_str().unwrap(),
        "--out",
        figs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(figs.join("acceptance-length.svg").is_file());
}

/// A record file that names one id twice, a file given twice, and `--joined-only`
/// dropping the warm-up request no record names; a log's text reaches the terminal
/// without its control characters.
#[test]
fn joins_refuse_ambiguity_and_drop_what_no_record_names() {
    let timing = std::fs::read_to_string(fixture("sglang_lora_graph_timing.jsonl")).unwrap();
    let first = timing.lines().next().unwrap();
    let (_d, dup) = temp_with("dup.jsonl", &format!("{first}\n{first}\n"));
    let err = format!(
        "{:#}",
        import(&[fixture(TRACE), dup], &ImportOptions::default()).unwrap_err()
    );
    assert!(err.contains("names two records"), "{err}");
    let err = format!(
        "{:#}",
        import(&[fixture(TRACE), fixture(TRACE)], &ImportOptions::default()).unwrap_err()
    );
    assert!(err.contains("named twice"), "{err}");
    let opts = ImportOptions {
        joined_only: true,
        ..ImportOptions::default()
    };
    let t = import(
        &[fixture(TRACE), fixture("sglang_lora_graph_timing.jsonl")],
        &opts,
    )
    .unwrap();
    let s = summary(&t);
    // The warm-up's 5 rounds are gone; the eval request's 5 stay, renumbered 1.
    assert_eq!((s.requests, s.tally.rounds), (1, 5));
    assert!(rounds(&t).iter().all(|r| r.req == 1));
    assert_eq!(t.header.source.as_ref().unwrap().unjoined_dropped, 1);
    // An escape sequence in a log's field.
    let text = std::fs::read_to_string(fixture(TRACE)).unwrap();
    let evil = text.replace(
        "\"batch_index\":0",
        "\"backend\":\"pt\\u001b]0;pwned\\u0007\\u001b[2J\",\"batch_index\":0",
    );
    let (_d, p) = temp_with("evil.jsonl", &evil);
    let t = import(&[p], &ImportOptions::default()).unwrap();
    let src = t.header.source.as_ref().unwrap();
    assert!(!src.label.chars().any(char::is_control), "{:?}", src.label);
    assert!(!t.header.device.chars().any(char::is_control));
}
