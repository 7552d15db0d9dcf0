//! Recordings: a live session recorded through the real app loop replays to the same
//! transcript and statistics; malformed files fail with FILE:LINE (a cut-off tail
//! replays with a warning); the reader never panics on arbitrary bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use proptest::prelude::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use specscope::engine::{DecodeEvent, DecodeOptions, EngineHandle, Mode, Scheduler};
use specscope::model::{self, LoadOptions, ModelSource};
use specscope::trace::reader::parse_trace;
use specscope::trace::{read_trace, Summary, TraceEvent, TraceHeader};
use specscope::tui::app::{run_live, run_replay, Live, Player, Screen, TermInput, Ui};
use specscope::tui::keymap::Keymap;
use specscope::tui::state::{Role, State};
use specscope::tui::theme::Theme;

fn ui() -> Ui {
    Ui {
        theme: Theme::dark(),
        keymap: Keymap::builtin(),
        warnings: Vec::new(),
    }
}

fn key(code: KeyCode, m: KeyModifiers) -> TermInput {
    TermInput::Key(KeyEvent::new(code, m))
}

fn type_line(tx: &tokio::sync::mpsc::UnboundedSender<TermInput>, text: &str) {
    for c in text.chars() {
        tx.send(key(KeyCode::Char(c), KeyModifiers::NONE)).unwrap();
    }
    tx.send(key(KeyCode::Enter, KeyModifiers::NONE)).unwrap();
}

fn count(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.matches(needle).count())
        .unwrap_or(0)
}

fn wait_for(path: &Path, needle: &str, n: usize) {
    let start = Instant::now();
    while count(path, needle) < n {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {n}× {needle}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn options(mode: Mode) -> DecodeOptions {
    DecodeOptions {
        mode,
        max_new_tokens: 48,
        ..DecodeOptions::default()
    }
}

fn transcript(s: &State) -> Vec<(Role, String)> {
    s.chat
        .transcript
        .iter()
        .map(|t| (t.role, t.text.clone()))
        .collect()
}

/// Record a two-question chat (with a mode switch) through the live app, then replay
/// the file: same transcript, same statistics, and the summary line agrees.
#[test]
fn live_session_records_and_replays_identically() {
    let files = ModelSource::Bundled.resolve().unwrap();
    let device = candle_core::Device::Cpu;
    let (m, _) = model::load(&files, &device, LoadOptions::default()).unwrap();
    let tok = model::load_tokenizer(&files, m.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let context = m.config().max_position_embeddings;
    let (handle, events) = EngineHandle::spawn(Scheduler::new(m, Some(tok.clone())));
    let live = Live {
        handle,
        events,
        tokenizer: tok,
        context,
        header: TraceHeader::new("bundled:tiny-nld".into(), "cpu".into()),
        record: Some(path.clone()),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let app = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut screen = Screen::new(Terminal::new(TestBackend::new(160, 48)).unwrap(), false);
        let mut s = State::new("bundled:tiny-nld", "cpu", options(Mode::Recguide));
        rt.block_on(run_live(&mut screen, &mut rx, live, &ui(), &mut s))
            .unwrap();
        let drawn: String = screen
            .terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        (s, drawn)
    });
    type_line(&tx, "What is 12 plus 7?");
    wait_for(&path, "\"kind\":\"request_finished\"", 1);
    // F2 cycles RecGuide → block diffusion; the second answer is diffused (its events
    // recorded and replayed like the others').
    tx.send(key(KeyCode::F(2), KeyModifiers::NONE)).unwrap();
    type_line(&tx, "List three colours.");
    wait_for(&path, "\"kind\":\"request_finished\"", 2);
    tx.send(key(KeyCode::Char('q'), KeyModifiers::CONTROL))
        .unwrap();
    let (live_state, drawn) = app.join().unwrap();
    assert!(drawn.contains("history"), "the app drew its panes");

    let trace = read_trace(&path).unwrap();
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    let modes: Vec<Mode> = trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TraceEvent::Decode(DecodeEvent::RequestStarted { mode, .. }) => Some(*mode),
            _ => None,
        })
        .collect();
    assert_eq!(modes, vec![Mode::Recguide, Mode::Diffusion]);

    // Replay every event through the same reducer.
    let mut s = State::new("replay", "cpu", options(Mode::Recguide));
    let mut player = Player::new(trace.clone(), "session.jsonl".into());
    player.advance(&mut s, 1e9);
    assert_eq!(player.pos, trace.events.len());
    let live_t = transcript(&live_state);
    assert_eq!(live_t.len(), 4, "{live_t:?}");
    assert!(live_t.iter().all(|(_, t)| !t.is_empty()));
    assert_eq!(transcript(&s), live_t);

    let from_file = Summary::of(trace.events.iter().map(|e| &e.event));
    let recorded = trace.recorded_summary().expect("session_end line");
    assert_eq!(&from_file, recorded);
    assert_eq!(s.stats.current, *recorded);
    assert_eq!(live_state.stats.current, *recorded);
    assert_eq!(recorded.requests, 2);
    assert_eq!(recorded.finished, 2);
    assert!(recorded.tally.rounds > 4 && recorded.forwards.decode > 0);
    // The rounds the screen walked are the same in the replay (times aside: the file
    // keeps them to the microsecond).
    let untimed = |s: &State| {
        s.rounds
            .list
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.t = 0.0;
                r
            })
            .collect::<Vec<_>>()
    };
    assert!(
        untimed(&s) == untimed(&live_state),
        "replayed rounds differ"
    );
}

/// `specscope replay` in a test terminal: step pauses and feeds exactly one round,
/// seeking back rebuilds the state, and the final transcript is the recording's.
#[test]
fn replay_controls_step_and_seek() {
    let trace = read_trace(&demo()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let t2 = trace.clone();
    let app = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut screen = Screen::new(Terminal::new(TestBackend::new(160, 48)).unwrap(), false);
        let mut s = State::new("demo", "cpu", options(Mode::Recguide));
        let mut player = Player::new(t2, "demo.jsonl".into());
        player.playing = false;
        rt.block_on(run_replay(&mut screen, &mut rx, player, &ui(), &mut s))
            .unwrap();
        s
    });
    for _ in 0..5 {
        tx.send(key(KeyCode::F(6), KeyModifiers::NONE)).unwrap();
    }
    tx.send(key(KeyCode::Right, KeyModifiers::CONTROL)).unwrap(); // +10 rounds
    tx.send(key(KeyCode::Left, KeyModifiers::CONTROL)).unwrap(); // −10 rounds
    tx.send(key(KeyCode::Char('q'), KeyModifiers::CONTROL))
        .unwrap();
    let s = app.join().unwrap();
    assert_eq!(s.stats.current.tally.rounds, 5, "five steps, +10 −10");
    assert!(s.replaying());

    // Played to the end, the transcript holds every recorded answer.
    let mut s = State::new("demo", "cpu", options(Mode::Recguide));
    let mut player = Player::new(trace.clone(), "demo".into());
    player.advance(&mut s, 1e9);
    let finished: Vec<String> = trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TraceEvent::Decode(DecodeEvent::RequestFinished { text, .. }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    let last = s.chat.transcript.last().unwrap();
    assert_eq!(&last.text, finished.last().unwrap());
    assert_eq!(s.stats.current, *trace.recorded_summary().unwrap());
}

fn demo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl")
}

fn demo_bytes() -> Vec<u8> {
    std::fs::read(demo()).unwrap()
}

fn nth_line_start(bytes: &[u8], n: usize) -> usize {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map(|(i, _)| i + 1)
        .unwrap()
}

#[test]
fn truncated_tail_replays_up_to_the_last_full_line() {
    let bytes = demo_bytes();
    let full = parse_trace(&bytes, "demo").unwrap();
    // Cut in the middle of line 40.
    let cut = nth_line_start(&bytes, 39) + 25;
    let t = parse_trace(&bytes[..cut], "demo").unwrap();
    assert_eq!(t.events.len(), 38, "header + 38 full lines");
    assert_eq!(t.events[..], full.events[..t.events.len()]);
    assert_eq!(t.warnings.len(), 1);
    assert!(
        t.warnings[0].contains("demo:40") && t.warnings[0].contains("cut off"),
        "{:?}",
        t.warnings
    );
    assert!(t.recorded_summary().is_none());
    // A cut inside a multi-byte character is a cut too, not bad UTF-8.
    let mut b = bytes[..nth_line_start(&bytes, 3)].to_vec();
    b.extend_from_slice("{\"t\":1.0,\"seq\":9,\"kind\":\"error\",\"message\":\"é".as_bytes());
    b.pop();
    let t = parse_trace(&b, "demo").unwrap();
    assert_eq!(t.warnings.len(), 1);
}

fn err(bytes: &[u8]) -> String {
    format!("{:#}", parse_trace(bytes, "rec.jsonl").unwrap_err())
}

#[test]
fn malformed_recordings_fail_with_file_and_line() {
    let bytes = demo_bytes();
    let l5 = nth_line_start(&bytes, 4);
    let l6 = nth_line_start(&bytes, 5);

    let mut bad = bytes[..l5].to_vec();
    bad.extend_from_slice(b"{\"t\": 1.0, \"seq\": 4, \"kind\": \"committed\",, }\n");
    bad.extend_from_slice(&bytes[l6..]);
    let e = err(&bad);
    assert!(e.contains("rec.jsonl:5") && e.contains("bad JSON"), "{e}");

    let mut bad = bytes[..l5].to_vec();
    bad.extend_from_slice(
        b"{\"t\": 1.0, \"seq\": 4, \"kind\": \"committed\", \"text\": \"\xff\xfe\"}\n",
    );
    bad.extend_from_slice(&bytes[l6..]);
    let e = err(&bad);
    assert!(e.contains("rec.jsonl:5") && e.contains("UTF-8"), "{e}");

    let mut bad = bytes[..l5].to_vec();
    bad.extend_from_slice(b"{\"t\": 1.0, \"seq\": 4, \"kind\": \"verified\", \"req\": 1}\n");
    let e = err(&bad);
    assert!(e.contains("rec.jsonl:5") && e.contains("verified"), "{e}");

    let mut bad = bytes[..l5].to_vec();
    bad.extend_from_slice(b"{\"seq\": 4, \"kind\": \"engine_state\", \"paused\": true}\n");
    let e = err(&bad);
    assert!(e.contains("rec.jsonl:5") && e.contains("`t`"), "{e}");

    let header_end = nth_line_start(&bytes, 1);
    let header = std::str::from_utf8(&bytes[..header_end]).unwrap();
    let future = header.replace("\"version\":1", "\"version\":7");
    let mut bad = future.into_bytes();
    bad.extend_from_slice(&bytes[header_end..]);
    let e = err(&bad);
    assert!(e.contains("rec.jsonl:1") && e.contains("version 7"), "{e}");

    assert!(err(b"").contains("empty"));
    assert!(err(b"hello\n").contains("rec.jsonl:1"));
    assert!(err(b"{\"format\":\"asciicast\"}\n").contains("asciicast"));
}

#[test]
fn unknown_event_kinds_are_skipped_with_a_warning() {
    let bytes = demo_bytes();
    // A newer writer's kind at line 5, numbered in turn (the lines after it too).
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.insert(
        4,
        "{\"t\": 1.0, \"seq\": 3, \"kind\": \"hologram\", \"x\": 1}".into(),
    );
    for (i, l) in lines.iter_mut().enumerate().skip(5) {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["seq"] = serde_json::json!(i - 1);
        *l = v.to_string();
    }
    let b = (lines.join("\n") + "\n").into_bytes();
    let full = parse_trace(&bytes, "demo").unwrap();
    let t = parse_trace(&b, "rec.jsonl").unwrap();
    let body = |e: &[specscope::trace::Stamped]| -> Vec<TraceEvent> {
        e.iter().map(|s| s.event.clone()).collect()
    };
    assert_eq!(body(&t.events), body(&full.events));
    assert!(t.warnings[0].contains("rec.jsonl:5") && t.warnings[0].contains("hologram"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Arbitrary bytes never panic the reader.
    #[test]
    fn reader_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_trace(&bytes, "fuzz");
    }

    /// Nor do arbitrary lines after a valid header, or a valid file cut anywhere.
    #[test]
    fn reader_never_panics_after_a_valid_header(tail in proptest::collection::vec(any::<u8>(), 0..400), cut in 0usize..20000) {
        let demo = demo_bytes();
        let header_end = nth_line_start(&demo, 1);
        let mut b = demo[..header_end].to_vec();
        b.extend_from_slice(&tail);
        let _ = parse_trace(&b, "fuzz");
        let cut = cut.min(demo.len());
        if let Ok(t) = parse_trace(&demo[..cut], "fuzz") {
            prop_assert!(t.warnings.len() <= 1);
        }
    }
}

/// Cases of the mutation tests; `SPECSCOPE_MUTATIONS=20000 cargo test --release
/// mutation` runs a long campaign.
fn mutation_cases() -> u32 {
    std::env::var("SPECSCOPE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// Paths (object keys and array indices) to every number in a JSON value.
fn number_paths(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        serde_json::Value::Number(_) => out.push(path.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(i.to_string());
                number_paths(x, path, out);
                path.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                path.push(k.clone());
                number_paths(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(v: &'a mut serde_json::Value, path: &[String]) -> &'a mut serde_json::Value {
    path.iter().fold(v, |v, k| match v {
        serde_json::Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
        other => &mut other[k.as_str()],
    })
}

/// The values a mutation puts in place of a number: the extremes that once crashed,
/// hung or wrapped, and ordinary ones.
fn extreme(i: usize) -> serde_json::Value {
    use serde_json::json;
    [
        json!(0),
        json!(1),
        json!(-1),
        json!(4294967296u64),
        json!(4611686018427387904u64),
        json!(u64::MAX),
        json!(1e9),
        json!(1e308),
        json!(-1e308),
        json!(0.5),
        json!(257),
        json!(1_000_000_000_000u64),
    ][i % 12]
        .clone()
}

/// `text` with the `which`-th number of its line `li` replaced by `extreme(value)`
/// (`None`: the line holds no number).
fn with_number_replaced(text: &str, li: usize, which: usize, value: usize) -> Option<Vec<u8>> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut v: serde_json::Value = serde_json::from_str(&lines[li]).unwrap();
    let mut paths = Vec::new();
    number_paths(&v, &mut Vec::new(), &mut paths);
    let p = paths.get(which % paths.len().max(1))?;
    *at_path(&mut v, p) = extreme(value);
    lines[li] = v.to_string();
    Some((lines.join("\n") + "\n").into_bytes())
}

/// Replays parsed events the way `replay` and `trace summary` would, and draws.
fn consume(t: &specscope::trace::Trace) {
    let _ = Summary::of(t.events.iter().map(|e| &e.event)).report();
    let mut s = State::new("fuzz", "cpu", DecodeOptions::default());
    let mut player = Player::new(t.clone(), "fuzz".into());
    player.advance(&mut s, 1e9);
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    term.draw(|f| specscope::tui::render::draw(f, &s, &Theme::dark(), &Keymap::builtin()))
        .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(mutation_cases()))]

    /// A number of the demo recording replaced by an extreme: the file is refused at
    /// its line, or it reads and replays, summarises and draws without a panic.
    #[test]
    fn mutated_numbers_are_refused_at_their_line_or_harmless(line in 1usize..2000, which in 0usize..1000, value in 0usize..12) {
        let demo = demo_bytes();
        let text = std::str::from_utf8(&demo).unwrap();
        let li = line % text.lines().count();
        let bytes = with_number_replaced(text, li, which, value);
        prop_assume!(bytes.is_some());
        match parse_trace(&bytes.unwrap(), "demo") {
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.starts_with("demo:"), "no FILE:LINE: {msg}");
            }
            Ok(t) => consume(&t),
        }
    }

    /// Lines dropped, repeated or swapped: refused with FILE:LINE, or harmless.
    #[test]
    fn reordered_lines_are_refused_or_harmless(a in 1usize..2000, b in 1usize..2000, op in 0usize..3) {
        let demo = demo_bytes();
        let text = std::str::from_utf8(&demo).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        let (a, b) = (1 + a % (lines.len() - 1), 1 + b % (lines.len() - 1));
        match op {
            0 => { lines.remove(a); }
            1 => { let l = lines[a]; lines.insert(b, l); }
            _ => lines.swap(a, b),
        }
        let bytes = (lines.join("\n") + "\n").into_bytes();
        match parse_trace(&bytes, "demo") {
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.starts_with("demo:"), "no FILE:LINE: {msg}");
            }
            Ok(t) => consume(&t),
        }
    }
}

/// The cases the probe found, each refused with its line.
#[test]
fn huge_counts_and_times_are_refused_with_their_line() {
    let bytes = demo_bytes();
    let text = std::str::from_utf8(&bytes).unwrap();
    let verified = text
        .lines()
        .position(|l| l.contains("\"kind\":\"verified\""))
        .unwrap();
    for (needle, value, want) in [
        ("\"accepted\":", "4611686018427387904", "`accepted`"),
        ("\"accepted\":", "18446744073709551615", "`accepted`"),
    ] {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let l = &lines[verified];
        let i = l.find(needle).unwrap() + needle.len();
        let j = i + l[i..].find(',').unwrap();
        lines[verified] = format!("{}{value}{}", &l[..i], &l[j..]);
        let e = format!(
            "{:#}",
            parse_trace((lines.join("\n") + "\n").as_bytes(), "rec").unwrap_err()
        );
        assert!(
            e.contains(&format!("rec:{}", verified + 1)) && e.contains(want),
            "{e}"
        );
    }
    let forward = text
        .lines()
        .position(|l| l.contains("\"kind\":\"forward\""))
        .unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let v: serde_json::Value = serde_json::from_str(&lines[forward]).unwrap();
    let mut v = v;
    v["ms"] = serde_json::json!(1e308);
    lines[forward] = v.to_string();
    let e = format!(
        "{:#}",
        parse_trace((lines.join("\n") + "\n").as_bytes(), "rec").unwrap_err()
    );
    assert!(
        e.contains(&format!("rec:{}", forward + 1)) && e.contains("`ms`"),
        "{e}"
    );
    // The header: a temperature of −1e308.
    let mut h: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    h["options"]["sampling"]["temperature"] = serde_json::json!(-1e308);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[0] = h.to_string();
    let e = format!(
        "{:#}",
        parse_trace((lines.join("\n") + "\n").as_bytes(), "rec").unwrap_err()
    );
    assert!(e.contains("rec:1") && e.contains("temperature"), "{e}");
}

/// The demo's lines edited as a splice or a hand edit would, `seq` renumbered so only
/// the order itself is wrong: each is refused at its line, naming what is wrong.
#[test]
fn events_out_of_order_are_refused_with_their_line() {
    let bytes = demo_bytes();
    let text = std::str::from_utf8(&bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let find = |kind: &str| {
        let tag = format!("\"kind\":\"{kind}\"");
        lines.iter().position(|l| l.contains(&tag)).unwrap()
    };
    // Events only, with `seq` rewritten in file order.
    let renumber = |ls: &[&str]| -> Vec<u8> {
        let mut out = vec![ls[0].to_string()];
        for (i, l) in ls[1..].iter().enumerate() {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["seq"] = serde_json::json!(i);
            out.push(v.to_string());
        }
        (out.join("\n") + "\n").into_bytes()
    };
    let refused = |ls: &[&str], line: usize, want: &str| {
        let e = format!("{:#}", parse_trace(&renumber(ls), "rec").unwrap_err());
        assert!(
            e.starts_with(&format!("rec:{line}: ")) && e.contains(want),
            "{e}"
        );
    };
    let (finished, verified, committed) = (find("request_finished"), find("verified"), {
        // A round's commit, not the prefill's seed (round 0).
        lines
            .iter()
            .position(|l| l.contains("\"kind\":\"committed\"") && !l.contains("\"round\":0"))
            .unwrap()
    });
    let started = find("request_started");
    let end = lines.len() - 1;
    assert!(lines[end].contains("session_end"));

    let dup = |at: usize| {
        let mut ls = lines.clone();
        ls.insert(at + 1, lines[at]);
        ls
    };
    refused(&dup(finished), finished + 2, "request 1 already finished");
    refused(
        &dup(verified),
        verified + 2,
        "a second `verified` for round 1 of request 1",
    );
    refused(&dup(committed), committed + 2, "a second `committed`");
    refused(&dup(started), started + 2, "request 1 starts again");
    // An event moved before its request starts.
    let mut ls = lines.clone();
    let v = ls.remove(verified);
    ls.insert(1, v);
    refused(&ls, 2, "request 1 has no `request_started`");
    // A request finished before its rounds: its stated statistics are not what its
    // events so far add up to.
    let mut ls = lines.clone();
    let f = ls.remove(finished);
    ls.insert(verified, f);
    refused(&ls, verified + 1, "but its events add up to");
    // Two recordings spliced: something after the first's `session_end`.
    let mut ls = lines.clone();
    ls.insert(end, lines[end]);
    refused(&ls, end + 2, "after `session_end`");
    // Lines swapped without renumbering: `seq` goes back.
    let mut ls = lines.clone();
    ls.swap(5, 9);
    let e = format!(
        "{:#}",
        parse_trace((ls.join("\n") + "\n").as_bytes(), "rec").unwrap_err()
    );
    // Line 6 now holds seq 8 where 4 was due: the first out of turn.
    assert!(
        e.starts_with("rec:6: ") && e.contains("out of order"),
        "{e}"
    );
    // The untouched demo reads, renumbered or not.
    parse_trace(&renumber(&lines), "rec").unwrap();
}

/// A header version that is not a number is named as the file has it.
#[test]
fn header_versions_are_quoted_as_written() {
    let bytes = demo_bytes();
    let text = std::str::from_utf8(&bytes).unwrap();
    // The error of the demo with its header edited by `edit`.
    let with_header = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut h: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        edit(&mut h);
        lines[0] = h.to_string();
        format!(
            "{:#}",
            parse_trace((lines.join("\n") + "\n").as_bytes(), "rec").unwrap_err()
        )
    };
    for (field, value, want) in [
        ("version", serde_json::json!(-1), "recording version -1"),
        ("version", serde_json::json!("1"), "recording version \"1\""),
        ("event_version", serde_json::json!(2.5), "event version 2.5"),
    ] {
        let e = with_header(&|h| h[field] = value.clone());
        assert!(e.starts_with("rec:1: ") && e.contains(want), "{e}");
    }
    let e = with_header(&|h| {
        h.as_object_mut().unwrap().remove("version");
    });
    assert!(e.contains("version (missing)"), "{e}");
}

/// The demo's event lines (after the header), as JSON values.
fn demo_lines() -> Vec<String> {
    String::from_utf8(demo_bytes())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn join(lines: &[String]) -> Vec<u8> {
    let mut s = lines.join("\n");
    s.push('\n');
    s.into_bytes()
}

/// An edited recording fails naming a line: every event line deleted (but the last,
/// which is a recording cut short) breaks the `seq` run; every event line repeated
/// does too.
#[test]
fn a_deleted_or_repeated_event_line_is_refused() {
    let lines = demo_lines();
    // Every line near the ends and every 5th between (each case parses the file).
    let n = lines.len();
    for i in (1..n - 1).filter(|&i| i < 40 || i > n - 40 || i % 5 == 0) {
        let mut edited = lines.clone();
        let gone = edited.remove(i);
        let e = err(&join(&edited));
        assert!(
            e.contains("rec.jsonl:") && e.contains("seq"),
            "line {} deleted ({gone:.60}): {e}",
            i + 1
        );
        let mut twice = lines.clone();
        twice.insert(i, lines[i].clone());
        let e = err(&join(&twice));
        assert!(e.contains("seq"), "line {} repeated: {e}", i + 1);
    }
    // The last line gone is the same file cut short: it reads.
    parse_trace(&join(&lines[..lines.len() - 1]), "rec.jsonl").unwrap();
}

/// Every count of every request's stated statistics moved by one: refused, naming the
/// request, unless the move is one the events cannot see.
#[test]
fn stated_statistics_are_checked_against_the_events() {
    let lines = demo_lines();
    let mut cases = 0;
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["kind"] != "request_finished" {
            continue;
        }
        for field in [
            "new_tokens",
            "decode_tokens",
            "rounds",
            "draft_forwards",
            "saved_drafts",
            "query_tokens",
        ] {
            for delta in [1i64, -1] {
                let mut m = v.clone();
                // The tally is flattened into `stats`.
                let x = &mut m["stats"][field];
                let Some(n) = x.as_i64() else { continue };
                if n + delta < 0 {
                    continue;
                }
                *x = serde_json::json!(n + delta);
                let mut edited = lines.clone();
                edited[i] = m.to_string();
                let e = parse_trace(&join(&edited), "rec.jsonl")
                    .err()
                    .map(|e| format!("{e:#}"));
                assert!(
                    e.as_deref()
                        .is_some_and(|e| e.contains(&format!("rec.jsonl:{}", i + 1))),
                    "line {} {field} {delta:+}: {e:?}",
                    i + 1
                );
                cases += 1;
            }
        }
    }
    assert!(cases > 20, "{cases}");
}

/// A recording's lines as JSON values, after its header.
fn event_values(path: &Path) -> (String, Vec<serde_json::Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    (
        header,
        lines.map(|l| serde_json::from_str(l).unwrap()).collect(),
    )
}

/// The recording `header` + `events` as the reader sees it: `Err` naming its line.
fn read_edited(header: &str, events: &[serde_json::Value]) -> Result<(), String> {
    let mut text = format!("{header}\n");
    for e in events {
        text.push_str(&e.to_string());
        text.push('\n');
    }
    parse_trace(text.as_bytes(), "rec.jsonl")
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

/// The line number an error names (`rec.jsonl:N`).
fn line_named(e: &str) -> Option<usize> {
    let at = e.find("rec.jsonl:")? + "rec.jsonl:".len();
    e[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A block diffusion recording of the bundled model, several steps a block.
fn diffusion_recording(dir: &Path) -> std::path::PathBuf {
    let args = [
        "--mode",
        "diffusion",
        "--block",
        "8",
        "--threshold",
        "0.999",
    ];
    record(
        dir,
        "diffusion.jsonl",
        &[&args[..], &["--max-new-tokens", "24"]].concat(),
    )
}

/// `trace record --limit 1 ARGS` of the bundled model into `dir/name`.
fn record(dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_specscope"))
        .args(["trace", "record", "--limit", "1"])
        .args(args)
        .arg("--out")
        .arg(&out)
        .env_remove("SPECSCOPE_MODEL")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Every number of every request's stated statistics (each tally count, each
/// histogram cell, each branch count) moved by one, in the demo (RecGuide) and in a
/// diffusion recording: refused at its line. Times are not counts and stay out.
#[test]
fn every_stated_statistic_is_derived_from_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for path in [demo(), diffusion_recording(dir.path())] {
        let (header, events) = event_values(&path);
        for (i, v) in events.iter().enumerate() {
            if v["kind"] != "request_finished" {
                continue;
            }
            let mut paths = Vec::new();
            number_paths(&v["stats"], &mut vec!["stats".into()], &mut paths);
            for p in paths {
                let field = p[1].as_str();
                if field.ends_with("_secs")
                    || field == "prompt_tokens"
                    || field == "first_divergence"
                {
                    continue;
                }
                for delta in [1i64, -1] {
                    let mut edited = events.clone();
                    let x = at_path(&mut edited[i], &p);
                    let Some(n) = x.as_i64().filter(|n| n + delta >= 0) else {
                        continue;
                    };
                    *x = serde_json::json!(n + delta);
                    let e = read_edited(&header, &edited).err();
                    assert_eq!(
                        e.as_deref().and_then(line_named),
                        Some(i + 2),
                        "{} line {} {p:?} {delta:+}: {e:?}",
                        path.display(),
                        i + 2
                    );
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 100, "{cases}");
}

/// Every number of the closing summary moved by one, in the demo and a diffusion
/// recording: refused at the `session_end` line, naming the field.
#[test]
fn every_closing_statistic_is_derived_from_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for path in [demo(), diffusion_recording(dir.path())] {
        let (header, events) = event_values(&path);
        let end = events.len() - 1;
        assert_eq!(events[end]["kind"], "session_end");
        assert!(read_edited(&header, &events).is_ok());
        let mut paths = Vec::new();
        number_paths(
            &events[end]["summary"],
            &mut vec!["summary".into()],
            &mut paths,
        );
        for p in paths {
            for delta in [1.0, -1.0] {
                let mut edited = events.clone();
                let x = at_path(&mut edited[end], &p);
                let n = x.as_f64().unwrap();
                if n + delta < 0.0 {
                    continue;
                }
                *x = if x.is_f64() {
                    serde_json::json!(n + delta)
                } else {
                    serde_json::json!((n + delta) as u64)
                };
                let e = read_edited(&header, &edited).err();
                assert_eq!(
                    e.as_deref().and_then(line_named),
                    Some(end + 2),
                    "{} {p:?} {delta:+}: {e:?}",
                    path.display()
                );
                // Refused by the bounds check (naming the field it bounds, which may
                // be the edited one's partner) or by the comparison (naming the path).
                let e = e.unwrap_or_default();
                let field = p
                    .iter()
                    .rev()
                    .find(|k| k.parse::<usize>().is_err())
                    .unwrap();
                assert!(
                    e.contains("bad `session_end` event")
                        || (e.contains("`session_end`'s `summary.") && e.contains(field.as_str())),
                    "{p:?}: {e}"
                );
                cases += 1;
            }
        }
    }
    assert!(cases > 50, "{cases}");
}

/// Every number of every diffusion event (step, canvas tokens, positions, the block
/// written, its steps, the committed tokens, AR's tokens where the move changes an
/// agreement) moved by one: refused at that line or a later one of the same request.
/// The kinds of another mode and a version without diffusion are refused too.
#[test]
fn every_diffusion_event_is_checked_against_its_round() {
    let dir = tempfile::tempdir().unwrap();
    let (header, events) = event_values(&diffusion_recording(dir.path()));
    let kinds = ["denoised", "block_written", "committed"];
    let mut cases = 0;
    for (i, v) in events.iter().enumerate() {
        if !kinds.contains(&v["kind"].as_str().unwrap_or_default()) || v["round"] == 0 {
            continue;
        }
        let mut paths = Vec::new();
        number_paths(v, &mut Vec::new(), &mut paths);
        for p in paths {
            // Times and `seq` have checks of their own; `req` and `round` move the
            // event to another round (the order tests).
            if ["t", "seq", "req", "round"].contains(&p[0].as_str()) {
                continue;
            }
            let mut edited = events.clone();
            let x = at_path(&mut edited[i], &p);
            if let Some(f) = x.as_f64().filter(|_| x.is_f64()) {
                *x = serde_json::json!(f + 1.0); // a probability above 1
            } else {
                *x = serde_json::json!(x.as_u64().unwrap() + 1);
            }
            if p[0] == "ar" {
                // AR's token shows only in the agreement it counts toward.
                let k: usize = p[1].parse().unwrap();
                let (old, new) = (v["ar"][k].as_u64(), edited[i]["ar"][k].as_u64());
                if (old == v["block"][k].as_u64()) == (new == v["block"][k].as_u64()) {
                    continue;
                }
            }
            let e = read_edited(&header, &edited).err();
            let at = e.as_deref().and_then(line_named);
            assert!(
                at.is_some_and(|l| l >= i + 2),
                "line {} {} {p:?}: {e:?}",
                i + 2,
                v["kind"]
            );
            cases += 1;
        }
    }
    assert!(cases > 100, "{cases}");
    // A diffusion request said to decode another mode, and the version before
    // diffusion: refused.
    for mode in ["linear", "recguide", "ar"] {
        let mut edited = events.clone();
        let started = edited
            .iter_mut()
            .find(|e| e["kind"] == "request_started")
            .unwrap();
        started["mode"] = mode.into();
        let e = read_edited(&header, &edited).unwrap_err();
        assert!(e.contains("belongs to another mode"), "{mode}: {e}");
    }
    let mut old: serde_json::Value = serde_json::from_str(&header).unwrap();
    old["event_version"] = 4.into();
    let e = read_edited(&old.to_string(), &events).unwrap_err();
    assert!(e.contains("event version 4"), "{e}");
    // And a LinearSS request's round events in a diffusion request.
    let demo_verified = event_values(&demo())
        .1
        .into_iter()
        .find(|e| e["kind"] == "verified")
        .unwrap();
    let at = events
        .iter()
        .position(|e| e["kind"] == "block_written")
        .unwrap();
    let mut edited = events.clone();
    let mut spliced = demo_verified;
    spliced["req"] = events[at]["req"].clone();
    spliced["round"] = events[at]["round"].clone();
    spliced["seq"] = events[at]["seq"].clone();
    edited[at] = spliced;
    let e = read_edited(&header, &edited).unwrap_err();
    assert!(e.contains("belongs to another mode"), "{e}");
}

/// A margin or probability outside 0..1 anywhere a draft or verdict states one.
#[test]
fn margins_and_probabilities_are_range_checked() {
    let lines = demo_lines();
    let mut cases = 0;
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let mut paths: Vec<Vec<String>> = Vec::new();
        if v["kind"] == "drafted" && v["margins"].as_array().is_some_and(|a| !a.is_empty()) {
            paths.push(vec!["margins".into(), "0".into()]);
        }
        for key in ["detail"] {
            if v[key].as_array().is_some_and(|a| !a.is_empty()) {
                paths.push(vec![key.into(), "0".into(), "margin".into()]);
                paths.push(vec![key.into(), "0".into(), "confidence".into()]);
            }
        }
        for path in paths.into_iter().take(2) {
            for bad in [1e9, -0.5, 1.5] {
                let mut m = v.clone();
                *at_path(&mut m, &path) = serde_json::json!(bad);
                let mut edited = lines.clone();
                edited[i] = m.to_string();
                let e = err(&join(&edited));
                assert!(
                    e.contains(&format!("rec.jsonl:{}", i + 1)) && e.contains("0 to 1"),
                    "line {} {path:?} = {bad}: {e}",
                    i + 1
                );
                cases += 1;
            }
        }
        if cases > 300 {
            break;
        }
    }
    assert!(cases > 30, "{cases}");
}

/// `trace beliefs` rebuilds what the block policy learned from a recording made from
/// the engine's start; a `learned` line with an impossible number is refused at its
/// line naming the field, and a recording begun after the engine's first step says
/// why it cannot.
#[test]
fn trace_beliefs_rebuilds_the_policy_and_refuses_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), "rec.jsonl", &["--max-new-tokens", "48"]);
    let bin = env!("CARGO_BIN_EXE_specscope");
    let beliefs = |path: &Path| {
        let o = std::process::Command::new(bin)
            .args(["trace", "beliefs"])
            .arg(path)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, text, err) = beliefs(&out);
    assert!(ok, "{err}");
    assert!(
        text.contains("beliefs rebuilt from") && text.contains("B = 8"),
        "{text}"
    );
    let (header, events) = event_values(&out);
    let learned: Vec<usize> = (0..events.len())
        .filter(|&i| events[i]["kind"] == "learned")
        .collect();
    assert!(learned.len() > 3, "{learned:?}");
    let forward_of = |i: usize| {
        events[i]["observations"]
            .as_array()
            .unwrap()
            .iter()
            .position(|o| o["what"] == "forward")
            .unwrap()
    };
    let at = learned[1];
    let k = forward_of(at);
    for (field, value, says) in [
        ("wall_ms", serde_json::json!(-1.0), "wall_ms"),
        ("modeled_ms", serde_json::json!(1e308), "modeled_ms"),
    ] {
        let mut edited = events.clone();
        edited[at]["observations"][k][field] = value;
        let e = read_edited(&header, &edited).unwrap_err();
        assert_eq!(line_named(&e), Some(at + 2), "{e}");
        assert!(e.contains(&format!("observations.{k}.{says}")), "{e}");
    }
    // As a recording begun mid-session holds them (steps counted from before it, no
    // start): the file reads, the rebuild says what is missing.
    let mut later = events.clone();
    for &i in &learned {
        let step = later[i]["step"].as_u64().unwrap();
        later[i]["step"] = serde_json::json!(step + 1000);
        later[i].as_object_mut().unwrap().remove("start");
    }
    read_edited(&header, &later).unwrap();
    let mut text = format!("{header}\n");
    for e in &later {
        text.push_str(&e.to_string());
        text.push('\n');
    }
    let cut = dir.path().join("later.jsonl");
    std::fs::write(&cut, text).unwrap();
    let (ok, _, err) = beliefs(&cut);
    assert!(
        !ok && err.contains("starts at the engine's step 1001"),
        "{err}"
    );
    // A block diffusion recording: its steps' forwards are what the beliefs learned.
    let (ok, text, err) = beliefs(&diffusion_recording(dir.path()));
    assert!(ok && text.contains("steps of the engine"), "{err}{text}");
}

/// A recording of the bundled model with `learned` lines, made once.
fn learned_recording() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = record(dir.path(), "learned.jsonl", &["--max-new-tokens", "32"]);
        std::fs::read(path).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(mutation_cases()))]

    /// A number of a `learned` line replaced by an extreme: the file is refused with
    /// FILE:LINE, or it reads, replays, and its beliefs rebuild (or are refused) and
    /// print without a panic.
    #[test]
    fn mutated_learned_numbers_are_refused_or_harmless(k in 0usize..1000, which in 0usize..1000, value in 0usize..12) {
        let text = std::str::from_utf8(learned_recording()).unwrap();
        let learned: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains("\"kind\":\"learned\""))
            .map(|(i, _)| i)
            .collect();
        let li = learned[k % learned.len()];
        let bytes = with_number_replaced(text, li, which, value).unwrap();
        match parse_trace(&bytes, "rec") {
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.starts_with("rec:"), "no FILE:LINE: {msg}");
            }
            Ok(t) => {
                consume(&t);
                let events = t.events.iter().filter_map(|e| match &e.event {
                    TraceEvent::Decode(d) => Some(d),
                    _ => None,
                });
                if let Ok(Some(r)) = specscope::trace::beliefs::rebuild(events) {
                    let _ = r.report();
                }
            }
        }
    }
}
