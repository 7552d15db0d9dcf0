//! End to end: the real binary in tmux (160×48), typed at like a user: the answer
//! streams, the round pane fills, pause and step work, quitting leaves the shell intact.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn start() -> Self {
        let ok = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "tmux is needed for this test (apt-get install tmux; .ci/run installs it)"
        );
        let t = Tmux {
            socket: format!("specscope-e2e-{}", std::process::id()),
            session: "e2e".into(),
        };
        t.tmux(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "48",
            "-s",
            &t.session,
            "bash --norc --noprofile",
        ]);
        t
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
    screen.lines().any(|l| l.starts_with("EXIT="))
}

/// The round number in the round pane's title (`round N · request R`).
fn round_no(screen: &str) -> Option<usize> {
    let i = screen.find("┌ round ")?;
    screen[i + "┌ round ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn chat_streams_pauses_steps_and_quits_cleanly_in_tmux() {
    let t = Tmux::start();
    let cfg = tempfile::tempdir().unwrap();
    t.literal("PS1='E2E$ '; clear");
    t.keys(&["Enter"]);
    t.wait("the shell", |s| s.contains("E2E$"));
    let cmd = format!(
        "SPECSCOPE_CONFIG_DIR={} {} --max-new-tokens 400; echo EXIT=$?",
        cfg.path().display(),
        env!("CARGO_BIN_EXE_specscope")
    );
    t.literal(&cmd);
    t.keys(&["Enter"]);
    t.wait("the chat screen", |s| {
        s.contains("No rounds yet") && s.contains("specscope │")
    });

    // Slow motion (two steps slower: 500 ms a round) so a person — and this test — can
    // follow the rounds.
    t.keys(&["M--"]);
    t.keys(&["M--"]);
    t.wait("slow motion", |s| s.contains("slow 500ms/round"));
    t.literal("Write a function that adds two numbers.");
    t.keys(&["Enter"]);
    // A round's title shows as soon as its block size is chosen; its draft follows one
    // forward later, so wait for both.
    let s = t.wait("the round pane to fill", |s| {
        round_no(s).is_some_and(|n| n >= 2) && s.contains("seed")
    });
    assert!(s.contains("Write a function that adds two numbers."));
    assert!(
        s.contains("B=") && s.contains("seed"),
        "a drafted block with margins:\n{s}"
    );

    t.keys(&["F5"]);
    let s = t.wait("pause", |s| s.contains("⏸ paused"));
    // Let a round that was already running finish, then step exactly one.
    std::thread::sleep(Duration::from_millis(800));
    let before = round_no(&t.screen()).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        round_no(&t.screen()),
        Some(before),
        "paused: no new rounds\n{s}"
    );
    t.keys(&["F6"]);
    t.wait("one step", |s| round_no(s) == Some(before + 1));
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        round_no(&t.screen()),
        Some(before + 1),
        "a step runs one round only"
    );

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
