//! The screen without a terminal: the reducer for every event kind (and the shipped demo
//! recording), panes rendered into a `TestBackend` with their styles checked in the dark
//! and the 16-colour theme, keys, and the too-small message.
#![allow(clippy::unwrap_used, clippy::too_many_lines)] // test code: a panic is the failure, a scenario reads top to bottom

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

#[test]
fn reducer_handles_every_event_kind() {
    let mut s = scripted();
    // While streaming.
    assert_eq!(s.session.live, vec![1]);
    let tr = &s.chat.transcript;
    assert_eq!(tr.len(), 2);
    assert_eq!(tr[1].text, "The sum is 91");
    assert_eq!(tr[1].status, TurnStatus::Streaming);
    assert_eq!(
        tr[1].pieces,
        vec![
            ("The".into(), Origin::Prefill),
            (" sum is".into(), Origin::Draft),
            (" 91".into(), Origin::Bonus)
        ]
    );
    assert_eq!(s.rounds.list.len(), 1);
    let r = &s.rounds.list[0];
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
    let sm = &s.stats.current;
    assert_eq!(
        (sm.tally.rounds, sm.forwards.decode, sm.forwards.prefill),
        (1, 2, 1)
    );
    assert_eq!((sm.tally.new_tokens, sm.tally.decode_tokens), (4, 3));
    assert_eq!(sm.families["math"].hist, vec![0, 0, 0, 1]);
    let p1 = &sm.tally.branches[&BranchKind::Correction { rank: 1 }];
    let new = &sm.tally.branches[&BranchKind::Continuation];
    assert_eq!((p1.built, p1.hits, new.built, new.hits), (1, 1, 1, 0));
    assert_eq!(sm.tally.blocks, BTreeMap::from([(8, 1)]));
    assert_eq!(s.stats.samples.len(), 1);
    let before = s.stats.current.tally.clone();

    finish(&mut s);
    assert!(s.status.paused);
    assert!(s.session.live.is_empty());
    assert_eq!(
        s.chat.transcript[1].status,
        TurnStatus::Done(StopReason::Eos)
    );
    let n = s.status.notice.as_ref().unwrap();
    assert_eq!((n.text.as_str(), n.level), ("engine hiccup", Level::Error));
    assert_eq!(s.status.messages.len(), 1, "errors are kept in full");
    assert_eq!(s.stats.current.finished, 1);
    assert_eq!(s.stats.current.errors, 1);
    // The engine's count at the finish is the same as the one rebuilt from events.
    assert_eq!(s.stats.current.tally, before);

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
        s.chat.transcript[3].status,
        TurnStatus::Failed("too long".into())
    );
    feed(&mut s, 0.2, SessionEvent::ChatCleared);
    assert!(s.chat.transcript.is_empty());
    // The history stays.
    assert_eq!(s.rounds.list.len(), 1);
}

#[test]
fn actions_produce_effects_and_walk_rounds() {
    let mut s = scripted();
    // Busy: a second submit is refused with a notice.
    update(&mut s, Msg::Input(InputEdit::Insert('x')));
    assert!(update(&mut s, Msg::Action(Action::Submit)).is_empty());
    // Feedback on a key (not a warning the exit repeats), naming the key that stops.
    let n = s.status.notice.as_ref().unwrap();
    assert_eq!(n.level, Level::Info);
    assert!(n.text.contains("Esc stops it"), "{}", n.text);
    // Esc with the position inspector open closes it and leaves the answer running;
    // the next Esc stops the answer.
    s.rounds.selected = Some(1);
    assert!(update(&mut s, Msg::Action(Action::Stop)).is_empty());
    assert_eq!(s.rounds.selected, None);
    assert_eq!(
        update(&mut s, Msg::Action(Action::Stop)),
        vec![Effect::Cancel(1)]
    );
    // Esc says it stopped (the answer's end, when it comes, says "[stopped]").
    assert_eq!(s.status.notice.as_ref().unwrap().text, "stopped");
    // Ctrl+C while answering stops; a second one right after quits.
    let mut busy = s.clone();
    let first = update(&mut busy, Msg::Action(Action::Interrupt));
    assert_eq!(first, vec![Effect::Cancel(1)]);
    let second = update(&mut busy, Msg::Action(Action::Interrupt));
    assert_eq!(second, vec![Effect::Quit]);
    finish(&mut s);
    // Walked back, then a new message: the round pane follows the new answer.
    s.rounds.view = Some(0);
    s.rounds.selected = Some(0);
    let fx = update(&mut s, Msg::Action(Action::Submit));
    assert_eq!(s.rounds.view, None);
    assert_eq!(
        s.rounds.selected, None,
        "the inspector closes with a new answer"
    );
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
    // Ctrl+C: idle with empty input arms, then quits; armed only while its notice
    // shows (a second Ctrl+C long after would quit with no warning on screen).
    assert!(update(&mut s, Msg::Action(Action::Interrupt)).is_empty());
    assert!(s.status.quit_armed());
    let later = s.status.clock + 5.0;
    update(&mut s, Msg::Tick { now: later });
    assert!(s.status.notice.is_none() && !s.status.quit_armed());
    assert!(update(&mut s, Msg::Action(Action::Interrupt)).is_empty());
    assert_eq!(
        s.status.notice.as_ref().unwrap().text,
        "press Ctrl+C again to quit"
    );
    assert_eq!(
        update(&mut s, Msg::Action(Action::Interrupt)),
        vec![Effect::Quit]
    );

    let mut s = scripted();
    update(&mut s, Msg::Action(Action::PosNext));
    assert_eq!(s.rounds.selected, Some(0));
    update(&mut s, Msg::Action(Action::PosPrev));
    assert_eq!(s.rounds.selected, Some(7));
    update(&mut s, Msg::Action(Action::RoundPrev));
    assert_eq!(s.rounds.view, Some(0));
    update(&mut s, Msg::Action(Action::RoundLive));
    assert_eq!(s.rounds.view, None);
    match &update(&mut s, Msg::Action(Action::CycleMode))[..] {
        [Effect::SetOptions(o)] => assert_eq!(o.mode, Mode::Diffusion),
        other => panic!("{other:?}"),
    }
    // A live answer keeps its mode when the key moves to or from diffusion.
    assert!(
        notice(&s).contains("from the next message"),
        "{}",
        notice(&s)
    );
    match &update(&mut s, Msg::Action(Action::CycleMode))[..] {
        [Effect::SetOptions(o)] => assert_eq!(o.mode, Mode::Ar),
        other => panic!("{other:?}"),
    }
    match &update(&mut s, Msg::Action(Action::BlockLarger))[..] {
        [Effect::SetOptions(o)] => {
            assert_eq!((o.mode, o.blocks.clone()), (Mode::Linear, Blocks::Fixed(4)))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        update(&mut s, Msg::Action(Action::Slower)),
        vec![Effect::SetPace(1)]
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
fn a_chat_sends_only_the_exchanges_its_context_window_holds() {
    let mut s = State::new("m", "cpu", opts());
    for (i, (q, a)) in [("q1", "a1"), ("q2", "a2"), ("q3", "a3")]
        .iter()
        .enumerate()
    {
        s.chat
            .transcript
            .push(Turn::user(i as u64 + 1, q.to_string()));
        let mut answer = Turn::user(i as u64 + 1, a.to_string());
        answer.role = Role::Assistant;
        s.chat.transcript.push(answer);
    }
    let sent = |s: &mut State| -> Vec<String> {
        update(s, Msg::Input(InputEdit::Insert('x')));
        match &update(s, Msg::Action(Action::Submit))[..] {
            [Effect::Submit { messages, .. }] => {
                messages.iter().map(|m| m.content.clone()).collect()
            }
            other => panic!("{other:?}"),
        }
    };
    // The whole chat by default (other models); `--context-turns N` sends N.
    assert_eq!(
        sent(&mut s.clone()),
        ["q1", "a1", "q2", "a2", "q3", "a3", "x"]
    );
    s.session.context_turns = Some(1);
    assert_eq!(sent(&mut s.clone()), ["q3", "a3", "x"]);
    s.session.context_turns = Some(0);
    assert_eq!(sent(&mut s.clone()), ["x"]);
    s.session.context_turns = Some(5);
    assert_eq!(sent(&mut s.clone()).len(), 7);
}

fn notice(s: &State) -> String {
    s.status
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default()
}

#[test]
fn key_feedback_says_what_happened() {
    let mut s = State::new("m", "cpu", opts());
    // F3 on the adaptive default: adaptive off, said so.
    update(&mut s, Msg::Action(Action::BlockSmaller));
    assert!(notice(&s).contains("adaptive off"), "{}", notice(&s));
    assert_eq!(s.session.options.blocks, Blocks::Fixed(16));
    // F4 to the largest, then once more: nothing moves, and the notice says why.
    update(&mut s, Msg::Action(Action::BlockLarger));
    let fx = update(&mut s, Msg::Action(Action::BlockLarger));
    assert!(
        notice(&s).contains("already at the largest"),
        "{}",
        notice(&s)
    );
    assert!(matches!(&fx[..], [Effect::SetOptions(o)] if o.blocks == Blocks::Fixed(32)));
    // F2 around the cycle comes back to the starting setup, and says so.
    let mut s = State::new("m", "cpu", opts());
    for _ in 0..4 {
        update(&mut s, Msg::Action(Action::CycleMode));
    }
    assert_eq!(s.session.options, opts());
    assert!(
        notice(&s).contains("back to the starting setup"),
        "{}",
        notice(&s)
    );
    // Pace keys at the end of their range: no pace change for the app to announce
    // over the notice.
    let fx = update(&mut s, Msg::Action(Action::Faster));
    assert!(notice(&s).contains("fastest"), "{}", notice(&s));
    assert!(fx.is_empty(), "{fx:?}");
}

#[test]
fn labels_follow_live_option_changes() {
    // LinearSS B=16 answering; F4 mid-answer: the request runs at 32 from the next
    // round, and the chat header and status line say so.
    let lin = DecodeOptions {
        mode: Mode::Linear,
        blocks: Blocks::Fixed(16),
        ..opts()
    };
    let mut s = State::new("m", "cpu", lin);
    feed(
        &mut s,
        0.0,
        DecodeEvent::RequestStarted {
            req: 1,
            mode: Mode::Linear,
            blocks: Blocks::Fixed(16),
            overlap: false,
            prompt_tokens: 3,
            max_new_tokens: 10,
            family: None,
        },
    );
    assert_eq!(s.session.label(), "LinearSS fixed 16");
    update(&mut s, Msg::Action(Action::BlockLarger));
    assert_eq!(s.session.label(), "LinearSS fixed 32");
    assert_eq!(s.session.requests[&1].label, "LinearSS fixed 32");
}

#[test]
fn regenerate_while_streaming_keeps_the_new_answer_last() {
    let mut s = scripted();
    // Ctrl+R mid-answer: the old request is cancelled, the new one answers.
    let fx = update(&mut s, Msg::Action(Action::Regenerate));
    assert!(matches!(fx[0], Effect::Cancel(1)));
    feed(
        &mut s,
        0.2,
        SessionEvent::UserMessage {
            req: 2,
            text: "What is 12 plus 7?".into(),
            regenerate: true,
        },
    );
    feed(
        &mut s,
        0.21,
        DecodeEvent::Committed {
            req: 2,
            round: 0,
            tokens: vec![10],
            origins: vec![Origin::Prefill],
            text: "The".into(),
        },
    );
    // The cancelled request's last events arrive after the new answer began.
    feed(
        &mut s,
        0.22,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Cancelled,
            text: "The sum is 91".into(),
            stats: Box::default(),
        },
    );
    let roles: Vec<(Role, Option<u64>)> =
        s.chat.transcript.iter().map(|t| (t.role, t.req)).collect();
    assert_eq!(
        roles,
        vec![(Role::User, Some(2)), (Role::Assistant, Some(2))],
        "the cancelled answer does not come back above the new one"
    );
}

#[test]
fn a_stopped_answer_takes_the_busy_notice_back() {
    let mut s = scripted();
    update(&mut s, Msg::Input(InputEdit::Insert('x')));
    update(&mut s, Msg::Action(Action::Submit));
    assert!(notice(&s).contains("still answering"));
    feed(
        &mut s,
        0.3,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Cancelled,
            text: String::new(),
            stats: Box::default(),
        },
    );
    assert_eq!(notice(&s), "", "the stale notice is gone");
}

#[test]
fn a_round_without_its_draft_yet_does_not_replace_the_last_one() {
    let mut s = scripted();
    feed(
        &mut s,
        0.5,
        DecodeEvent::BlockChosen {
            req: 1,
            round: 2,
            block: 16,
            reason: ratio_reason(),
        },
    );
    // Between the block choice and the draft the pane keeps showing round 1.
    assert_eq!(s.rounds.shown().map(|r| r.round), Some(1));
    feed(
        &mut s,
        0.51,
        DecodeEvent::Drafted {
            req: 1,
            round: 2,
            block: vec![18, 14],
            margins: vec![0.9],
            risky: vec![],
            reused: None,
            detail: vec![],
            rows: None,
        },
    );
    assert_eq!(s.rounds.shown().map(|r| r.round), Some(2));
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
            lines: None,
        },
    );
    update(&mut s, Msg::Action(Action::PageUp));
    assert!(!s.chat.following());
    // The app measures the transcript while scrolled back; the reducer bounds the
    // scroll by it (no drawing code in the reducer).
    update(
        &mut s,
        Msg::ChatArea {
            width: 60,
            height: 10,
            lines: Some(45),
        },
    );
    for _ in 0..20 {
        update(&mut s, Msg::Action(Action::PageUp));
    }
    assert_eq!(s.chat.scroll_back, 35, "at the top, not beyond");
    let back = s.chat.scroll_back;
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
    assert_eq!(s.chat.scroll_back, back);
    update(&mut s, Msg::Wheel(1));
    assert_eq!(
        s.chat.scroll_back,
        back - 3,
        "the wheel scrolls three lines"
    );
    update(&mut s, Msg::Action(Action::FollowBottom));
    assert!(s.chat.following());
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
    // Readline keys edit the input.
    for (c, m, want) in [
        ('a', KeyModifiers::CONTROL, InputEdit::Home),
        ('e', KeyModifiers::CONTROL, InputEdit::End),
        ('u', KeyModifiers::CONTROL, InputEdit::KillToStart),
        ('k', KeyModifiers::CONTROL, InputEdit::KillToEnd),
        ('w', KeyModifiers::CONTROL, InputEdit::DeleteWordBack),
        ('b', KeyModifiers::ALT, InputEdit::WordLeft),
        ('f', KeyModifiers::ALT, InputEdit::WordRight),
    ] {
        match key_msg(&s, &km, &k(KeyCode::Char(c), m)) {
            Some(Msg::Input(e)) => assert_eq!(e, want, "{c}"),
            other => panic!("{c}: {other:?}"),
        }
    }
    // Tab puts an example in the box.
    let mut s =
        State::new("m", "cpu", opts()).with_intro(vec![], vec!["What is 12 plus 7?".into()]);
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Tab, KeyModifiers::NONE)),
        Some(Msg::Action(Action::Example))
    ));
    update(&mut s, Msg::Action(Action::Example));
    assert_eq!(s.chat.input.text, "What is 12 plus 7?");
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

#[test]
fn a_long_prompt_wraps_in_the_input_box_and_keeps_the_cursor_in_view() {
    let prompt = "Emma has 48 marbles. She buys 3 bags with 6 marbles each. Then she gives \
                  10 marbles to a friend. How many marbles does Emma have at the end?";
    let mut s = State::new("m", "cpu", opts());
    for c in prompt.chars() {
        update(&mut s, Msg::Input(InputEdit::Insert(c)));
    }
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let rows = input_box_text(&buf);
    assert!(rows.len() > 1, "{rows:?}");
    let words = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(words(&rows.join(" ")), words(prompt), "every word shows");
    // Longer than the box's six rows: it scrolls to the cursor's row.
    let more = format!("{prompt} {prompt} {prompt}");
    for c in format!(" {prompt} {prompt}").chars() {
        update(&mut s, Msg::Input(InputEdit::Insert(c)));
    }
    assert_eq!(s.chat.input.text, more);
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let rows = input_box_text(&buf);
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(
        words(&more).ends_with(&words(&rows.join(" "))),
        "the end shows: {rows:?}"
    );
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

/// The answer ends inside a block the verifier accepted whole: the positions past the
/// end and the bonus are drawn as discarded, the verdict says how many were kept, and
/// the continuation that hit says it went unused.
#[test]
fn positions_past_the_answers_end_are_not_drawn_as_accepted() {
    let theme = Theme::dark();
    let mut s = scripted();
    feed(
        &mut s,
        0.07,
        DecodeEvent::Drafted {
            req: 1,
            round: 2,
            block: vec![18, 14, 15, 16],
            margins: vec![0.9, 0.9, 0.9],
            risky: vec![],
            reused: None,
            detail: vec![],
            rows: None,
        },
    );
    feed(
        &mut s,
        0.07,
        DecodeEvent::BranchesBuilt {
            req: 1,
            round: 2,
            branches: vec![BranchView {
                kind: BranchKind::Continuation,
                at: 3,
                alt: None,
                tokens: 8,
                block: vec![17, 10],
            }],
        },
    );
    feed(
        &mut s,
        0.08,
        DecodeEvent::Verified {
            req: 1,
            round: 2,
            accepted: 3,
            first_reject: None,
            verifier_tokens: vec![14, 15, 16, 17],
            bonus: 17,
            detail: vec![],
        },
    );
    let before = draw(&s, &theme, 160, 48);
    // " Done" is drawn "·Done" in the draft row (the chat has a plain space).
    let (x, y) = find_text(&before, "·Done").expect("the draft row");
    assert_eq!(before[(x, y)].fg, theme.accepted.fg.unwrap(), "not cut yet");
    // Only ". Done" made it into the answer (say " Done" was the end of turn).
    feed(
        &mut s,
        0.08,
        DecodeEvent::Committed {
            req: 1,
            round: 2,
            tokens: vec![14, 15],
            origins: vec![Origin::Draft, Origin::Draft],
            text: ". Done".into(),
        },
    );
    feed(
        &mut s,
        0.08,
        DecodeEvent::BranchResolved {
            req: 1,
            round: 2,
            outcome: BranchOutcome::Hit {
                index: 0,
                kind: BranchKind::Continuation,
            },
        },
    );
    let live = screen_text(&draw(&s, &theme, 160, 48));
    assert!(
        live.contains("✓ HIT") && !live.contains("unused"),
        "still answering"
    );
    // Stopped by the user, the hit went unused for that reason.
    let mut stopped = s.clone();
    feed(
        &mut stopped,
        0.08,
        DecodeEvent::RequestFinished {
            req: 1,
            stop: StopReason::Cancelled,
            text: String::new(),
            stats: Box::default(),
        },
    );
    let all = screen_text(&draw(&stopped, &theme, 160, 48));
    assert!(all.contains("HIT, unused: the answer was stopped"), "{all}");
    // Ctrl+L clears the chat, not what the round pane knows of the request.
    feed(&mut stopped, 0.09, SessionEvent::ChatCleared);
    let all = screen_text(&draw(&stopped, &theme, 160, 48));
    assert!(all.contains("HIT, unused: the answer was stopped"), "{all}");
    finish(&mut s);
    let buf = draw(&s, &theme, 160, 48);
    let all = screen_text(&buf);
    assert!(
        all.contains("→ 2 tokens kept: the answer ends here"),
        "{all}"
    );
    assert!(all.contains("HIT, unused: the answer ended"), "{all}");
    // The round's history bar shows the 2 kept of its 4, not the 4 it advanced.
    let (hx, top) = find_text(&buf, "adv/B").expect("the history's bars");
    let base = (top + 1..top + 6)
        .find(|&y| text_at(&buf, hx, y, 5) == "block")
        .expect("the block row");
    let first = (hx + 5..hx + 20)
        .find(|&x| buf[(x, base)].symbol() != " ")
        .expect("round 1's block glyph");
    let column: String = (top..base)
        .map(|y| buf[(first + 1, y)].symbol().to_string())
        .collect();
    let rows = usize::from(base - top);
    let full = column.chars().filter(|c| *c == '█').count();
    assert_eq!(full, rows / 2, "half the rows: {column:?}");
    // The verdict counts up to the end: no "full block", no bonus after it.
    assert!(
        all.contains("✓ accepted 2 of 3  → 2 tokens kept: the answer ends here"),
        "{all}"
    );
    assert!(
        !all.contains("full block") && !all.contains("bonus '⏎'"),
        "{all}"
    );
    let (x, y) = find_text(&buf, "·Done").unwrap();
    let row = text_at(&buf, x, y, 12);
    assert_eq!(buf[(x, y)].fg, theme.accepted.fg.unwrap(), "{row}");
    let col = |c: char| x + row.chars().position(|r| r == c).expect("on the row") as u16;
    let bang = col('!');
    assert_eq!(buf[(bang, y)].fg, theme.discarded.fg.unwrap(), "{row}");
    let plus = col('+');
    assert_eq!(buf[(plus, y)].fg, theme.discarded.fg.unwrap(), "{row}");
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
fn round_choice_shows_its_rate_and_each_candidate() {
    let reason = BlockDecision {
        rule: Rule::Round,
        rate: Some(1.25),
        candidates: vec![
            BlockCandidate {
                block: 1,
                value: 1.0,
                cost_ms: 0.5,
                rows_ms: 0.0,
            },
            BlockCandidate {
                block: 8,
                value: 5.0,
                cost_ms: 2.0,
                rows_ms: 0.0,
            },
        ],
        ..ratio_reason()
    };
    let buf = draw(&scripted_with(reason), &Theme::dark(), 160, 48);
    let all = screen_text(&buf);
    let (_, y) =
        find_text(&buf, "block 8 · best tokens per ms for the round").expect("the reason in words");
    assert!(
        !all.contains("λ") && !all.contains("ratio"),
        "no internal ids: {all}"
    );
    let (_, cy) = find_text(
        &buf,
        "expected tokens / ms per size (round: 1.25 tokens/ms)",
    )
    .unwrap();
    assert!(cy > y);
    let line = text_at(&buf, 0, cy, 160) + &text_at(&buf, 0, cy + 1, 160);
    assert!(
        line.contains("1: 1.0/0.5") && line.contains("8: 5.0/2.0◀"),
        "{line}"
    );
    let (x, y) = find_text(&buf, "8: 5.0/2.0◀").unwrap();
    assert_eq!(buf[(x, y)].fg, Theme::dark().title.fg.unwrap());
}

#[test]
fn an_ar_regime_step_shows_the_measured_rates() {
    let reason = BlockDecision {
        rule: Rule::ArRegime,
        candidates: Vec::new(),
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: Some(0.93),
        }),
        ..ratio_reason()
    };
    // The scripted round drafted 8; an AR step's reason reads the same whatever B.
    let buf = draw(&scripted_with(reason.clone()), &Theme::dark(), 160, 48);
    let (x, y) = find_text(&buf, "AR step (measured regime)").expect("the reason line");
    let all = screen_text(&buf);
    assert!(
        all.contains("measured tokens/ms here: AR steps 0.93 · drafting 0.78"),
        "{all}"
    );
    assert_eq!(buf[(x, y)].fg, Theme::dark().text.fg.unwrap());
    // Not measured yet: a dash.
    let trial = BlockDecision {
        rule: Rule::ArTrial,
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: None,
        }),
        ..reason
    };
    let buf = draw(&scripted_with(trial), &Theme::dark(), 160, 48);
    assert!(screen_text(&buf).contains("AR steps — · drafting 0.78"));
}

/// The candidates show whole or not at all: never their heading without the figures.
#[test]
fn the_candidates_heading_never_shows_without_its_figures() {
    // Chosen for the round: the heading is long enough to take rows of its own.
    let s = scripted_with(BlockDecision {
        rule: Rule::Round,
        rate: Some(0.13),
        ..ratio_reason()
    });
    let mut shown = 0;
    for h in 16..40 {
        let all = screen_text(&draw(&s, &Theme::dark(), 80, h));
        if all.contains("expected tokens") {
            assert!(all.contains('◀'), "80×{h}: {all}");
            shown += 1;
        }
    }
    // Not vacuous: tall panes do show them.
    assert!(shown > 0, "the candidates never showed at 80 columns");
}

/// An AR step's token is never cut at the pane's border: it wraps whole.
#[test]
fn an_ar_step_shows_its_whole_token_at_80_columns() {
    let mut s = scripted();
    feed(
        &mut s,
        0.1,
        SessionEvent::TokenText {
            tokens: vec![(20, " sufficiently".to_string())],
        },
    );
    feed(
        &mut s,
        0.1,
        DecodeEvent::Verified {
            req: 1,
            round: 2,
            accepted: 0,
            first_reject: None,
            verifier_tokens: vec![20],
            bonus: 20,
            detail: vec![],
        },
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let all = screen_text(&buf);
    assert!(all.contains("AR step: one token per forward"), "{all}");
    let (x, y) = find_text(&buf, "'·sufficiently'").expect("the whole token");
    assert_eq!(buf[(x, y)].fg, Theme::dark().bonus.fg.unwrap(), "{all}");
}

#[test]
fn inspector_shows_draft_and_verifier_top_k() {
    let mut s = scripted();
    for _ in 0..4 {
        update(&mut s, Msg::Action(Action::PosNext));
    }
    assert_eq!(s.rounds.selected, Some(3));
    let buf = draw(&s, &Theme::dark(), 160, 48);
    let (_, y) = find_text(&buf, "draft top-k").unwrap();
    let line = text_at(&buf, 0, y, 160);
    assert!(
        line.contains("·19 0.50") && line.contains("·91 0.40"),
        "{line}"
    );
    let (_, y) = find_text(&buf, "verifier top-k").unwrap();
    assert!(text_at(&buf, 0, y, 160).contains("·91 0.70"));
    // The heading names the token: the draft's, and the verifier's where it differs.
    assert!(
        find_text(&buf, "position 3: drafted '·19', verifier '·91'").is_some(),
        "{}",
        screen_text(&buf)
    );
    // At 80×24 both sides' figures show before the lists, and what is cut says so.
    let all = screen_text(&draw(&s, &Theme::dark(), 80, 24));
    assert!(
        all.contains("draft:    margin") && all.contains("verifier: margin"),
        "{all}"
    );
    assert!(all.contains("a larger pane shows the rest"), "{all}");
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
        s.rounds.list.iter().any(|r| r.reused.is_some()),
        "and reused blocks"
    );
}

/// A live default-configuration round at a size: the draft row and the verdict are on
/// screen, and the status line keeps its markers.
fn default_round_at(w: u16, h: u16) -> Buffer {
    let mut s = scripted();
    update(&mut s, Msg::Recording(Some("x.jsonl".into())));
    s.status.pace = 2;
    s.status.paused = true;
    draw(&s, &Theme::dark(), w, h)
}

#[test]
fn at_80x24_the_draft_and_verdict_show_and_the_markers_stay() {
    let buf = default_round_at(80, 24);
    let all = screen_text(&buf);
    // The draft row: the seed, the tokens, the risky glyph on a margin.
    assert!(all.contains("seed"), "{all}");
    assert!(find(&buf, RISKY_GLYPH).len() >= 2, "{all}");
    assert!(all.contains("first reject at 3"), "{all}");
    // The status line (last row) keeps the markers at 80 columns.
    let status = text_at(&buf, 0, 23, 80);
    for m in ["● REC", "⏸", "slow 300ms", "help"] {
        assert!(status.contains(m), "{m} missing: {status}");
    }
    insta::assert_snapshot!("screen_80x24", format!("{buf:?}"));
}

#[test]
fn at_120x30_the_round_shows_whole() {
    let buf = default_round_at(120, 30);
    let all = screen_text(&buf);
    assert!(
        all.contains("seed") && all.contains("first reject at 3"),
        "{all}"
    );
    assert!(all.contains("HIT"), "{all}");
    insta::assert_snapshot!("screen_120x30", format!("{buf:?}"));
}

#[test]
fn a_long_notice_keeps_the_markers_and_the_file_name() {
    let mut s = scripted();
    update(&mut s, Msg::Recording(Some("x.jsonl".into())));
    update(
        &mut s,
        Msg::Notice {
            text: "/home/someone/.config/specscope/themes/mine.toml:3: unknown role `sparkly`; using the built-in theme".into(),
            level: Level::Warning,
        },
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let (status, above) = (text_at(&buf, 0, 23, 80), text_at(&buf, 0, 22, 80));
    assert!(
        status.contains("● REC") && status.contains("RecGuide"),
        "{status}"
    );
    assert!(
        above.contains("…/mine.toml:3: unknown role `sparkly`;") && above.contains("messages page"),
        "the file's name, the message and where the rest is show: {above}"
    );
}

#[test]
fn the_history_pane_draws_at_20_rows() {
    let buf = draw(&scripted(), &Theme::dark(), 80, 20);
    let all = screen_text(&buf);
    assert!(all.contains("history"), "{all}");
    assert!(all.contains("accept"), "the bars' label: {all}");
}

#[test]
fn the_verdict_wraps_instead_of_being_cut() {
    let buf = draw(&scripted(), &Theme::dark(), 80, 30);
    let all = screen_text(&buf);
    assert!(all.contains("verifier says"), "{all}");
    assert!(
        all.contains("→ 3 tokens"),
        "the end of the verdict shows: {all}"
    );
}

#[test]
fn help_pages_explain_keys_terms_and_messages() {
    let mut s = scripted();
    update(
        &mut s,
        Msg::Notice {
            text: "keymap.toml:2: unknown action `fly`".into(),
            level: Level::Warning,
        },
    );
    update(&mut s, Msg::Action(Action::Help));
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let all = screen_text(&buf);
    assert!(
        all.contains("Esc closes")
            && all.contains("Rebind in")
            && all.contains("<config dir>/keymap.toml."),
        "the footer shows at 80x24: {all}"
    );
    update(&mut s, Msg::HelpPage(1));
    let all = screen_text(&draw(&s, &Theme::dark(), 120, 40));
    for term in [
        "margin",
        "bonus",
        "P1 P2 P3",
        "TPF",
        "cold start",
        "AR step",
    ] {
        assert!(all.contains(term), "{term}: {all}");
    }
    // Entries continue indented, so each term starts a row of its own at the edge.
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let (x, y) = find_text(&buf, "block: the tokens").unwrap();
    let next = text_at(&buf, x, y + 1, 3);
    assert!(
        next.starts_with("  ") && !next.ends_with(' '),
        "hanging indent: {next:?}"
    );
    update(&mut s, Msg::HelpPage(1));
    let all = screen_text(&draw(&s, &Theme::dark(), 120, 40));
    assert!(all.contains("unknown action `fly`"), "{all}");
    update(
        &mut s,
        Msg::Notice {
            text: "theme.toml:7: field `accepted`: unknown colour `greenish`; the default theme's colour is used instead".into(),
            level: Level::Warning,
        },
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let (x, y) = find_text(&buf, "• theme.toml:7").unwrap();
    let next = text_at(&buf, x, y + 1, 3);
    assert!(
        next.starts_with("  ") && !next.ends_with(' '),
        "a message continues under its text: {next:?}"
    );
}

#[test]
fn code_and_lists_in_answers_render_as_blocks() {
    let mut s = State::new("m", "cpu", opts());
    feed(
        &mut s,
        0.0,
        SessionEvent::UserMessage {
            req: 1,
            text: "code".into(),
            regenerate: false,
        },
    );
    feed(
        &mut s,
        0.1,
        DecodeEvent::Committed {
            req: 1,
            round: 1,
            tokens: vec![1],
            origins: vec![Origin::Draft],
            text: "Here:\n```python\ndef f(xs):\n    total = sum(x * 7 for x in xs if x > 2 and x < 100 and x != 50)\n    return xs\n```\n1. first item that is long enough to wrap around the chat pane's width\n".into(),
        },
    );
    let theme = Theme::dark();
    let buf = draw(&s, &theme, 100, 30);
    let (x, y) = find_text(&buf, "def f(xs):").unwrap();
    assert_eq!(
        buf[(x, y)].fg,
        theme.code.fg.unwrap(),
        "code in the code style"
    );
    let (_, y) = find_text(&buf, "    return xs").expect("indentation kept");
    // A code line longer than the pane continues at its own indentation.
    let (tx, ty) = find_text(&buf, "    total = sum(").unwrap();
    let cont = text_at(&buf, tx - 2, ty + 1, 7);
    assert!(
        cont.starts_with("      ") && !cont.ends_with(' '),
        "continuation: {cont:?}"
    );
    assert_eq!(buf[(tx + 4, ty + 1)].fg, theme.code.fg.unwrap());
    let (lx, ly) = find_text(&buf, "1. first item").unwrap();
    // The item's next line hangs under its text, not under the number.
    let next = text_at(&buf, lx, ly + 1, 4);
    assert!(
        next.starts_with("   ") && !next.ends_with(' '),
        "hanging indent: {next:?}"
    );
    let _ = y;
}

#[test]
fn the_empty_chat_introduces_the_model() {
    let s = State::new("bundled:tiny-nld", "cpu", opts()).with_intro(
        vec!["The bundled drill model: 4.2M parameters.".into()],
        vec!["What is 12 plus 7?".into()],
    );
    let all = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(all.contains("drill model: 4.2M"), "{all}");
    assert!(
        all.contains("What is 12 plus 7?") && all.contains("Tab"),
        "{all}"
    );
    assert!(
        all.contains("bundled drill model (tiny-nld)"),
        "the status names it: {all}"
    );
    // Nothing decoded yet: no rates that read as measured zeros.
    for zero in ["0.00", "0 tok/s"] {
        assert!(!all.contains(zero), "{zero}: {all}");
    }
    assert!(all.contains("TPF  —  tok/s  —"), "{all}");
    // At 80×24 the model's last lines give way so that an example still shows.
    let s = State::new("bundled:tiny-nld", "cpu", opts()).with_intro(
        vec![
            "Bundled drill model: 4.2M parameters, trained from scratch on a 2-core CPU (385 min, 15.0M tokens of generated chats).".into(),
            "It does arithmetic, word problems, Python list functions, capitals, and reversing, counting or sorting words; it declines the rest.".into(),
            "Each message is answered on its own; --context-turns 1 sends the exchange before, for follow-ups.".into(),
        ],
        vec!["Hello! How are you doing?".into(), "15 times 3?".into()],
    );
    let all = screen_text(&draw(&s, &Theme::dark(), 80, 24));
    for want in [
        "drill model: 4.2M",
        "• Hello! How are you doing?",
        "F1 help",
    ] {
        assert!(all.contains(want), "{want}: {all}");
    }
}

#[test]
fn the_light_theme_paints_its_own_background() {
    let theme = Theme::builtin("light").unwrap();
    let buf = draw(&scripted(), &theme, 100, 30);
    let bg = theme.background.bg.unwrap();
    let painted = buf.content().iter().filter(|c| c.bg == bg).count();
    assert!(painted > buf.content().len() / 2, "{painted} cells");
}

/// The help's pages scroll (the legend is longer than 80×24), and while the help is
/// open keys neither type into the hidden input nor act behind it.
#[test]
fn help_scrolls_and_keeps_keys_from_the_screen_behind() {
    let km = Keymap::builtin();
    let mut s = scripted();
    update(&mut s, Msg::Action(Action::Help));
    update(&mut s, Msg::HelpPage(1));
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let top = screen_text(&buf);
    // Nothing of the panes behind shows beside the overlay (the status line stays).
    for y in 0..23 {
        for x in [0u16, 1, 78, 79] {
            assert_eq!(buf[(x, y)].symbol(), " ", "({x}, {y}):\n{top}");
        }
    }
    assert!(!top.contains("history bars"), "{top}");
    assert!(top.contains("↓ more"), "says there is more: {top}");
    let k = |c, m| KeyEvent::new(c, m);
    let down = key_msg(&s, &km, &k(KeyCode::PageDown, KeyModifiers::NONE));
    assert!(matches!(down, Some(Msg::HelpScroll(10))), "{down:?}");
    for _ in 0..10 {
        update(&mut s, Msg::HelpScroll(10));
    }
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let end = screen_text(&buf);
    assert!(end.contains("history bars"), "the last term shows: {end}");
    // Scrolled to the end, the page's last line sits on the bottom border.
    let (_, y) = find_text(&buf, "carry over.").expect("the page's last line");
    assert!(text_at(&buf, 4, y + 1, 3).contains('─'), "{end}");
    assert!(end.contains("↑ back"), "{end}");
    // Scrolled past the end, the screen brings the scroll back before drawing, so one
    // Up moves the page at once.
    let frame = ratatui::layout::Rect::new(0, 0, 80, 24);
    let max =
        specscope::tui::panes::help::max_scroll(render::help_area(frame), &s, &Theme::dark(), &km);
    assert!(s.help_scroll > max && max > 0, "{} {max}", s.help_scroll);
    update(&mut s, Msg::HelpScrollMax(max));
    assert_eq!(s.help_scroll, max);
    assert_eq!(screen_text(&draw(&s, &Theme::dark(), 80, 24)), end);
    update(&mut s, Msg::HelpScroll(-1));
    let up = screen_text(&draw(&s, &Theme::dark(), 80, 24));
    assert!(up != end && up.contains("↓ more"), "{up}");
    // Another page starts at its top.
    update(&mut s, Msg::HelpPage(1));
    assert_eq!(s.help_scroll, 0);
    // Typing and stepping do nothing while the help is open; Esc closes it.
    assert!(key_msg(&s, &km, &k(KeyCode::Char('j'), KeyModifiers::NONE)).is_none());
    assert!(key_msg(&s, &km, &k(KeyCode::Char('n'), KeyModifiers::CONTROL)).is_none());
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Char('q'), KeyModifiers::CONTROL)),
        Some(Msg::Action(Action::Quit))
    ));
    assert!(matches!(
        key_msg(&s, &km, &k(KeyCode::Esc, KeyModifiers::NONE)),
        Some(Msg::Action(Action::Help))
    ));
}

/// At 80 columns a long notice goes on the row above the status line, cut between
/// words, the help key stays, and the notice is on the messages page in full,
/// informational ones too.
#[test]
fn notices_keep_the_help_key_and_are_kept_in_full() {
    let mut s = scripted();
    let path = "/tmp/a/very/long/directory/name/for/the/recording/session-20261201.jsonl";
    update(
        &mut s,
        Msg::Notice {
            text: format!("recording saved to {path}"),
            level: Level::Info,
        },
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let all = screen_text(&buf);
    let status = all.lines().last().unwrap_or_default().to_string();
    assert!(status.contains("F1 help"), "{status}");
    // Too long for the status line: on the row above, the file's name kept.
    let above = all.lines().nth(22).unwrap_or_default().to_string();
    assert!(
        above.contains("recording saved to …/session-20261201.jsonl (F1: messages page)"),
        "{above}"
    );
    update(&mut s, Msg::Action(Action::Help));
    update(&mut s, Msg::HelpPage(2));
    let page = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(page.contains("session-20261201.jsonl"), "{page}");
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

#[test]
fn at_80_columns_titles_and_summaries_shorten_instead_of_being_cut() {
    let mut s = demo_played();
    // Walked back to a past round, paused, the chat scrolled up: every title at its
    // longest.
    s.status.paused = true;
    for _ in 0..3 {
        update(&mut s, Msg::Action(Action::RoundPrev));
    }
    update(&mut s, Msg::Action(Action::ScrollUp));
    for (w, h) in [(80, 24), (100, 30), (200, 50)] {
        let buf = draw(&s, &Theme::dark(), w, h);
        let all = screen_text(&buf);
        assert!(
            cut_at_border(&buf).is_empty(),
            "{w}x{h}: {:?}\n{all}",
            cut_at_border(&buf)
        );
        assert!(
            all.contains("session 145/148") || all.contains("145 of 148 session rounds"),
            "{all}"
        );
        assert!(all.contains("acceptance"), "{all}");
        assert!(all.contains("hit"), "{all}");
    }
    // Every round of the demo at 80×24: the verdict wraps between its phrases, never
    // inside one ("bonus" at a line's end, its token on the next).
    let mut seen = 0;
    while s.rounds.shown_index().unwrap_or(0) > 0 {
        let buf = draw(&s, &Theme::dark(), 80, 24);
        for y in 0..24 {
            let row = text_at(&buf, 36, y, 44);
            let inner = row.trim_matches('│').trim_end();
            // (The draft grid's own "bonus" label ends rows too; a verdict row quotes.)
            let verdict_bonus = inner.ends_with("bonus") && inner.contains('\'');
            let orphan = ["drafted", "says", "→", "accepted", "reject at"]
                .iter()
                .any(|o| inner.ends_with(o))
                // nor does a wrapped phrase start with the space before it
                || (inner.contains('→') && inner.starts_with(' '))
                // and a branch row's preview shows at least its first token
                || inner.contains("[…]")
                // and the bonus cell's label is whole (not " b": the letter b is a
                // token of the word tasks, and a cell ends a row with it)
                || [" bo", " bon", " bonu"].iter().any(|p| inner.ends_with(p));
            assert!(
                !verdict_bonus && !orphan,
                "{inner:?}\n{}",
                screen_text(&buf)
            );
        }
        seen += 1;
        update(&mut s, Msg::Action(Action::RoundPrev));
    }
    assert!(seen > 100, "walked {seen} rounds");
}

/// The round pane says "live" only while the request answers.
#[test]
fn round_title_says_live_only_while_answering() {
    let mut s = scripted();
    let live = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(live.contains("request 1 live"), "{live}");
    finish(&mut s);
    let done = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(done.contains("request 1 latest"), "{done}");
}

/// The status line keeps what matters most: whether it is answering, the mode (its
/// word where the whole does not fit), the model (its name), the device, before any
/// of them takes its long form.
#[test]
fn the_status_line_keeps_the_activity_before_the_mode_name() {
    // As `specscope chat` starts: the bundled model at the default slow pace.
    let mut s = State::new("bundled:tiny-nld", "cpu", opts());
    s.status.pace = specscope::tui::state::DEFAULT_LIVE_PACE;
    let last_row = |w: u16| {
        let buf = draw(&s, &Theme::dark(), w, 30);
        text_at(&buf, 0, 29, w)
    };
    let wide = last_row(200);
    assert!(
        wide.contains(
            "bundled drill model (tiny-nld) │ RecGuide adaptive {8,16,32} +overlap │ idle │ cpu"
        ),
        "{wide}"
    );
    // At 120 columns the mode's whole name goes before the model's.
    let mid = last_row(120);
    assert!(
        mid.contains(" specscope │ tiny-nld │ RecGuide adaptive {8,16,32} +overlap │ idle │ cpu"),
        "{mid}"
    );
    // At 80 the model's name shortens so that the mode stays (it used to go while
    // the less important device stayed).
    let narrow = last_row(80);
    assert!(
        narrow.contains(" specscope │ tiny-nld │ RecGuide │ idle │ cpu"),
        "{narrow}"
    );
    // Paused with a notice: the activity stays.
    let mut s = s.clone();
    s.status.paused = true;
    s.status.notice(
        "overlap branches off: RecGuide adaptive {8,16,32}",
        Level::Info,
        Topic::General,
    );
    let buf = draw(&s, &Theme::dark(), 80, 30);
    let paused = text_at(&buf, 0, 29, 80);
    assert!(paused.contains("idle") && paused.contains("⏸"), "{paused}");
}

/// The keys page lists what acts where it is open: no seeking in the chat, no typing,
/// sending or changing options in a replay.
#[test]
fn the_keys_page_lists_the_keys_that_act_here() {
    let mut s = State::new("m", "cpu", opts());
    update(&mut s, Msg::Action(Action::Help));
    let live = screen_text(&draw(&s, &Theme::dark(), 200, 60));
    assert!(
        live.contains("send the message") && !live.contains("replay: back 10 rounds"),
        "{live}"
    );
    start_replay(&mut s);
    let replay = screen_text(&draw(&s, &Theme::dark(), 200, 60));
    assert!(
        replay.contains("replay: back 10 rounds")
            && replay.contains("pause / resume")
            && !replay.contains("send the message")
            && !replay.contains("regenerate the last answer"),
        "{replay}"
    );
}

/// A round's one miss reason is about the kind of row it names: at a full block the
/// correction rows were not needed and the continuation missed; at a rejection the
/// continuation was not needed.
#[test]
fn branch_rows_say_which_of_them_missed() {
    use specscope::engine::events::MissReason;
    let rows = |reason: MissReason| {
        let mut s = scripted();
        s.rounds.list.back_mut().unwrap().outcome = Some(BranchOutcome::Miss { reason });
        let all = screen_text(&draw(&s, &Theme::dark(), 200, 50));
        let line = |head: &str| {
            all.lines()
                .find(|l| l.contains(head))
                .unwrap_or_else(|| panic!("{head}: {all}"))
                .to_string()
        };
        (line("P1 @3"), line("new @8"))
    };
    let (p1, new) = rows(MissReason::ContinuationMiss);
    assert!(p1.contains("not needed") && !p1.contains("miss:"), "{p1}");
    assert!(
        new.contains("miss: continuation guessed another bonus"),
        "{new}"
    );
    let (p1, new) = rows(MissReason::WrongCandidate);
    assert!(p1.contains("miss: verifier chose another token"), "{p1}");
    assert!(new.contains("not needed"), "{new}");
}

/// An answer whose mode was switched part way names both in its header.
#[test]
fn an_answer_switched_mid_way_names_both_modes() {
    let mut s = scripted();
    // RecGuide → diffusion (for the next message) → AR (for this one too).
    update(&mut s, Msg::Action(Action::CycleMode));
    update(&mut s, Msg::Action(Action::CycleMode));
    let all = screen_text(&draw(&s, &Theme::dark(), 200, 50));
    assert!(
        all.contains("specscope  RecGuide adaptive {8,16,32} +overlap → AR"),
        "{all}"
    );
}

/// A block diffusion canvas fills step by step in the round pane (masks, the step under
/// each token), and once written marks where AR would have said another token, in the
/// risky style; the history counts the block's agreement. At 80×24 and 200×50.
#[test]
fn a_diffusion_block_fills_and_shows_where_ar_disagrees() {
    let mut s = State::new("tiny", "cpu", opts());
    let words = [
        (10, "The"),
        (11, " sum"),
        (12, " is"),
        (13, " 19"),
        (14, " 91"),
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
        0.01,
        DecodeEvent::RequestStarted {
            req: 1,
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(4),
            overlap: true,
            prompt_tokens: 12,
            max_new_tokens: 64,
            family: None,
        },
    );
    feed(
        &mut s,
        0.02,
        DecodeEvent::Denoised {
            req: 1,
            round: 1,
            step: 1,
            canvas: vec![Some(10), Some(11), None, None],
            positions: vec![0, 1],
            confidence: vec![0.97, 0.93],
        },
    );
    let theme = Theme::dark();
    for (w, h) in [(80, 24), (200, 50)] {
        let all = screen_text(&draw(&s, &theme, w, h));
        assert!(all.contains("step 1 · 2 masked of 4"), "{all}");
        assert!(all.contains("The ·sum"), "{all}");
        assert!(all.contains("░░"), "masks: {all}");
        assert!(all.contains("s1"), "the step under a token: {all}");
    }
    feed(
        &mut s,
        0.03,
        DecodeEvent::BlockWritten {
            req: 1,
            round: 1,
            block: vec![10, 11, 12, 14],
            steps: vec![1, 1, 2, 2],
            ar: vec![10, 11, 12, 13],
        },
    );
    let buf = draw(&s, &theme, 80, 24);
    let all = screen_text(&buf);
    assert!(all.contains("2 steps + 1 cache"), "{all}");
    assert!(all.contains("AR agrees at 3 of 4"), "{all}");
    assert!(all.contains("at 3 AR would say"), "{all}");
    assert!(all.contains("not lossless"), "{all}");
    // The disagreeing token carries ≠ and the risky style.
    let (x, y) = (0..buf.area.height)
        .find_map(|y| {
            let row = text_at(&buf, 0, y, buf.area.width);
            row.find("≠").map(|b| (row[..b].chars().count() as u16, y))
        })
        .expect("a ≠ mark");
    assert_eq!(buf[(x, y)].fg, theme.risky.fg.unwrap());
    // The history pane counts it: the block's bar and what diffusion cost.
    assert!(all.contains("=AR"), "{all}");
    // A selected position says how it was committed and what AR would say there.
    s.rounds.selected = Some(3);
    let all = screen_text(&draw(&s, &theme, 80, 24));
    assert!(all.contains("position 3: '·91' at step 2"), "{all}");
}

/// The round pane's rows, inside its border (the pane whose title starts "round").
fn round_pane_lines(buf: &Buffer) -> Vec<String> {
    let Some((x, y0)) = find_text(buf, "┌ round") else {
        return Vec::new();
    };
    let width = buf.area.width - x;
    let mut out = Vec::new();
    let mut y = y0 + 1;
    while y < buf.area.height && buf[(x, y)].symbol() == "│" {
        out.push(text_at(buf, x + 1, y, width - 2).trim_end().to_string());
        y += 1;
    }
    out
}

/// Every frame of the demo at sizes from 80×24 up, with and without a selected
/// position: a branch row shows whole (its head through its verdict) or not at all,
/// however short the pane.
#[test]
fn branch_rows_are_never_cut_in_the_middle() {
    use specscope::engine::overlap::MissReason::*;
    let reasons = [
        NoBranches,
        Before,
        Between,
        After,
        WrongCandidate,
        ContinuationMiss,
        ContinuationAbsent,
        Ended,
    ];
    let mut endings: Vec<String> = reasons
        .iter()
        .map(|r| format!("miss: {}", r.describe()))
        .collect();
    endings.extend(
        [
            "HIT",
            "not needed",
            "…",
            "unused: the answer ended",
            "unused: the answer was stopped",
        ]
        .map(String::from),
    );
    let is_head = |l: &str| {
        ["P1 ", "P2 ", "P3 ", "new "]
            .iter()
            .any(|p| l.starts_with(p))
            && l.contains(" @")
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    let mut s = State::new("demo", "cpu", opts());
    let mut player = Player::new(trace.clone(), "demo".into());
    let (mut rows_seen, mut frames) = (0, 0);
    while player.pos < trace.events.len() {
        player.step(&mut s);
        frames += 1;
        if frames % 2 == 0 {
            update(&mut s, Msg::Action(Action::PosNext));
        }
        for (w, h) in [(80, 24), (80, 26), (96, 24), (100, 30), (120, 28)] {
            let lines = round_pane_lines(&draw(&s, &Theme::dark(), w, h));
            let mut i = 0;
            while i < lines.len() {
                if !is_head(&lines[i]) {
                    i += 1;
                    continue;
                }
                let mut row = lines[i].clone();
                i += 1;
                while i < lines.len()
                    && !is_head(&lines[i])
                    && !lines[i].starts_with("… (a larger pane")
                    && !lines[i].starts_with("expected tokens")
                    && !lines[i].starts_with("measured tokens")
                {
                    row = format!("{row} {}", lines[i].trim());
                    i += 1;
                }
                rows_seen += 1;
                assert!(
                    endings.iter().any(|e| row.trim_end().ends_with(e.as_str())),
                    "a branch row cut at {w}x{h}: {row:?}\n{}",
                    lines.join("\n")
                );
            }
        }
    }
    assert!(rows_seen > 100, "the demo shows branch rows ({rows_seen})");
}

/// The speed line says, at every width it fits, whether the AR side was measured or
/// priced by the cost model (the 80-column form once dropped it).
#[test]
fn the_speed_line_says_how_the_ar_side_was_had_at_every_width() {
    use specscope::tui::panes::history::speed_line;
    use specscope::tui::state::Rate;
    for measured in [false, true] {
        for (draft_tokens, draft_ms) in [(100, 80.0), (100, 200.0)] {
            let mut s = State::new("m", "cpu", opts());
            s.stats.speed.drafting = Rate {
                tokens: draft_tokens,
                ms: draft_ms,
            };
            if measured {
                s.stats.speed.ar = Rate {
                    tokens: 40,
                    ms: 40.0,
                };
            } else {
                s.stats.speed.ar_model = Some(1.0);
            }
            for width in 20..160 {
                let (text, _) = speed_line(&s, width).unwrap();
                let word = if measured { "measured" } else { "priced" };
                assert!(text.contains(word), "{width}: {text}");
                assert!(text.chars().count() <= width.max(26), "{width}: {text}");
            }
        }
    }
}

/// Every TPF on the screen says which: the session's (status line, history title) or
/// the last rounds' means (the history's rates line), at every width.
#[test]
fn every_tpf_on_screen_is_labelled() {
    let s = demo_played();
    let mut seen = 0;
    for w in (80..=240).step_by(4) {
        for h in [24, 40] {
            let all = screen_text(&draw(&s, &Theme::dark(), w, h));
            for line in all.lines() {
                for (i, _) in line.match_indices("TPF") {
                    seen += 1;
                    let rest = &line[i..];
                    let rest = rest.split('│').next().unwrap_or(rest);
                    assert!(
                        rest.contains("(session)")
                            || rest.contains("means)")
                            || rest.contains("(last "),
                        "an unlabelled TPF at {w}x{h}: {line}"
                    );
                }
            }
        }
    }
    assert!(seen > 80, "{seen}");
}

/// Notices of every length at every width: the status line keeps the mode, the
/// activity and the device; the notice shows whole (in the status line or on the row
/// above), or cut only between words with the messages page named.
#[test]
fn notices_never_hide_the_mode_or_cut_a_word() {
    let words = [
        "recording",
        "saved",
        "to",
        "the",
        "keymap",
        "~/.config/specscope/keymap.toml:3:",
        "unknown",
        "action",
        "`sparkly`;",
        "using",
        "built-in",
        "keys",
        "a",
        "/tmp/specscope/recordings/session-1733402.jsonl",
        "rounds/s",
        "OWNER/NAME",
    ];
    let mut rng = specscope::rng::Rng::new(5);
    let mut next = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..150 {
        let text: Vec<&str> = (0..1 + next(16))
            .map(|_| words[next(words.len())])
            .collect();
        let text = text.join(" ");
        let level = [Level::Info, Level::Warning, Level::Error][case % 3];
        let mut s = State::new("bundled:tiny-nld", "cpu", opts());
        update(
            &mut s,
            Msg::Notice {
                text: text.clone(),
                level,
            },
        );
        let w = 80 + (next(13) * 10) as u16;
        let all = screen_text(&draw(&s, &Theme::dark(), w, 24));
        let rows: Vec<&str> = all.lines().collect();
        let (status, above) = (rows[23], rows[22]);
        for keep in ["RecGuide", "idle", "cpu", "F1 help"] {
            assert!(status.contains(keep), "{keep} hidden at {w}: {status}");
        }
        if status.contains(&text) || above.contains(&text) {
            continue;
        }
        assert!(
            above.contains("(F1: messages page)"),
            "{w}: {above} for {text}"
        );
        let shown = above.trim().trim_end_matches("(F1: messages page)");
        for piece in shown.split_whitespace() {
            let whole = words.contains(&piece)
                || piece == "…"
                || piece.strip_prefix("…/").is_some_and(|n| text.contains(n));
            assert!(whole, "a cut word {piece:?} at {w}: {above}\nfor {text}");
        }
    }
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
    let listed: Vec<Action> = Action::ALL
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
