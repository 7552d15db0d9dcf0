//! The reducer without a terminal: every event kind, actions and their effects, the
//! chat's context window, notices after keys, streaming and scrolling.

use super::*;

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
    let r = s.rounds.list[0].view(&s.stats.summary);
    assert!(s.rounds.list[0].kept.is_some(), "a committed round is kept");
    assert_eq!(
        (r.block_size, r.block.len(), r.risky.to_vec()),
        (Some(8), 8, vec![3, 5])
    );
    assert_eq!(r.branches.len(), 2);
    assert_eq!(r.verdict.unwrap().first_reject, Some(3));
    assert!(matches!(
        r.outcome,
        Some(BranchOutcome::Hit { index: 0, .. })
    ));
    assert_eq!(r.committed, [11, 12, 18]);
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

/// A round being gathered is read from the statistics' assembler (nothing is copied per
/// event); its commit leaves a copy with the pane, and so does a round cut off by its
/// request's end or by the events moving on to another round.
#[test]
fn rounds_are_read_while_gathered_and_kept_once_done() {
    let drafted = |round: usize| DecodeEvent::Drafted {
        req: 1,
        round,
        block: vec![18, 19, 14, 15],
        margins: vec![0.9, 0.2, 0.8],
        risky: vec![2],
        reused: None,
        detail: Vec::new(),
        rows: None,
    };
    let shown = |s: &State, round: usize| {
        let e = s.rounds.list.iter().find(|e| e.round == round).unwrap();
        (e.kept.is_some(), e.view(&s.stats.summary).block.len())
    };
    // Round 1 committed: kept. Round 2 drafted: read from the assembler.
    let mut s = scripted();
    assert_eq!(shown(&s, 1), (true, 8));
    feed(&mut s, 0.07, drafted(2));
    assert_eq!(shown(&s, 2), (false, 4));
    assert_eq!(s.shown_round().map(|r| r.round), Some(2));
    // Stopped before its verdict: the draft stays on screen.
    cancel(&mut s, 0.08);
    assert_eq!(shown(&s, 2), (true, 4));
    // Round 2 drafted, then round 3's events without round 2's commit.
    let mut s = scripted();
    feed(&mut s, 0.07, drafted(2));
    feed(&mut s, 0.08, drafted(3));
    assert_eq!(shown(&s, 2), (true, 4));
    assert_eq!(shown(&s, 3), (false, 4));
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
    assert_eq!(s.shown_round().map(|r| r.round), Some(1));
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
    assert_eq!(s.shown_round().map(|r| r.round), Some(2));
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
