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
    BlockCandidate, BlockDecision, BranchView, DecodeEvent, Mode, Origin, Phase, PosView,
    RegimeRates, RequestStats, Rule, Tally,
};
use specscope::engine::options::{Blocks, DecodeOptions};
use specscope::engine::overlap::{BranchKind, BranchOutcome};
use specscope::engine::StopReason;
use specscope::trace::{read_trace, SessionEvent, TraceEvent};
use specscope::tui::action::Action;
use specscope::tui::app::{key_msg, Player};
use specscope::tui::input::InputEdit;
use specscope::tui::keymap::Keymap;
use specscope::tui::panes::round::{REJECT_GLYPH, RISKY_GLYPH};
use specscope::tui::render;
use specscope::tui::state::{
    update, Effect, Level, Msg, ReplayPace, ReplayStatus, Role, State, Topic, Turn, TurnStatus,
};
use specscope::tui::theme::Theme;

mod keys_themes;
mod reducer;
mod replay;
mod round;
mod screen;

/// The default options (the paper preset).
fn opts() -> DecodeOptions {
    DecodeOptions::default()
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
fn ratio_reason() -> BlockDecision {
    BlockDecision {
        rule: Rule::Ratio,
        signal: Some(0.42),
        candidates: vec![
            BlockCandidate {
                block: 8,
                value: 5.0,
                cost_ms: 2.0,
                rows_ms: 0.0,
            },
            BlockCandidate {
                block: 16,
                value: 6.0,
                cost_ms: 4.0,
                rows_ms: 0.0,
            },
            BlockCandidate {
                block: 32,
                value: 6.5,
                cost_ms: 8.0,
                rows_ms: 0.0,
            },
        ],
        rate: None,
        measured: None,
        ar_rate: Some(0.5),
    }
}

fn scripted() -> State {
    scripted_with(ratio_reason())
}

fn scripted_with(reason: BlockDecision) -> State {
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
            blocks: Blocks::Adaptive(vec![8, 16, 32]),
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
            phase: Phase::Prefill,
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
            phase: Phase::Draft,
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
            rows: None,
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
            phase: Phase::Fused,
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

/// The user stops request 1 (Esc) at `t`.
fn cancel(s: &mut State, t: f64) {
    feed(
        s,
        t,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Cancelled,
            text: String::new(),
            stats: Box::default(),
        },
    );
}

fn finish(s: &mut State) {
    feed(s, 0.07, DecodeEvent::EngineState { paused: true });
    // The engine's own count of the request (the summary takes it at the finish).
    let mut tally = Tally::default();
    tally.record_commit(1, true);
    tally.record_round(&specscope::engine::events::RoundTally {
        block: 8,
        advance: 3,
        ended: false,
        drafted: true,
        reused: false,
        branches: vec![BranchKind::Correction { rank: 1 }, BranchKind::Continuation],
        branch_tokens: 27,
        hit: Some(BranchKind::Correction { rank: 1 }),
    });
    tally.record_commit(3, false);
    let stats = RequestStats {
        tally,
        ..RequestStats::default()
    };
    feed(
        s,
        0.08,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Eos,
            text: "The sum is 91".into(),
            stats: Box::new(stats),
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

fn notice(s: &State) -> String {
    s.status
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default()
}

fn screen_text(buf: &Buffer) -> String {
    let a = buf.area;
    (a.top()..a.bottom())
        .map(|y| text_at(buf, 0, y, a.width) + "\n")
        .collect()
}

fn draw(s: &State, theme: &Theme, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| render::draw(f, s, theme, &Keymap::builtin()))
        .unwrap();
    term.backend().buffer().clone()
}

/// The text rows inside the input box (its borders left out).
fn input_box_text(buf: &Buffer) -> Vec<String> {
    let left = buf.area.width * 45 / 100;
    let bottom = buf.area.height - 2; // the box's lower border, above the status line
    let mut rows = Vec::new();
    let mut y = bottom - 1;
    while buf[(0, y)].symbol() == "│" {
        rows.push(text_at(buf, 1, y, left - 2));
        y -= 1;
    }
    rows.reverse();
    rows
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

/// WCAG contrast ratio of two RGB colours (`None` for other colours).
fn contrast(a: Color, b: Color) -> Option<f64> {
    let lum = |c: Color| match c {
        Color::Rgb(r, g, b) => {
            let ch = |v: u8| {
                let v = f64::from(v) / 255.0;
                if v <= 0.03928 {
                    v / 12.92
                } else {
                    ((v + 0.055) / 1.055).powf(2.4)
                }
            };
            Some(0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b))
        }
        _ => None,
    };
    let (x, y) = (lum(a)?, lum(b)?);
    Some((x.max(y) + 0.05) / (x.min(y) + 0.05))
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
    // Selected for inspection, the rejected cell stays readable: text and
    // background differ.
    let mut sel = s.clone();
    for _ in 0..4 {
        update(&mut sel, Msg::Action(Action::PosNext));
    }
    let sbuf = draw(&sel, &theme, 160, 48);
    let (sx, sy) = find(&sbuf, REJECT_GLYPH)[0];
    let c = &sbuf[(sx, sy)];
    assert_eq!(sel.rounds.selected, Some(3), "{theme_name}");
    if let (Some(ratio), false) = (
        contrast(c.fg, c.bg),
        c.modifier.contains(Modifier::REVERSED),
    ) {
        assert!(
            ratio >= 3.0,
            "{theme_name}: selected reject {c:?}, contrast {ratio:.1}"
        );
    }
    // The correction branch that hit.
    let (hx, hy) = find_text(&buf, "HIT").expect("HIT badge");
    assert_eq!(buf[(hx, hy)].bg, theme.hit.bg.unwrap());
    let (mx, my) = find_text(&buf, "not needed").expect("the continuation, not needed");
    assert_eq!(buf[(mx, my)].fg, theme.miss.fg.unwrap());
    // Accepted drafts and the bonus in the chat, coloured by origin.
    let (ax, ay) = find_text(&buf, "sum").unwrap();
    assert_eq!(buf[(ax, ay)].fg, theme.accepted.fg.unwrap());
    let (bx, by) = find_text(&buf, "91").unwrap();
    assert_eq!(buf[(bx, by)].fg, theme.bonus.fg.unwrap());
    buf
}

/// Pane titles that run into their top-right corner mid-word, and the history's
/// branches summary cut at its border.
fn cut_at_border(buf: &Buffer) -> Vec<String> {
    let a = buf.area;
    let mut cut = Vec::new();
    for y in a.top()..a.bottom() {
        let row = text_at(buf, 0, y, a.width);
        for x in a.left() + 1..a.right() {
            if buf[(x, y)].symbol() == "┐" && !matches!(buf[(x - 1, y)].symbol(), "─" | " ") {
                cut.push(row.clone());
            }
        }
        if let Some(i) = row
            .find("│branches ")
            .or_else(|| row.find("│branch "))
            .or_else(|| row.find("│br "))
        {
            let inner = row[i..].trim_matches('│').trim_end();
            let inner = inner.split('│').next().unwrap_or_default().trim_end();
            if !(inner.ends_with('%') || inner.ends_with("saved") || inner.ends_with("yet")) {
                cut.push(row.clone());
            }
        }
    }
    cut
}

/// The shipped demo played to its end through the reducer.
fn demo_played() -> State {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    let mut s = State::new("demo", "cpu", opts());
    let mut player = Player::new(trace.clone(), "demo".into());
    while player.pos < trace.events.len() {
        player.step(&mut s);
    }
    s
}

/// The state as a replay of a 10-event file, paused, has it.
fn start_replay(s: &mut State) {
    update(
        s,
        Msg::Replay(ReplayStatus {
            file: "x.jsonl".into(),
            pos: 0,
            len: 10,
            playing: false,
            pace: ReplayPace::RoundsPerSec(3.0),
        }),
    );
}
