//! Keys and themes: typing and editing in the input box, the keymap pages of the help,
//! and each theme's styles checked cell by cell.

use super::*;

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
    let all = screen_text(&draw(&s, &Theme::dark(), 120, 60));
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
    let (_, y) = find_text(&buf, "reused branch").expect("the page's last line");
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
