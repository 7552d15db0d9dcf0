//! The rest of the screen rendered into a `TestBackend`: the chat, the status line and
//! its notices, the history pane, titles and summaries at narrow widths, and the
//! too-small message.

use super::*;

#[test]
fn a_small_terminal_gets_a_message_not_garbage() {
    let buf = draw(&scripted(), &Theme::dark(), 60, 15);
    let all: String = (0..15).map(|y| text_at(&buf, 0, y, 60)).collect();
    assert!(all.contains("too small") && all.contains("60x15"), "{all}");
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
        above.contains("recording saved to …/session-20261201.jsonl (F1 ←: messages page)"),
        "{above}"
    );
    update(&mut s, Msg::Action(Action::Help));
    update(&mut s, Msg::HelpPage(2));
    let page = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(page.contains("session-20261201.jsonl"), "{page}");
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
        assert!(
            all.contains("tokens per round") || all.contains("tok/round"),
            "{all}"
        );
        assert!(all.contains("hit"), "{all}");
    }
    // Every round of the demo at 80×24: the verdict wraps between its phrases, never
    // inside one ("bonus" at a line's end, its token on the next).
    let mut seen = 0;
    while s.rounds.shown_index(&s.stats.summary).unwrap_or(0) > 0 {
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
            above.contains("(F1 ←: messages page)"),
            "{w}: {above} for {text}"
        );
        let shown = above.trim().trim_end_matches("(F1 ←: messages page)");
        for piece in shown.split_whitespace() {
            let whole = words.contains(&piece)
                || piece == "…"
                || piece.strip_prefix("…/").is_some_and(|n| text.contains(n));
            assert!(whole, "a cut word {piece:?} at {w}: {above}\nfor {text}");
        }
    }
}
