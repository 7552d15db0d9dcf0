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
use crate::engine::events::Origin;
use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::{Role, State, Turn, TurnStatus};
use crate::tui::theme::Theme;

/// Wraps styled pieces to `width` columns at spaces where possible; `\n` breaks.
/// Continuation lines start with `indent` (a list item's hanging indent).
pub fn wrap_indented(
    pieces: &[(String, Style)],
    width: usize,
    indent: usize,
) -> Vec<Line<'static>> {
    let width = width.max(indent + 1);
    let mut lines: Vec<Vec<(String, Style)>> = vec![Vec::new()];
    let mut col = 0usize;
    // Words keep their trailing spaces; a word wider than the line is cut.
    let mut words: Vec<(String, Style, bool)> = Vec::new(); // (text, style, newline-after)
    for (text, style) in pieces {
        let mut word = String::new();
        for c in text.chars() {
            if c == '\n' {
                words.push((std::mem::take(&mut word), *style, true));
            } else {
                word.push(c);
                if c == ' ' {
                    words.push((std::mem::take(&mut word), *style, false));
                }
            }
        }
        if !word.is_empty() {
            words.push((word, *style, false));
        }
    }
    let new_line = |lines: &mut Vec<Vec<(String, Style)>>, col: &mut usize| {
        lines.push(Vec::new());
        if indent > 0 {
            push_piece(lines.last_mut(), " ".repeat(indent), Style::default());
        }
        *col = indent;
    };
    for (word, style, nl) in words {
        let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        let trimmed = word.trim_end_matches(' ');
        let tw: usize = trimmed.chars().map(|c| c.width().unwrap_or(0)).sum();
        if col > indent && col + tw > width {
            new_line(&mut lines, &mut col);
        }
        let mut rest = word.as_str();
        if w > width - indent {
            // Hard-break a long word.
            let mut chunk = String::new();
            for c in rest.chars() {
                let cw = c.width().unwrap_or(0);
                if col + cw > width {
                    push_piece(lines.last_mut(), std::mem::take(&mut chunk), style);
                    new_line(&mut lines, &mut col);
                }
                chunk.push(c);
                col += cw;
            }
            push_piece(lines.last_mut(), chunk, style);
            rest = "";
        }
        if !rest.is_empty() {
            col += w;
            push_piece(lines.last_mut(), rest.to_string(), style);
        }
        if nl {
            lines.push(Vec::new());
            col = 0;
        }
    }
    lines
        .into_iter()
        .map(|spans| {
            Line::from(
                spans
                    .into_iter()
                    .map(|(t, s)| Span::styled(t, s))
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// Wraps styled pieces to `width` columns.
pub fn wrap(pieces: &[(String, Style)], width: usize) -> Vec<Line<'static>> {
    wrap_indented(pieces, width, 0)
}

fn push_piece(line: Option<&mut Vec<(String, Style)>>, text: String, style: Style) {
    if let (Some(line), false) = (line, text.is_empty()) {
        match line.last_mut() {
            Some((t, s)) if *s == style => t.push_str(&text),
            _ => line.push((text, style)),
        }
    }
}

fn origin_style(o: Origin, t: &Theme) -> Style {
    match o {
        Origin::Prefill => t.prefill,
        Origin::Draft => t.accepted,
        Origin::Reused => t.reused,
        Origin::Bonus => t.bonus,
    }
}

/// A turn's header, wrapped to `width`: who, and for an answer what decoded it.
fn header(turn: &Turn, s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    match turn.role {
        Role::User => vec![Line::from(Span::styled("you", t.user))],
        Role::Assistant => {
            let mut spans = vec![("specscope".to_string(), t.assistant)];
            if let Some(info) = turn.req.and_then(|r| s.session.requests.get(&r)) {
                spans.push((format!("  {}", info.label), t.dim));
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
            wrap(&spans, width)
        }
    }
}

/// A list item's marker width (`- `, `* `, `12. `), if the line is one.
fn list_marker(line: &str) -> Option<usize> {
    let body = line.trim_start();
    let lead = line.len() - body.len();
    if body.starts_with("- ") || body.starts_with("* ") {
        return Some(lead + 2);
    }
    let digits = body.chars().take_while(char::is_ascii_digit).count();
    (digits > 0 && body[digits..].starts_with(". ")).then_some(lead + digits + 2)
}

/// Answer text laid out as blocks: fenced code in the code style, unwrapped lines cut
/// at the width; list items with a hanging indent; paragraphs wrapped.
fn blocks(text: &str, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.split('\n') {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            out.push(Line::styled(line.to_string(), t.dim));
            continue;
        }
        if in_code {
            // Code keeps its columns: wrapped hard, never at spaces.
            let mut chunk = String::new();
            let mut col = 0;
            for c in format!("  {line}").chars() {
                let cw = c.width().unwrap_or(0);
                if col + cw > width.max(1) {
                    out.push(Line::styled(std::mem::take(&mut chunk), t.code));
                    col = 0;
                }
                chunk.push(c);
                col += cw;
            }
            out.push(Line::styled(chunk, t.code));
            continue;
        }
        let indent = list_marker(line).unwrap_or(0);
        out.extend(wrap_indented(&[(line.to_string(), t.text)], width, indent));
    }
    out
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

/// The empty chat: what the model is, what to try, how to watch. Examples fill what
/// the pane's `height` leaves after the rest, so the keys always show.
fn intro(s: &State, t: &Theme, keys: &Keymap, width: usize, height: usize) -> Vec<Line<'static>> {
    let mut out = wrap(
        &[(
            "specscope: watch a model draft and verify, round by round".into(),
            t.title,
        )],
        width,
    );
    for l in &s.session.about {
        out.extend(wrap(&[(l.clone(), t.text)], width));
    }
    let hints = intro_keys(t, keys, width, height.saturating_sub(out.len() + 3));
    if !s.session.examples.is_empty() {
        out.push(Line::default());
        out.extend(wrap(
            &[(
                format!(
                    "Try one ({} puts it in the box; again: the next):",
                    keys.hint(Action::Example)
                ),
                t.dim,
            )],
            width,
        ));
        let mut room = height.saturating_sub(out.len() + hints.len());
        for e in s.session.examples.iter().take(6) {
            let lines = wrap_indented(&[(format!("• {e}"), t.user)], width, 2);
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
        let mut title = vec![Span::styled(" chat ", t.title)];
        if top < max_top {
            title.push(Span::styled(
                format!(
                    "[{} lines below · {} follows] ",
                    max_top - top,
                    keys.hint(Action::FollowBottom)
                ),
                t.warning,
            ));
        }
        if chat.origins {
            title.push(Span::styled("accepted draft ", t.accepted));
            title.push(Span::styled("bonus ", t.bonus));
            title.push(Span::styled("reused ", t.reused));
        }
        let shown: Vec<Line> = all.into_iter().skip(top).take(h).collect();
        f.render_widget(
            Paragraph::new(shown).block(pane(Line::from(title), t)),
            area,
        );
    }

    let hint = if s.replaying() {
        " replay: read-only ".to_string()
    } else if s.session.active().is_some() {
        format!(" answering… {} stops ", keys.hint(Action::Stop))
    } else if chat.input.is_empty() && !s.session.examples.is_empty() {
        format!(
            " message · Enter sends · {} example ",
            keys.hint(Action::Example)
        )
    } else {
        " message · Enter sends · Alt+Enter new line ".to_string()
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
        Paragraph::new(text).block(pane(Line::styled(hint, t.dim), t)),
        input_area,
    );
    if !s.help && !s.replaying() {
        let x = inner_in.x + (col as u16).min(inner_in.width.saturating_sub(1));
        let y = inner_in.y + ((row - skip) as u16).min(inner_in.height.saturating_sub(1));
        f.set_cursor_position(Position::new(x, y));
    }
}
