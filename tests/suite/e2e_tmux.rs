//! End to end: the real binary in tmux, typed at like a user, with the default options:
//! the empty chat introduces the model, answers stream in slow motion with a draft in
//! the round pane round after round and branch rows among them, pause and step work,
//! quitting leaves the shell intact; at 80×24 too.

use std::process::Command;
use std::time::{Duration, Instant};

/// Tmux servers started by this process (each gets its own socket).
static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn start() -> Option<Self> {
        Self::sized(160, 48)
    }

    /// A tmux server of this size, or None (the test then passes, saying it was
    /// skipped) where tmux is missing, so `cargo test` works on a machine with only a
    /// Rust toolchain. CI sets SPECSCOPE_REQUIRE_TMUX=1: there a missing tmux fails.
    fn sized(w: u16, h: u16) -> Option<Self> {
        let ok = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var_os("SPECSCOPE_REQUIRE_TMUX").is_none(),
                "tmux is needed for this test (apt-get install tmux) and SPECSCOPE_REQUIRE_TMUX is set"
            );
            eprintln!("skipped: tmux is not installed (apt-get install tmux to run this test)");
            return None;
        }
        let t = Tmux {
            socket: format!(
                "specscope-e2e-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            session: "e2e".into(),
        };
        let (w, h) = (w.to_string(), h.to_string());
        t.tmux(&[
            "new-session",
            "-d",
            "-x",
            &w,
            "-y",
            &h,
            "-s",
            &t.session,
            "bash --norc --noprofile",
        ]);
        Some(t)
    }

    /// Starts specscope with the default options (and a config dir of its own) at a
    /// shell prompt; waits for the empty chat.
    fn launch(&self, cfg: &std::path::Path, args: &str) {
        self.literal("PS1='E2E$ '; clear");
        self.keys(&["Enter"]);
        self.wait("the shell", |s| s.contains("E2E$"));
        let cmd = format!(
            "SPECSCOPE_CONFIG_DIR={} {} {args}; echo EXIT=$?",
            cfg.display(),
            env!("CARGO_BIN_EXE_specscope")
        );
        self.literal(&cmd);
        self.keys(&["Enter"]);
        self.wait("the chat screen", |s| {
            s.contains("specscope: watch") && s.contains(" specscope │")
        });
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", &self.session];
        a.extend_from_slice(keys);
        self.tmux(&a);
    }

    fn literal(&self, text: &str) {
        self.tmux(&["send-keys", "-t", &self.session, "-l", text]);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.session])
    }

    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_for(what, ok, false)
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool, after_exit: bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                after_exit || !exited(&s),
                "specscope exited while waiting for {what}:\n{s}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "timed out waiting for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Tmux {
    /// Types `prompt`, sends it and waits for the answer to start.
    fn ask(&self, prompt: &str) {
        self.literal(prompt);
        self.keys(&["Enter"]);
        self.wait("the answer to start", |s| s.contains("answering"));
    }

    fn wait_exit(&self) -> String {
        self.wait_for("specscope to quit", exited, true)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// The shell printed specscope's exit status (not the echo in the typed command).
fn exited(screen: &str) -> bool {
    // `EXIT=0`, not the typed `EXIT=$?` that a narrow pane may wrap to a line's start.
    screen.lines().any(|l| {
        l.strip_prefix("EXIT=")
            .is_some_and(|code| code.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// The first prompts a newcomer types.
const NEWCOMER_PROMPTS: [&str; 2] = [
    "What is 12 plus 7?",
    "Write a python function that reverses a list.",
];

/// The round number in the round pane's title (`round N · request R`).
fn round_no(screen: &str) -> Option<usize> {
    let i = screen.find("┌ round ")?;
    screen[i + "┌ round ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the round pane shows in a screen capture.
#[derive(Debug, PartialEq, Eq)]
enum Shown {
    Draft,
    ArStep,
    Other,
}

fn shown(screen: &str) -> Shown {
    if screen.contains("AR step: one token") {
        Shown::ArStep
    } else if screen.contains("seed") {
        Shown::Draft
    } else {
        Shown::Other
    }
}

fn has_branch_row(screen: &str) -> bool {
    ["P1 @", "P2 @", "P3 @", "new @"]
        .iter()
        .any(|p| screen.contains(p))
}

#[test]
fn chat_streams_pauses_steps_and_quits_cleanly_in_tmux() {
    let Some(t) = Tmux::start() else { return };
    let cfg = tempfile::tempdir().unwrap();
    t.launch(cfg.path(), "--max-new-tokens 120");
    let s = t.screen();
    assert!(
        s.contains("drill model"),
        "the bundled model introduces itself:\n{s}"
    );
    assert!(
        s.contains("slow 1s"),
        "the chat opens in slow motion, a round a second:\n{s}"
    );
    // Alt+= speeds it up (and the rest of this test runs at 300 ms a round).
    t.keys(&["M-="]);
    t.wait("a faster pace", |s| s.contains("slow 300ms"));

    // First prompts a newcomer types; sample the round pane while they are answered.
    let (mut drafts, mut ar_steps, mut branch_rows) = (0, 0, 0);
    let mut rounds_seen = std::collections::BTreeSet::new();
    for prompt in NEWCOMER_PROMPTS {
        t.ask(prompt);
        let start = Instant::now();
        loop {
            let s = t.screen();
            if let Some(n) = round_no(&s) {
                if rounds_seen.insert((prompt, n)) {
                    match shown(&s) {
                        Shown::Draft => drafts += 1,
                        Shown::ArStep => ar_steps += 1,
                        Shown::Other => {}
                    }
                    branch_rows += usize::from(has_branch_row(&s));
                }
            }
            // `ask` waited for the answer to start.
            if !s.contains("answering") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "answer never ended:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(60));
        }
    }
    assert!(
        drafts >= 4 && drafts > 4 * ar_steps,
        "drafts shown in {drafts} sampled rounds, AR steps in {ar_steps}"
    );
    assert!(branch_rows >= 1, "no branch row in {drafts} sampled rounds");

    t.literal("List three colours.");
    t.keys(&["Enter"]);
    t.wait("a drafted round of the third request", |s| {
        s.contains("· request 3 ") && s.contains("seed")
    });
    t.keys(&["F5"]);
    // The status says paused when the engine says so, after any round it was running:
    // from then on it runs a round per step only (`engine::a_paused_engine_runs_one_round_per_step`).
    let s = t.wait("pause", |s| s.contains("⏸ paused"));
    let before = round_no(&s).unwrap();
    t.keys(&["F6"]);
    t.wait("one step, still paused", |s| {
        round_no(s) == Some(before + 1) && s.contains("⏸ paused")
    });

    // The answer is streaming in the chat pane under the model's header.
    let s = t.screen();
    assert!(s.contains("specscope  RecGuide"), "{s}");

    t.keys(&["C-q"]);
    let s = t.wait_exit();
    assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
    assert!(!s.contains("┌ chat"), "the alternate screen is gone:\n{s}");
    t.literal("stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo");
    t.keys(&["Enter"]);
    t.wait_for("cooked mode restored", |s| s.contains("icanon echo"), true);
}

/// At 80×24 the welcome shows an example, a round its draft and verdict, and the
/// status line its markers.
#[test]
fn the_default_chat_fits_80x24() {
    let Some(t) = Tmux::sized(80, 24) else { return };
    let cfg = tempfile::tempdir().unwrap();
    t.launch(cfg.path(), "--max-new-tokens 60");
    // The bundled model's welcome keeps an example prompt and the keys in view.
    let s = t.wait("the welcome", |s| s.contains("Try one"));
    assert!(s.contains("│• ") && s.contains("help"), "{s}");
    t.literal("What is 12 plus 7?");
    t.keys(&["Enter"]);
    let s = t.wait("a verified round", |s| {
        s.contains("seed") && s.contains("accepted")
    });
    let status = s.lines().last().unwrap_or_default();
    assert!(status.contains("slow 1s") && status.contains("help"), "{s}");
    t.keys(&["C-q"]);
    let s = t.wait_exit();
    assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
}

/// `kill -INT` and `kill -QUIT` end the session like SIGTERM: terminal restored, exit
/// status 128 + the signal.
#[test]
fn signals_restore_the_terminal_and_set_the_exit_status() {
    for (sig, code) in [("INT", 130), ("QUIT", 131), ("TERM", 143), ("HUP", 129)] {
        let Some(t) = Tmux::sized(100, 30) else {
            return;
        };
        let cfg = tempfile::tempdir().unwrap();
        t.launch(cfg.path(), "");
        let pid = t.tmux(&["list-panes", "-t", &t.session, "-F", "#{pane_pid}"]);
        let shell = pid.trim().to_string();
        // specscope is the shell's child.
        let out = Command::new("pgrep").args(["-P", &shell]).output().unwrap();
        let child = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!child.is_empty(), "no specscope process under the shell");
        Command::new("kill")
            .args([&format!("-{sig}"), &child])
            .status()
            .unwrap();
        let s = t.wait_exit();
        assert!(
            s.lines().any(|l| l == format!("EXIT={code}")),
            "SIG{sig}: {s}"
        );
        assert!(
            !s.contains("┌ chat"),
            "SIG{sig}: the alternate screen is gone:\n{s}"
        );
        t.literal("stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo");
        t.keys(&["Enter"]);
        t.wait_for("cooked mode restored", |s| s.contains("icanon echo"), true);
    }
}

/// Requests recorded in a file and how many of them ended whole.
fn recorded(path: &std::path::Path) -> (usize, usize) {
    let t = specscope::trace::read_trace(path).expect("the recording reads");
    let s = t
        .recorded_summary()
        .expect("a finished recording has its summary");
    (s.requests, s.finished)
}

/// `--record FILE`, F9 to stop, F9 to start again, F9 mid-answer: the first recording
/// is still there, the second went to a new name (the status line said so), and the
/// answer in flight when F9 stopped it is in it whole.
#[test]
fn f9_never_overwrites_or_cuts_a_recording() {
    let Some(t) = Tmux::start() else { return };
    let cfg = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rec.jsonl");
    t.launch(
        cfg.path(),
        &format!("--record {} --max-new-tokens 40", file.display()),
    );
    let idle = || t.wait("the answer to end", |s| s.contains("idle"));
    t.ask("What is 12 plus 7?");
    idle();
    t.keys(&["F9"]);
    t.wait("the first recording saved", |s| {
        s.contains("recording saved")
    });
    t.ask("What is 3 plus 4?");
    idle();
    t.keys(&["F9"]);
    let s = t.wait("a second recording", |s| s.contains("rec-2.jsonl"));
    assert!(
        s.contains("exists"),
        "the notice says why the name changed:\n{s}"
    );
    t.ask("List three colours.");
    t.keys(&["F9"]);
    t.wait("the stop to wait for the answer", |s| {
        s.contains("recording stops when")
    });
    t.wait("the recording to stop after the answer", |s| {
        s.contains("idle") && !s.contains("● REC")
    });
    t.keys(&["C-q"]);
    let s = t.wait_exit();
    assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
    assert_eq!(recorded(&file), (1, 1), "the first recording is intact");
    assert_eq!(
        recorded(&dir.path().join("rec-2.jsonl")),
        (1, 1),
        "the second holds the answer in flight at the stop, whole"
    );
}

/// `--mode diffusion` as a user starts it: the canvas fills with masks and steps, then
/// says where AR agrees; at 80×24 and at a large size.
#[test]
fn a_diffusion_block_fills_on_screen() {
    for (w, h) in [(80, 24), (160, 45)] {
        let Some(t) = Tmux::sized(w, h) else { return };
        let cfg = tempfile::tempdir().unwrap();
        t.launch(cfg.path(), "--mode diffusion --max-new-tokens 40");
        t.literal("What is 12 plus 7?");
        t.keys(&["Enter"]);
        // At the default pace each step shows: a canvas with masks left.
        let s = t.wait("a canvas filling", |s| {
            s.contains("masked of") && s.contains('░')
        });
        assert!(s.contains("Diffusion L=32"), "{s}");
        let s = t.wait("a written block", |s| s.contains("AR agrees at"));
        assert!(s.contains("not lossless") && s.contains("cache"), "{s}");
        t.keys(&["C-q"]);
        let s = t.wait_exit();
        assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
    }
}

/// The request and round in the round pane's title (`round N · request R`).
fn round_and_request(screen: &str) -> Option<(usize, usize)> {
    let n = round_no(screen)?;
    let i = screen.find("┌ round ")?;
    let title = screen[i..].lines().next()?;
    let r = title
        .split("· request ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    Some((r.parse().ok()?, n))
}

/// The rounds of a recording that built branch rows, by (request, round).
fn rounds_with_branches(path: &std::path::Path) -> std::collections::BTreeSet<(usize, usize)> {
    use specscope::tui::app::Player;
    use specscope::tui::state::State;
    let trace = specscope::trace::read_trace(path).expect("the recording reads");
    let mut s = State::new("rec", "cpu", trace.header.options.decode.clone());
    let mut player = Player::new(trace.clone(), "rec".into());
    while player.pos < trace.events.len() {
        player.step(&mut s);
    }
    s.rounds
        .list
        .iter()
        .filter(|e| !e.view(&s.stats.summary).branches.is_empty())
        .map(|r| (r.req.to_string().parse().unwrap(), r.round))
        .collect()
}

/// As a newcomer meets it (default options, the first prompts people type, the round
/// pane followed live at the 300 ms pace): among the sampled frames whose round built
/// branch rows (by the session's recording) and shows its verdict (the rows are built
/// in the verify forward), the share that shows one, at 80×24 (at least 80%) and
/// 120×40 (at least 95%).
#[test]
fn branch_rows_show_in_live_frames_at_80x24_and_120x40() {
    for ((w, h), target) in [((80, 24), 0.80), ((120, 40), 0.95)] {
        let Some(t) = Tmux::sized(w, h) else { return };
        let cfg = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rec.jsonl");
        t.launch(
            cfg.path(),
            &format!("--record {} --max-new-tokens 80", file.display()),
        );
        t.keys(&["M-="]);
        t.wait("a faster pace", |s| s.contains("slow 300ms"));
        let mut frames: Vec<((usize, usize), bool)> = Vec::new();
        let mut missing: Vec<((usize, usize), String)> = Vec::new();
        for prompt in NEWCOMER_PROMPTS {
            t.ask(prompt);
            let start = Instant::now();
            loop {
                let s = t.screen();
                if !s.contains("answering") {
                    break;
                }
                // A round's rows are built in its verify forward: a frame before
                // its verdict has none to show yet.
                let verified = s.contains("✓ accepted ");
                if let Some(at) = round_and_request(&s).filter(|_| verified) {
                    frames.push((at, has_branch_row(&s)));
                    if !has_branch_row(&s) {
                        missing.push((at, s.clone()));
                    }
                }
                assert!(
                    start.elapsed() < Duration::from_secs(120),
                    "answer never ended:\n{s}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        t.keys(&["C-q"]);
        let s = t.wait_exit();
        assert!(s.lines().any(|l| l == "EXIT=0"), "{s}");
        let built = rounds_with_branches(&file);
        let sampled: Vec<bool> = frames
            .iter()
            .filter(|(at, _)| built.contains(at))
            .map(|(_, shown)| *shown)
            .collect();
        let shown = sampled.iter().filter(|s| **s).count();
        let share = shown as f64 / sampled.len().max(1) as f64;
        eprintln!(
            "{w}x{h}: a branch row in {shown} of {} sampled frames whose round built one ({} frames in all)",
            sampled.len(),
            frames.len()
        );
        assert!(
            sampled.len() >= 10,
            "too few frames sampled: {}",
            sampled.len()
        );
        let first_missing = missing
            .iter()
            .find(|(at, _)| built.contains(at))
            .map_or("", |(_, s)| s.as_str());
        assert!(
            share >= target,
            "{w}x{h}: a branch row in {shown} of {} frames whose round built one; one without:\n{first_missing}",
            sampled.len()
        );
    }
}
