//! The chat: turns with their answers streaming in (code blocks and lists laid out as
//! blocks, or the text coloured by where each token came from), the model's
//! introduction while the chat is empty, and the input box.

use ratatui::layout::{Margin, Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use super::pane;
use super::text::{wrap, wrap_indented, Fit};
use crate::engine::events::Origin;
use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::{Role, State, Turn, TurnStatus};
use crate::tui::theme::Theme;

fn origin_style(o: Origin, t: &Theme) -> Style {
    match o {
        Origin::Prefill => t.prefill,
        Origin::Draft => t.accepted,
        Origin::Reused => t.reused,
        Origin::Bonus => t.bonus,
        // No verifier judged it: plain text.
        Origin::Diffusion => t.text,
    }
}

/// A turn's header, wrapped to `width`: who, and for an answer what decoded it.
fn header(turn: &Turn, s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    match turn.role {
        Role::User => vec![Line::from(Span::styled("you", t.user))],
        Role::Assistant => {
            let mut spans = vec![("specscope".to_string(), t.assistant)];
            if let Some(info) = turn.req.and_then(|r| s.session.requests.get(&r)) {
                // An answer switched mode part way says both (its rounds differ).
                let label = if info.started == info.label {
                    info.label.clone()
                } else {
                    format!("{} → {}", info.started, info.label)
                };
                spans.push((format!("  {label}"), t.dim));
            }
            let (label, style) = match &turn.status {
                TurnStatus::Streaming => ("  …".to_string(), t.dim),
                TurnStatus::Done(crate::engine::StopReason::Eos) => (String::new(), t.dim),
                TurnStatus::Done(stop) => (format!("  [{}]", stop.describe()), t.warning),
                TurnStatus::Failed(m) => (format!("  [error: {m}]"), t.error),
            };
            if !label.is_empty() {
                spans.push((label, style));
            }
            if let Some(differs) = turn.req.and_then(|r| differs_from_ar(s, r)) {
                spans.push((differs, t.warning));
            }
            wrap(&spans, width)
        }
    }
}

/// Block diffusion is not lossless: where an answer's blocks differ from what AR
/// greedy would have said, its header says in how many (of the rounds still kept).
fn differs_from_ar(s: &State, req: crate::engine::events::RequestId) -> Option<String> {
    let judged: Vec<f64> = s
        .rounds
        .list
        .iter()
        .filter(|e| e.req == req)
        .filter_map(|e| e.view(&s.stats.summary).ar_agreement())
        .collect();
    let differ = judged.iter().filter(|a| **a < 1.0).count();
    (differ > 0).then(|| {
        format!(
            "  [differs from AR greedy in {differ} of {} blocks]",
            judged.len()
        )
    })
}

/// A list item's marker width (`- `, `* `, `12. `), if the line is one.
fn list_marker(line: &str) -> Option<usize> {
    // The line's own leading spaces are not counted: `wrap_indented` adds them.
    let body = line.trim_start();
    if body.starts_with("- ") || body.starts_with("* ") {
        return Some(2);
    }
    let digits = body.chars().take_while(char::is_ascii_digit).count();
    (digits > 0 && body[digits..].starts_with(". ")).then_some(digits + 2)
}

/// Answer text laid out as blocks: fenced code in the code style, unwrapped lines cut
/// at the width; list items with a hanging indent; paragraphs wrapped.
fn blocks(text: &str, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.split('\n') {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            // The fence as a rule: the language where one is named (the raw text is
            // what Ctrl+Y copies).
            in_code = !in_code;
            let lang = lang.trim();
            let rule = if in_code && !lang.is_empty() {
                format!("┄┄ {lang}")
            } else {
                "┄┄".to_string()
            };
            out.push(Line::styled(rule, t.dim));
            continue;
        }
        if in_code {
            // Code wraps after its last space that fits, as an editor's soft wrap
            // does (mid-identifier only where a word is wider than the row); a
            // continuation row starts at the line's own indentation (at most half the
            // width).
            let full = format!("  {line}");
            let lead = full
                .chars()
                .take_while(|c| *c == ' ')
                .count()
                .min(width / 2);
            let mut chunk = String::new();
            let mut col = 0;
            // Where the row may break: the byte after its last space that follows
            // some of the row's text.
            let mut brk: Option<usize> = None;
            let mut text_seen = false;
            // After a break, spaces are skipped: a row starts at a character.
            let mut fresh = false;
            for c in full.chars() {
                let cw = c.width().unwrap_or(0);
                if col + cw > width.max(1) && col > lead {
                    let tail = brk.map(|b| chunk.split_off(b)).unwrap_or_default();
                    out.push(Line::styled(chunk.trim_end().to_string(), t.code));
                    chunk = " ".repeat(lead);
                    chunk.push_str(&tail);
                    col = chunk.chars().map(|c| c.width().unwrap_or(0)).sum();
                    brk = None;
                    text_seen = !tail.is_empty();
                    fresh = tail.is_empty();
                }
                if c == ' ' {
                    if fresh {
                        continue;
                    }
                    chunk.push(c);
                    col += cw;
                    if text_seen {
                        brk = Some(chunk.len());
                    }
                    continue;
                }
                fresh = false;
                text_seen = true;
                chunk.push(c);
                col += cw;
            }
            out.push(Line::styled(chunk, t.code));
            continue;
        }
        let indent = list_marker(line).unwrap_or(0);
        out.extend(wrap_indented(&inline_code(line, t), width, indent));
    }
    out
}

/// A line of prose with its `inline code` in the code style, the backticks dropped;
/// a line with an unpaired backtick (an answer still streaming) stays as written.
fn inline_code(line: &str, t: &Theme) -> Vec<(String, Style)> {
    let parts: Vec<&str> = line.split('`').collect();
    if parts.len().is_multiple_of(2) || parts.len() == 1 {
        return vec![(line.to_string(), t.text)];
    }
    parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| (p.to_string(), if i % 2 == 1 { t.code } else { t.text }))
        .collect()
}

/// One turn's wrapped lines at `width` columns: header, text, a blank line.
fn turn_lines(turn: &Turn, s: &State, width: u16, t: &Theme) -> Vec<Line<'static>> {
    let w = usize::from(width);
    let mut out = header(turn, s, t, w);
    let text = turn.text.trim_end_matches('\n');
    if s.chat.origins && !turn.pieces.is_empty() {
        let pieces: Vec<(String, Style)> = turn
            .pieces
            .iter()
            .map(|(p, o)| (p.clone(), origin_style(*o, t)))
            .collect();
        out.extend(wrap(&pieces, w));
    } else if turn.role == Role::Assistant {
        out.extend(blocks(text, w, t));
    } else {
        out.extend(wrap(&[(text.to_string(), t.text)], w));
    }
    out.push(Line::default());
    out
}

/// Every wrapped line of the transcript at `width` columns.
pub fn lines(s: &State, width: u16, t: &Theme) -> Vec<Line<'static>> {
    s.chat
        .transcript
        .iter()
        .flat_map(|turn| turn_lines(turn, s, width, t))
        .collect()
}

/// The last `height` wrapped lines (at least), wrapping only the turns they need: the
/// view while following, drawn every frame however long the chat grows.
fn tail_lines(s: &State, width: u16, height: usize, t: &Theme) -> Vec<Line<'static>> {
    let mut turns: Vec<Vec<Line<'static>>> = Vec::new();
    let mut n = 0;
    for turn in s.chat.transcript.iter().rev() {
        if n >= height {
            break;
        }
        let l = turn_lines(turn, s, width, t);
        n += l.len();
        turns.push(l);
    }
    turns.into_iter().rev().flatten().collect()
}

/// Wrapped lines at `width` (the app tells the reducer, which bounds the scroll).
pub fn line_count(s: &State, width: u16, t: &Theme) -> usize {
    lines(s, width, t).len()
}

/// The empty chat: what the model is, what to try, how to watch. The model's lines
/// show in order while a first example and the keys still fit below them; examples
/// fill what the pane's `height` leaves after the rest, so the keys always show.
fn intro(s: &State, t: &Theme, keys: &Keymap, width: usize, height: usize) -> Vec<Line<'static>> {
    let mut out = wrap(
        &[(
            "specscope: watch a model draft and verify, round by round".into(),
            t.title,
        )],
        width,
    );
    let example = |e: &str| wrap_indented(&[(format!("• {e}"), t.user)], width, 2);
    let mut try_one = Vec::new();
    if let Some(first) = s.session.examples.first() {
        try_one.push(Line::default());
        try_one.extend(wrap(
            &[(
                format!(
                    "Try one ({} puts it in the box; again: the next):",
                    keys.hint(Action::Example)
                ),
                t.dim,
            )],
            width,
        ));
        // Reserved below the model's lines: the header and a first example.
        let reserve = try_one.len() + example(first).len();
        let compact_keys = intro_keys(t, keys, width, 0).len();
        for l in &s.session.about {
            let lines = wrap(&[(l.clone(), t.text)], width);
            if out.len() + lines.len() + reserve + compact_keys > height {
                break;
            }
            out.extend(lines);
        }
    } else {
        for l in &s.session.about {
            out.extend(wrap(&[(l.clone(), t.text)], width));
        }
    }
    let hints = intro_keys(t, keys, width, height.saturating_sub(out.len() + 3));
    if !s.session.examples.is_empty() {
        out.extend(try_one);
        let mut room = height.saturating_sub(out.len() + hints.len());
        for e in s.session.examples.iter().take(6) {
            let lines = example(e);
            if lines.len() > room {
                break;
            }
            room -= lines.len();
            out.extend(lines);
        }
    }
    out.extend(hints);
    out
}

/// The intro's lines on how to watch, after a blank line: sentences where the pane has
/// room for them and an example after them, else one compact line.
fn intro_keys(t: &Theme, keys: &Keymap, width: usize, room: usize) -> Vec<Line<'static>> {
    let mut out = vec![Line::default()];
    let k = |a| keys.hint(a);
    let compact = format!(
        "{} faster · {} pause · {} step · {} help",
        k(Action::Faster),
        k(Action::TogglePause),
        k(Action::Step),
        k(Action::Help)
    );
    let mut full = out.clone();
    for l in [
        format!(
            "Answers play in slow motion: {} faster (to full speed), {} slower.",
            k(Action::Faster),
            k(Action::Slower)
        ),
        format!(
            "{} pauses, {} steps one round, {} walks back, {} inspects a position.",
            k(Action::TogglePause),
            k(Action::Step),
            k(Action::RoundPrev),
            k(Action::PosNext)
        ),
        format!("{} explains every figure on the screen.", k(Action::Help)),
    ] {
        full.extend(wrap(&[(l, t.dim)], width));
    }
    if full.len() + 2 <= room {
        return full;
    }
    out.extend(wrap(&[(compact, t.dim)], width));
    out
}

pub fn draw(f: &mut Frame, area: Rect, input_area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let inner = area.inner(Margin::new(1, 1));
    let h = usize::from(inner.height);
    let chat = &s.chat;
    if chat.transcript.is_empty() && !s.replaying() {
        let lines = intro(s, t, keys, usize::from(inner.width), h);
        f.render_widget(Paragraph::new(lines).block(pane(" chat ", t)), area);
    } else {
        let all = if chat.following() {
            tail_lines(s, inner.width, h, t)
        } else {
            lines(s, inner.width, t)
        };
        let max_top = all.len().saturating_sub(h);
        let top = max_top.saturating_sub(chat.scroll_back);
        let mut title = Fit::default().part([" chat "], t.title);
        if top < max_top {
            let below = max_top - top;
            title = title.part(
                [
                    format!(
                        "[{below} lines below · {} follows] ",
                        keys.hint(Action::FollowBottom)
                    ),
                    format!("[{below} below] "),
                ],
                t.warning,
            );
        }
        if chat.origins {
            title = title
                .part(["accepted draft ", "draft "], t.accepted)
                .part(["bonus "], t.bonus)
                .part(["reused ", ""], t.reused);
        }
        let shown: Vec<Line> = all.into_iter().skip(top).take(h).collect();
        f.render_widget(
            Paragraph::new(shown).block(pane(title.title(area.width), t)),
            area,
        );
    }

    // How to leave, where a newcomer looks first: kept before the other hints.
    let quit = [
        format!("· {} quits ", keys.hint(Action::Quit)),
        String::new(),
    ];
    let hint = if s.replaying() {
        Fit::default()
            .part([" replay: read-only "], t.title)
            .part(quit, t.title)
    } else if s.session.active().is_some() {
        Fit::default()
            .part([" answering… "], t.title)
            .part([format!("{} stops ", keys.hint(Action::Stop))], t.title)
    } else {
        let next = if chat.input.is_empty() && !s.session.examples.is_empty() {
            format!("· {} example ", keys.hint(Action::Example))
        } else {
            "· Alt+Enter new line ".to_string()
        };
        // The quit hint is decided with the first part: shown whole before the word
        // "message" is.
        Fit::default()
            .tiered([" message · Enter sends ", " Enter sends "], t.title, 0, 0)
            .ranked([next, String::new()], t.title, 2)
            .tiered(quit, t.title, 1, 0)
    };
    let inner_in = input_area.inner(Margin::new(1, 1));
    // Long lines wrap inside the box, and it scrolls to keep the cursor's row in view.
    let (rows, (row, col)) = chat.input.rows(usize::from(inner_in.width));
    let skip = row.saturating_sub(usize::from(inner_in.height.max(1)) - 1);
    let text: Vec<Line> = rows
        .into_iter()
        .skip(skip)
        .map(|l| Line::styled(l, t.text))
        .collect();
    f.render_widget(
        Paragraph::new(text).block(pane(hint.title(input_area.width), t)),
        input_area,
    );
    if !s.help && !s.replaying() {
        let x = inner_in.x + (col as u16).min(inner_in.width.saturating_sub(1));
        let y = inner_in.y + ((row - skip) as u16).min(inner_in.height.saturating_sub(1));
        f.set_cursor_position(Position::new(x, y));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Color;

    fn texts(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn fenced_code_continues_at_its_indentation_from_a_character() {
        let t = Theme::dark();
        let lines = blocks("```\n  abcdef gh\n```", 10, &t);
        // Two columns of the pane's own indent, two of the line's: a break on the
        // space before "gh" starts the next row at "gh", under "abcdef".
        assert_eq!(texts(&lines), ["┄┄", "    abcdef", "    gh", "┄┄"]);
    }

    #[test]
    fn fenced_code_wraps_after_a_space_and_mid_word_only_when_it_must() {
        let t = Theme::dark();
        let code = "```\n    \"\"\"Return the elements of numbers in reverse order.\"\"\"\n    x = averyveryverylongidentifier\n```";
        let lines = blocks(code, 30, &t);
        assert_eq!(
            texts(&lines),
            [
                "┄┄",
                "      \"\"\"Return the elements",
                "      of numbers in reverse",
                "      order.\"\"\"",
                "      x =",
                "      averyveryverylongidentif",
                "      ier",
                "┄┄"
            ]
        );
        assert!(texts(&lines).iter().all(|l| l.chars().count() <= 30));
    }

    #[test]
    fn a_nested_list_item_continues_under_its_text() {
        let t = Theme::dark();
        let lines = blocks("- top item\n  - inner one two", 12, &t);
        // The inner item's text starts at column 4; so do its continuation rows.
        assert_eq!(texts(&lines), ["- top item", "  - inner ", "    one two"]);
    }

    #[test]
    fn styled_pieces_inside_a_word_wrap_together() {
        // Tokens coloured by origin: "away", " 10", " marbles", ",", " so" — the comma
        // is its own piece but belongs to "marbles,".
        let (a, b) = (
            Style::default().fg(Color::Green),
            Style::default().fg(Color::Blue),
        );
        let pieces: Vec<(String, Style)> = [
            ("away", a),
            (" 10", b),
            (" marbles", a),
            (",", b),
            (" so", a),
        ]
        .iter()
        .map(|(t, s)| (t.to_string(), *s))
        .collect();
        // "marbles" alone would end at the edge; the comma must not start a row.
        let lines = wrap(&pieces, 15);
        assert_eq!(texts(&lines), ["away 10 ", "marbles, so"]);
        // Each keeps its own style.
        let row = &lines[1].spans;
        assert_eq!((row[0].content.as_ref(), row[0].style), ("marbles", a));
        assert_eq!((row[1].content.as_ref(), row[1].style), (",", b));
    }

    #[test]
    fn a_wrapped_line_of_code_keeps_its_indentation() {
        let code = "def f(xs):\n    return [x * 7 for x in xs if x > 2]\nprint(f([1]))";
        let lines = wrap(&[(code.to_string(), Style::default())], 24);
        assert_eq!(
            texts(&lines),
            [
                "def f(xs):",
                "    return [x * 7 for x ",
                "    in xs if x > 2]",
                "print(f([1]))",
            ]
        );
        // A list item's indent adds to the line's own; prose has none of its own.
        let lines = wrap_indented(&[("• one two three".to_string(), Style::default())], 8, 2);
        assert_eq!(texts(&lines), ["• one ", "  two ", "  three"]);
        // A row that ends exactly at the edge does not carry the spaces after it over.
        let lines = wrap(&[("abcd  efg".to_string(), Style::default())], 4);
        assert_eq!(texts(&lines)[1], "efg");
        // The hang is at most half the width, so deep code still shows its words.
        let deep = format!("{}alpha beta gamma", " ".repeat(12));
        let lines = wrap(&[(deep, Style::default())], 20);
        assert_eq!(
            texts(&lines),
            [
                format!("{}alpha ", " ".repeat(12)),
                format!("{}beta gamma", " ".repeat(10))
            ]
        );
    }

    /// Answers with inline code and fenced blocks in any language, at any width: no
    /// backtick shows, every code word is in the code style, the language is named,
    /// and prose words stay whole.
    #[test]
    fn inline_code_and_fences_show_as_styles_not_backticks() {
        let t = Theme::dark();
        let names = ["mean", "values", "x", "sum_of_list", "len(xs)", "return"];
        let prose = ["The", "function", "takes", "a", "list", "called", "and"];
        let mut rng = crate::rng::Rng::new(3);
        let mut next = |n: usize| (rng.next_u64() % n as u64) as usize;
        for _ in 0..200 {
            let mut words = Vec::new();
            let mut code_words = Vec::new();
            for _ in 0..1 + next(12) {
                if next(3) == 0 {
                    let c = names[next(names.len())];
                    code_words.push(c);
                    words.push(format!("`{c}`"));
                } else {
                    words.push(prose[next(prose.len())].to_string());
                }
            }
            let lang = ["python", "rust", ""][next(3)];
            let text = format!("{}\n```{lang}\nx = 1\n```", words.join(" "));
            let width = 12 + next(50);
            let lines = blocks(&text, width, &t);
            let all = texts(&lines).join("\n");
            assert!(!all.contains('`'), "{width}: {all}");
            if !lang.is_empty() {
                assert!(all.contains(&format!("┄┄ {lang}")), "{all}");
            }
            let spans: Vec<_> = lines.iter().flat_map(|l| l.spans.clone()).collect();
            for c in &code_words {
                assert!(
                    spans
                        .iter()
                        .any(|s| s.content.trim() == *c && s.style == t.code),
                    "{c} not in the code style at {width}: {spans:?}"
                );
            }
            for w in all.split_whitespace() {
                assert!(
                    prose.contains(&w)
                        || names.contains(&w)
                        || ["┄┄", lang, "x", "=", "1"].contains(&w),
                    "a cut word {w:?} at {width}: {all}"
                );
            }
        }
    }
}
