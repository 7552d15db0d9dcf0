//! Replays through the reducer: the shipped demo recording, a replay's read-only
//! screen and the keys its help lists.

use super::*;

#[test]
fn a_replay_is_read_only_and_says_how_to_start() {
    let mut s = State::new("demo (replay)", "cpu", opts());
    start_replay(&mut s);
    update(&mut s, Msg::Input(InputEdit::Insert('a')));
    assert!(s.chat.input.is_empty(), "typing does nothing in a replay");
    s.status.notice = None;
    update(&mut s, Msg::Action(Action::HistoryPrev));
    let said = s.status.notice.as_ref().map(|n| n.text.clone());
    assert_eq!(
        said.as_deref(),
        Some("a replay is read-only"),
        "the input history is a write too"
    );
    let buf = draw(&s, &Theme::dark(), 120, 30);
    let all = screen_text(&buf);
    assert!(all.contains("Nothing played yet"), "{all}");
    assert!(!all.contains("Type a message"), "{all}");
    // At 80 columns the replay's marker keeps its pace (a speed change shows) and the
    // notice is read whole on the row above.
    update(
        &mut s,
        Msg::Replay(ReplayStatus {
            file: "x.jsonl".into(),
            pos: 1234,
            len: 5678,
            playing: true,
            pace: ReplayPace::RoundsPerSec(3.0),
        }),
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let (status, above) = (text_at(&buf, 0, 23, 80), text_at(&buf, 0, 22, 80));
    assert!(
        status.contains("▶ replay event 1234/5678 · 3 rounds/s")
            && above.contains("a replay is read-only"),
        "{above}\n{status}"
    );
    s.status.notice = None;
    let status = text_at(&draw(&s, &Theme::dark(), 80, 24), 0, 23, 80);
    assert!(
        status.contains("replay event 1234/5678 · 3 rounds/s"),
        "{status}"
    );
}

/// The shipped demo replays through the reducer: every answer ends as recorded, the
/// statistics match its summary line, and every frame of it draws.
#[test]
fn demo_recording_replays_through_the_reducer() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    assert!(trace.warnings.is_empty());
    let finished: Vec<String> = trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TraceEvent::Decode(DecodeEvent::RequestFinished { text, .. }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(finished.len() >= 6);
    let mut s = State::new("demo", "cpu", opts());
    let mut player = Player::new(trace.clone(), "demo".into());
    let mut frames = 0;
    while player.pos < trace.events.len() {
        player.step(&mut s);
        draw(&s, &Theme::dark(), 120, 40);
        frames += 1;
    }
    assert!(frames > 50);
    let answers: Vec<String> = s
        .chat
        .transcript
        .iter()
        .filter(|t| t.role == Role::Assistant)
        .map(|t| t.text.clone())
        .collect();
    assert_eq!(answers, finished);
    assert_eq!(&s.stats.current, trace.recorded_summary().unwrap());
    let sm = &s.stats.current;
    assert_eq!(sm.families.len(), 3, "math, code and qa");
    assert!(
        sm.tally.branches.values().any(|c| c.hits > 0),
        "the demo shows branch hits"
    );
    assert!(
        s.rounds
            .list
            .iter()
            .any(|e| e.view(&s.stats.summary).reused.is_some()),
        "and reused blocks"
    );
}

/// Every key the help lists for a replay does something there (an effect, a change
/// on screen or a state change other than "a replay is read-only"), in a replay
/// stopped part-way with a round on screen.
#[test]
fn replay_help_lists_only_keys_that_act_in_a_replay() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    let mut base = State::new("demo", "cpu", opts());
    let mut player = Player::new(trace.clone(), "demo".into());
    for _ in 0..trace.events.len() / 2 {
        player.step(&mut base);
    }
    start_replay(&mut base);
    base.status.notice = None;
    // A key may act only after another (Esc closes the inspector Shift+→ opened,
    // PgDn scrolls back what PgUp scrolled): the states after each listed key too.
    let listed: Vec<Action> = Action::all()
        .iter()
        .copied()
        .filter(|a| a.acts_in(true))
        .collect();
    let mut states = vec![base.clone()];
    for &p in &listed {
        let mut s = base.clone();
        update(&mut s, Msg::Action(p));
        states.push(s);
    }
    for &a in &listed {
        let acts = |from: &State| {
            let mut s = from.clone();
            let before = format!("{s:?}");
            let screen = screen_text(&draw(&s, &Theme::dark(), 120, 40));
            let fx = update(&mut s, Msg::Action(a));
            let read_only = notice(&s).contains("read-only");
            let changed = format!("{s:?}") != before
                || screen_text(&draw(&s, &Theme::dark(), 120, 40)) != screen;
            !read_only && (!fx.is_empty() || changed)
        };
        assert!(
            states.iter().any(acts),
            "{a:?} is listed for replays but does nothing there"
        );
    }
    // And the lines say what the keys do there: nothing about answers or the input.
    let mut s = base.clone();
    update(&mut s, Msg::Action(Action::Help));
    for (w, h) in [(80, 24), (120, 60), (200, 60)] {
        let page = screen_text(&draw(&s, &Theme::dark(), w, h));
        assert!(page.contains("read-only"), "{page}");
        for dead in [
            "stop generating",
            "clear input",
            "send the message",
            "Printable keys",
        ] {
            assert!(!page.contains(dead), "{dead:?} in a replay's help:\n{page}");
        }
    }
}

/// A recording cut off mid-answer (a killed session) says so when it has played to
/// its end: a warning naming the request with no end, `cut off` on the status line
/// instead of `answering`; while it plays, the round pane says it is playing.
#[test]
fn a_cut_off_recording_says_so_at_its_end() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let mut trace = read_trace(&path).unwrap();
    // Up to the middle of the second request's answer.
    let asked: Vec<usize> = (0..trace.events.len())
        .filter(|&i| {
            matches!(
                trace.events[i].event,
                TraceEvent::Session(SessionEvent::UserMessage { .. })
            )
        })
        .collect();
    let second = asked[1];
    trace.events.truncate(second + 40);
    let mut s = State::new("demo (replay)", "cpu", opts());
    let mut player = Player::new(trace, "cut.jsonl".into());
    update(&mut s, Msg::Replay(player.status()));
    let all = screen_text(&draw(&s, &Theme::dark(), 100, 30));
    assert!(all.contains("Playing: the first round shows"), "{all}");
    player.advance(&mut s, f64::INFINITY);
    update(&mut s, Msg::Replay(player.status()));
    let said = notice(&s);
    assert!(
        said.contains("the recording stops mid-answer: request") && said.contains("has no end"),
        "{said}"
    );
    let all = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    let status = all.lines().last().unwrap_or_default();
    assert!(
        status.contains("cut off") && !status.contains("answering"),
        "{status}"
    );
    // A whole recording ends as before.
    let mut s = demo_played();
    let mut player = Player::new(read_trace(&path).unwrap(), "demo".into());
    player.advance(&mut s, f64::INFINITY);
    assert!(
        notice(&s).starts_with("end of the recording"),
        "{}",
        notice(&s)
    );
}

/// F1 opens the help on its first page whatever page it was closed on: the
/// screen's "F1 →" and "F1 ←" count from there.
#[test]
fn help_opens_on_its_first_page() {
    let mut s = demo_played();
    update(&mut s, Msg::Action(Action::Help));
    update(&mut s, Msg::HelpPage(1));
    assert_eq!(s.help_page, specscope::tui::state::HelpPage::Legend);
    update(&mut s, Msg::Action(Action::Help));
    update(&mut s, Msg::Action(Action::Help));
    assert_eq!(s.help_page, specscope::tui::state::HelpPage::Keys);
}
