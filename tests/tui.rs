//! The screen without a terminal: the reducer for every event kind (and the shipped demo
//! recording), panes rendered into a `TestBackend` with their styles checked in the dark
//! and the 16-colour theme, keys, and the too-small message.

use std::collections::BTreeMap;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;

use specscope::engine::events::{
    BlockCandidate, BlockReason, BranchView, DecodeEvent, Mode, Origin, PosView, RegimeRates,
    RequestStats,
};
use specscope::engine::overlap::{BranchKind, BranchOutcome};
use specscope::engine::StopReason;
use specscope::trace::{read_trace, SessionEvent, TraceEvent};
use specscope::tui::action::Action;
use specscope::tui::app::{key_msg, Player};
use specscope::tui::input::InputEdit;
use specscope::tui::keymap::Keymap;
use specscope::tui::panes::round::{REJECT_GLYPH, RISKY_GLYPH};
use specscope::tui::render;
use specscope::tui::state::{update, Effect, Level, Msg, Role, State, TurnStatus, UiOptions};
use specscope::tui::theme::Theme;

fn opts() -> UiOptions {
    UiOptions {
        mode: Mode::Recguide,
        block: 16,
        overlap: true,
        adaptive: true,
    }
}

fn view(m: f32, top: &[(u32, f32)]) -> PosView {
    PosView {
        margin: m,
        confidence: top[0].1,
        entropy: 1.0 - m,
        top: top.to_vec(),
    }
}

fn feed(s: &mut State, t: f64, e: impl Into<TraceEvent>) {
    update(s, Msg::Event { t, event: e.into() });
}

/// One RecGuide round with two risky positions, a reject at position 3, a correction
/// branch that hits and a continuation that does not.
/// The adaptive choice of the scripted round: per request, by the ratio rule.
fn ratio_reason() -> BlockReason {
    BlockReason {
        rule: "ratio".into(),
        signal: Some(0.42),
        candidates: vec![
            BlockCandidate {
                block: 8,
                value: 5.0,
                cost_ms: 2.0,
            },
            BlockCandidate {
                block: 16,
                value: 6.0,
                cost_ms: 4.0,
            },
            BlockCandidate {
                block: 32,
                value: 6.5,
                cost_ms: 8.0,
            },
        ],
        rate: None,
        measured: None,
    }
}

fn scripted() -> State {
    scripted_with(ratio_reason())
}

fn scripted_with(reason: BlockReason) -> State {
    let mut s = State::new("tiny", "cpu", opts());
    let words = [
        (10, "The"),
        (11, " sum"),
        (12, " is"),
        (13, " 19"),
        (14, "."),
        (15, " Done"),
        (16, "!"),
        (17, "\n"),
        (18, " 91"),
        (19, " yes"),
    ];
    feed(
        &mut s,
        0.0,
        SessionEvent::TokenText {
            tokens: words.iter().map(|(i, w)| (*i, w.to_string())).collect(),
        },
    );
    feed(
        &mut s,
        0.0,
        SessionEvent::UserMessage {
            req: 1,
            text: "What is 12 plus 7?".into(),
            regenerate: false,
        },
    );
    feed(
        &mut s,
        0.01,
        DecodeEvent::RequestStarted {
            req: 1,
            mode: Mode::Recguide,
            block_policy: "adaptive".into(),
            overlap: true,
            prompt_tokens: 12,
            max_new_tokens: 64,
            family: Some("math".into()),
        },
    );
    feed(
        &mut s,
        0.02,
        DecodeEvent::Forward {
            phase: "prefill".into(),
            rows: 1,
            query_tokens: 12,
            requests: 1,
            ms: 4.0,
        },
    );
    feed(
        &mut s,
        0.02,
        DecodeEvent::Prefilled {
            req: 1,
            prompt_tokens: 12,
            seed: 10,
            ms: 4.0,
        },
    );
    feed(
        &mut s,
        0.02,
        DecodeEvent::Committed {
            req: 1,
            round: 0,
            tokens: vec![10],
            origins: vec![Origin::Prefill],
            text: "The".into(),
        },
    );
    feed(
        &mut s,
        0.03,
        DecodeEvent::BlockChosen {
            req: 1,
            round: 1,
            block: 8,
            reason,
        },
    );
    feed(
        &mut s,
        0.04,
        DecodeEvent::Forward {
            phase: "draft".into(),
            rows: 1,
            query_tokens: 8,
            requests: 1,
            ms: 3.0,
        },
    );
    feed(
        &mut s,
        0.04,
        DecodeEvent::Drafted {
            req: 1,
            round: 1,
            block: vec![10, 11, 12, 13, 14, 15, 16, 17],
            margins: vec![0.9, 0.8, 0.1, 0.7, 0.05, 0.9, 0.95],
            risky: vec![3, 5],
            reused: None,
            detail: vec![
                view(0.9, &[(11, 0.95), (12, 0.05)]),
                view(0.8, &[(12, 0.9), (11, 0.1)]),
                view(0.1, &[(13, 0.5), (18, 0.4)]),
                view(0.7, &[(14, 0.8), (16, 0.1)]),
                view(0.05, &[(15, 0.4), (19, 0.35)]),
                view(0.9, &[(16, 0.92), (14, 0.02)]),
                view(0.95, &[(17, 0.96), (14, 0.01)]),
            ],
        },
    );
    feed(
        &mut s,
        0.05,
        DecodeEvent::BranchesBuilt {
            req: 1,
            round: 1,
            branches: vec![
                BranchView {
                    kind: BranchKind::Correction { rank: 1 },
                    at: 3,
                    alt: Some(18),
                    tokens: 11,
                    block: vec![18, 14, 15, 16],
                },
                BranchView {
                    kind: BranchKind::Continuation,
                    at: 8,
                    alt: None,
                    tokens: 16,
                    block: vec![19, 14],
                },
            ],
        },
    );
    feed(
        &mut s,
        0.06,
        DecodeEvent::Forward {
            phase: "fused".into(),
            rows: 3,
            query_tokens: 35,
            requests: 1,
            ms: 6.0,
        },
    );
    feed(
        &mut s,
        0.06,
        DecodeEvent::Verified {
            req: 1,
            round: 1,
            accepted: 2,
            first_reject: Some(3),
            verifier_tokens: vec![11, 12, 18, 14, 15, 16, 17, 19],
            bonus: 18,
            detail: vec![
                view(0.9, &[(11, 0.95)]),
                view(0.9, &[(12, 0.95)]),
                view(0.6, &[(18, 0.7), (13, 0.1)]),
            ],
        },
    );
    feed(
        &mut s,
        0.06,
        DecodeEvent::BranchResolved {
            req: 1,
            round: 1,
            outcome: BranchOutcome::Hit {
                index: 0,
                kind: BranchKind::Correction { rank: 1 },
            },
        },
    );
    feed(
        &mut s,
        0.06,
        DecodeEvent::Committed {
            req: 1,
            round: 1,
            tokens: vec![11, 12, 18],
            origins: vec![Origin::Draft, Origin::Draft, Origin::Bonus],
            text: " sum is 91".into(),
        },
    );
    s
}

fn finish(s: &mut State) {
    feed(s, 0.07, DecodeEvent::EngineState { paused: true });
    let stats = RequestStats {
        rounds: 1,
        new_tokens: 4,
        ..RequestStats::default()
    };
    feed(
        s,
        0.08,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Eos,
            text: "The sum is 91".into(),
            stats,
        },
    );
    feed(
        s,
        0.09,
        DecodeEvent::Error {
            req: None,
            message: "engine hiccup".into(),
        },
    );
}

#[test]
fn reducer_handles_every_event_kind() {
    let mut s = scripted();
    // While streaming.
    assert_eq!(s.live, vec![1]);
    assert_eq!(s.transcript.len(), 2);
    assert_eq!(s.transcript[1].text, "The sum is 91");
    assert_eq!(s.transcript[1].status, TurnStatus::Streaming);
    assert_eq!(
        s.transcript[1].pieces,
        vec![
            ("The".into(), Origin::Prefill),
            (" sum is".into(), Origin::Draft),
            (" 91".into(), Origin::Bonus)
        ]
    );
    assert_eq!(s.rounds.len(), 1);
    let r = &s.rounds[0];
    assert_eq!(
        (r.block_size, r.block.len(), r.risky.clone()),
        (Some(8), 8, vec![3, 5])
    );
    assert_eq!(r.branches.len(), 2);
    assert_eq!(r.verdict.as_ref().unwrap().first_reject, Some(3));
    assert!(matches!(
        r.outcome,
        Some(BranchOutcome::Hit { index: 0, .. })
    ));
    assert_eq!(r.committed, vec![11, 12, 18]);
    assert_eq!(r.advance(), Some(3));
    let sm = &s.summary.summary;
    assert_eq!(
        (sm.rounds, sm.decode_forwards, sm.prefill_forwards),
        (1, 2, 1)
    );
    assert_eq!((sm.new_tokens, sm.decode_tokens), (4, 3));
    assert_eq!(sm.families["math"].hist, vec![0, 0, 0, 1]);
    assert_eq!((sm.branches["P1"].built, sm.branches["P1"].hits), (1, 1));
    assert_eq!((sm.branches["new"].built, sm.branches["new"].hits), (1, 0));
    assert_eq!(sm.blocks, BTreeMap::from([(8, 1)]));
    assert_eq!(s.samples.len(), 1);

    finish(&mut s);
    assert!(s.paused);
    assert!(s.live.is_empty());
    assert_eq!(s.transcript[1].status, TurnStatus::Done(StopReason::Eos));
    let n = s.notice.as_ref().unwrap();
    assert_eq!((n.text.as_str(), n.level), ("engine hiccup", Level::Error));
    assert_eq!(s.summary.summary.finished, 1);
    assert_eq!(s.summary.summary.errors, 1);

    // A request error marks its answer; clearing empties the chat.
    feed(
        &mut s,
        0.1,
        SessionEvent::UserMessage {
            req: 2,
            text: "again".into(),
            regenerate: false,
        },
    );
    feed(
        &mut s,
        0.1,
        DecodeEvent::Error {
            req: Some(2),
            message: "too long".into(),
        },
    );
    assert_eq!(
        s.transcript[3].status,
        TurnStatus::Failed("too long".into())
    );
    feed(&mut s, 0.2, SessionEvent::ChatCleared);
    assert!(s.transcript.is_empty());
    // The history stays.
    assert_eq!(s.rounds.len(), 1);
}

#[test]
fn actions_produce_effects_and_walk_rounds() {
    let mut s = scripted();
    // Busy: a second submit is refused with a notice.
    update(&mut s, Msg::Input(InputEdit::Insert('x')));
    assert!(update(&mut s, Msg::Action(Action::Submit)).is_empty());
    assert_eq!(s.notice.as_ref().unwrap().level, Level::Warning);
    assert_eq!(
        update(&mut s, Msg::Action(Action::Stop)),
        vec![Effect::Cancel(1)]
    );
    // Ctrl+C while answering stops; a second one right after quits.
    let mut busy = s.clone();
    let first = update(&mut busy, Msg::Action(Action::Interrupt));
    assert_eq!(first, vec![Effect::Cancel(1)]);
    let second = update(&mut busy, Msg::Action(Action::Interrupt));
    assert_eq!(second, vec![Effect::Quit]);
    finish(&mut s);
    let fx = update(&mut s, Msg::Action(Action::Submit));
    match &fx[..] {
        [Effect::Submit {
            messages,
            text,
            regenerate: false,
            ..
        }] => {
            assert_eq!(text, "x");
            let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
            assert_eq!(roles, ["user", "assistant", "user"]);
        }
        other => panic!("{other:?}"),
    }
    // Regenerate resends the last question without the old answer.
    match &update(&mut s, Msg::Action(Action::Regenerate))[..] {
        [Effect::Submit {
            messages,
            regenerate: true,
            ..
        }] => assert_eq!(messages.len(), 1),
        other => panic!("{other:?}"),
    }
    // Ctrl+C: idle with empty input arms, then quits.
    assert!(update(&mut s, Msg::Action(Action::Interrupt)).is_empty());
    assert_eq!(
        update(&mut s, Msg::Action(Action::Interrupt)),
        vec![Effect::Quit]
    );

    let mut s = scripted();
    update(&mut s, Msg::Action(Action::PosNext));
    assert_eq!(s.selected, Some(0));
    update(&mut s, Msg::Action(Action::PosPrev));
    assert_eq!(s.selected, Some(7));
    update(&mut s, Msg::Action(Action::RoundPrev));
    assert_eq!(s.view, Some(0));
    update(&mut s, Msg::Action(Action::RoundLive));
    assert_eq!(s.view, None);
    match &update(&mut s, Msg::Action(Action::CycleMode))[..] {
        [Effect::SetOptions(o)] => assert_eq!(o.mode, Mode::Ar),
        other => panic!("{other:?}"),
    }
    match &update(&mut s, Msg::Action(Action::BlockLarger))[..] {
        [Effect::SetOptions(o)] => {
            assert_eq!((o.mode, o.block, o.adaptive), (Mode::Linear, 32, false))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        update(&mut s, Msg::Action(Action::Slower)),
        vec![Effect::SetSpeed(1)]
    );
    assert_eq!(
        update(&mut s, Msg::Action(Action::TogglePause)),
        vec![Effect::Pause]
    );
    assert_eq!(
        update(&mut s, Msg::Action(Action::ToggleRecord)),
        vec![Effect::ToggleRecord]
    );
    assert!(
        matches!(&update(&mut s, Msg::Action(Action::CopyLast))[..], [Effect::Copy(t)] if t == "The sum is 91")
    );
}

#[test]
fn scrolling_stops_following_and_ctrl_g_resumes() {
    let mut s = scripted();
    for i in 0..40 {
        feed(
            &mut s,
            1.0,
            DecodeEvent::Committed {
                req: 1,
                round: 2 + i,
                tokens: vec![17],
                origins: vec![Origin::Draft],
                text: "\nline".into(),
            },
        );
    }
    update(
        &mut s,
        Msg::ChatArea {
            width: 60,
            height: 10,
        },
    );
    update(&mut s, Msg::Action(Action::PageUp));
    assert!(!s.follow);
    let top = s.scroll_top;
    // New text does not move the view while reading.
    feed(
        &mut s,
        1.1,
        DecodeEvent::Committed {
            req: 1,
            round: 50,
            tokens: vec![17],
            origins: vec![Origin::Draft],
            text: "\nmore".into(),
        },
    );
    assert_eq!(s.scroll_top, top);
    update(&mut s, Msg::Action(Action::FollowBottom));
    assert!(s.follow);
}

#[test]
fn keys_type_into_the_input_or_act() {
    let km = Keymap::builtin();
    let mut s = State::new("m", "cpu", opts());
    let k = |c, m| KeyEvent::new(c, m);
    // '?' with an empty input opens help; with text it types.
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Char('?'), KeyModifiers::SHIFT)),
        Some(Msg::Action(Action::Help))
    ));
    update(&mut s, Msg::Input(InputEdit::Insert('a')));
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Char('?'), KeyModifiers::SHIFT)),
        Some(Msg::Input(InputEdit::Insert('?')))
    ));
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Msg::Action(Action::Interrupt))
    ));
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Backspace, KeyModifiers::NONE)),
        Some(Msg::Input(InputEdit::Backspace))
    ));
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::F(6), KeyModifiers::NONE)),
        Some(Msg::Action(Action::Step))
    ));
}

fn draw(s: &State, theme: &Theme, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| render::draw(f, s, theme, &Keymap::builtin()))
        .unwrap();
    term.backend().buffer().clone()
}

/// Cells whose symbol is `sym`, with their positions.
fn find(buf: &Buffer, sym: &str) -> Vec<(u16, u16)> {
    let a = buf.area;
    let mut out = Vec::new();
    for y in a.top()..a.bottom() {
        for x in a.left()..a.right() {
            if buf[(x, y)].symbol() == sym {
                out.push((x, y));
            }
        }
    }
    out
}

fn text_at(buf: &Buffer, x: u16, y: u16, n: u16) -> String {
    (x..x + n)
        .map(|x| buf[(x, y)].symbol().to_string())
        .collect()
}

fn find_text(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let a = buf.area;
    for y in a.top()..a.bottom() {
        let line = text_at(buf, 0, y, a.width);
        if let Some(i) = line.find(needle) {
            return Some((line[..i].chars().count() as u16, y));
        }
    }
    None
}

fn check_styles(theme_name: &str) -> Buffer {
    let theme = Theme::builtin(theme_name).unwrap();
    let mut s = scripted();
    update(&mut s, Msg::Action(Action::ToggleOrigins));
    let buf = draw(&s, &theme, 160, 48);
    // Risky positions: the glyph, in the risky colour, right of the chat pane.
    // (The token "!" also appears; a margin follows the glyph: `!.10`.)
    let risky: Vec<_> = find(&buf, RISKY_GLYPH)
        .into_iter()
        .filter(|(x, y)| *x > 72 && buf[(*x + 1, *y)].symbol() == ".")
        .collect();
    assert_eq!(risky.len(), 2, "two risky margins marked");
    for (x, y) in &risky {
        let c = &buf[(*x, *y)];
        assert_eq!(c.fg, theme.risky.fg.unwrap(), "{theme_name}: risky colour");
        assert!(c.modifier.contains(Modifier::BOLD));
    }
    // The first reject: the glyph on the rejected style (background).
    let rej = find(&buf, REJECT_GLYPH);
    assert!(!rej.is_empty());
    let (x, y) = rej[0];
    assert_eq!(
        buf[(x, y)].bg,
        theme.rejected.bg.unwrap(),
        "{theme_name}: reject marker"
    );
    assert_eq!(text_at(&buf, x + 1, y, 3), "·19");
    // The correction branch that hit.
    let (hx, hy) = find_text(&buf, "HIT").expect("HIT badge");
    assert_eq!(buf[(hx, hy)].bg, theme.hit.bg.unwrap());
    let (mx, my) = find_text(&buf, "miss").expect("continuation miss");
    assert_eq!(buf[(mx, my)].fg, theme.miss.fg.unwrap());
    // Accepted drafts and the bonus in the chat, coloured by origin.
    let (ax, ay) = find_text(&buf, "sum").unwrap();
    assert_eq!(buf[(ax, ay)].fg, theme.accepted.fg.unwrap());
    let (bx, by) = find_text(&buf, "91").unwrap();
    assert_eq!(buf[(bx, by)].fg, theme.bonus.fg.unwrap());
    buf
}

#[test]
fn round_pane_styles_in_the_dark_theme() {
    let buf = check_styles("dark");
    assert!(matches!(Theme::dark().risky.fg, Some(Color::Rgb(..))));
    insta::assert_snapshot!("screen_dark", format!("{buf:?}"));
}

#[test]
fn round_pane_styles_in_the_16_colour_theme() {
    let buf = check_styles("basic16");
    insta::assert_snapshot!("screen_basic16", format!("{buf:?}"));
}

#[test]
fn round_choice_shows_its_rate_and_each_gain() {
    let reason = BlockReason {
        rule: "round".into(),
        rate: Some(1.25),
        candidates: vec![
            BlockCandidate {
                block: 1,
                value: 1.0,
                cost_ms: 0.5,
            },
            BlockCandidate {
                block: 8,
                value: 5.0,
                cost_ms: 2.0,
            },
        ],
        ..ratio_reason()
    };
    let buf = draw(&scripted_with(reason), &Theme::dark(), 160, 48);
    let (_, y) = find_text(&buf, "B=8 round").expect("the reason line");
    // The candidates wrap onto the next line rather than being cut at the border.
    let lines = text_at(&buf, 0, y, 160) + &text_at(&buf, 0, y + 1, 160);
    assert!(lines.contains("λ 1.25 tok/ms"), "{lines}");
    assert!(lines.contains("1: V 1.0 − λ·0.5ms = 0.38"), "{lines}");
    assert!(lines.contains("8: V 5.0 − λ·2.0ms = 2.50 ◀"), "{lines}");
    let (x, y) = find_text(&buf, "8: V 5.0").unwrap();
    assert_eq!(buf[(x, y)].fg, Theme::dark().title.fg.unwrap());
}

#[test]
fn an_ar_regime_step_shows_the_measured_rates() {
    let reason = BlockReason {
        rule: "ar_regime".into(),
        candidates: Vec::new(),
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: Some(0.93),
        }),
        ..ratio_reason()
    };
    // The scripted round drafted 8; an AR step's reason reads the same whatever B.
    let buf = draw(&scripted_with(reason.clone()), &Theme::dark(), 160, 48);
    let (x, y) = find_text(&buf, "ar_regime").expect("the reason line");
    let line = text_at(&buf, 0, y, 160);
    assert!(
        line.contains("measured tok/ms: AR steps 0.93 · drafting 0.78"),
        "{line}"
    );
    assert!(!line.contains('λ'), "{line}");
    assert_eq!(buf[(x, y)].fg, Theme::dark().text.fg.unwrap());
    // Not measured yet: a dash.
    let trial = BlockReason {
        rule: "ar_trial".into(),
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: None,
        }),
        ..reason
    };
    let buf = draw(&scripted_with(trial), &Theme::dark(), 160, 48);
    let (_, y) = find_text(&buf, "ar_trial").unwrap();
    assert!(text_at(&buf, 0, y, 160).contains("AR steps — · drafting 0.78"));
}

#[test]
fn inspector_shows_draft_and_verifier_top_k() {
    let mut s = scripted();
    for _ in 0..4 {
        update(&mut s, Msg::Action(Action::PosNext));
    }
    assert_eq!(s.selected, Some(3));
    let buf = draw(&s, &Theme::dark(), 160, 48);
    let (_, y) = find_text(&buf, "draft top-k").unwrap();
    let line = text_at(&buf, 0, y, 160);
    assert!(
        line.contains("·19 0.50") && line.contains("·91 0.40"),
        "{line}"
    );
    let (_, y) = find_text(&buf, "verifier top-k").unwrap();
    assert!(text_at(&buf, 0, y, 160).contains("·91 0.70"));
}

#[test]
fn a_small_terminal_gets_a_message_not_garbage() {
    let buf = draw(&scripted(), &Theme::dark(), 60, 15);
    let all: String = (0..15).map(|y| text_at(&buf, 0, y, 60)).collect();
    assert!(all.contains("too small") && all.contains("60x15"), "{all}");
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
        .transcript
        .iter()
        .filter(|t| t.role == Role::Assistant)
        .map(|t| t.text.clone())
        .collect();
    assert_eq!(answers, finished);
    assert_eq!(&s.summary.summary, trace.recorded_summary().unwrap());
    let sm = &s.summary.summary;
    assert_eq!(sm.families.len(), 3, "math, code and qa");
    assert!(
        sm.branches.values().any(|c| c.hits > 0),
        "the demo shows branch hits"
    );
    assert!(
        s.rounds.iter().any(|r| r.reused.is_some()),
        "and reused blocks"
    );
}
