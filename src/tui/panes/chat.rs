//! The chat: turns with their answers streaming in, optionally coloured by where each
//! token came from, and the input box.

use ratatui::layout::{Margin, Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use crate::engine::events::Origin;
use crate::engine::StopReason;
use crate::tui::render::pane;
use crate::tui::state::{Role, State, Turn, TurnStatus};
use crate::tui::theme::Theme;

/// Wraps styled pieces to `width` columns at spaces where possible; `\n` breaks.
pub fn wrap(pieces: &[(String, Style)], width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
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
    for (word, style, nl) in words {
        let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        let trimmed = word.trim_end_matches(' ');
        let tw: usize = trimmed.chars().map(|c| c.width().unwrap_or(0)).sum();
        if col > 0 && col + tw > width {
            lines.push(Vec::new());
            col = 0;
        }
        let mut rest = word.as_str();
        if w > width {
            // Hard-break a long word.
            let mut chunk = String::new();
            for c in rest.chars() {
                let cw = c.width().unwrap_or(0);
                if col + cw > width {
                    push_piece(lines.last_mut(), std::mem::take(&mut chunk), style);
                    lines.push(Vec::new());
                    col = 0;
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

fn header(turn: &Turn, s: &State, t: &Theme) -> Line<'static> {
    match turn.role {
        Role::User => Line::from(Span::styled("you", t.user)),
        Role::Assistant => {
            let mut spans = vec![Span::styled("specscope", t.assistant)];
            if let Some(info) = turn.req.and_then(|r| s.requests.get(&r)) {
                spans.push(Span::styled(
                    format!("  {} {}", mode_name(info.mode), info.block_policy),
                    t.dim,
                ));
            }
            let (label, style) = match &turn.status {
                TurnStatus::Streaming => ("  …".to_string(), t.dim),
                TurnStatus::Done(StopReason::Eos) => (String::new(), t.dim),
                TurnStatus::Done(StopReason::MaxTokens) => ("  [token limit]".into(), t.warning),
                TurnStatus::Done(StopReason::Context) => ("  [context full]".into(), t.warning),
                TurnStatus::Done(StopReason::Cancelled) => ("  [stopped]".into(), t.warning),
                TurnStatus::Failed(m) => (format!("  [error: {m}]"), t.error),
            };
            if !label.is_empty() {
                spans.push(Span::styled(label, style));
            }
            Line::from(spans)
        }
    }
}

pub fn mode_name(m: crate::engine::Mode) -> &'static str {
    match m {
        crate::engine::Mode::Ar => "AR",
        crate::engine::Mode::Linear => "LinearSS",
        crate::engine::Mode::Recguide => "RecGuide",
    }
}

/// One turn's wrapped lines at `width` columns: header, text, a blank line.
fn turn_lines(turn: &Turn, s: &State, width: u16, t: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![header(turn, s, t)];
    let text = turn.text.trim_end_matches('\n');
    let pieces: Vec<(String, Style)> = if s.origins && !turn.pieces.is_empty() {
        turn.pieces
            .iter()
            .map(|(p, o)| (p.clone(), origin_style(*o, t)))
            .collect()
    } else {
        vec![(text.to_string(), t.text)]
    };
    out.extend(wrap(&pieces, usize::from(width)));
    out.push(Line::default());
    out
}

/// Every wrapped line of the transcript at `width` columns.
pub fn lines(s: &State, width: u16, t: &Theme) -> Vec<Line<'static>> {
    s.transcript
        .iter()
        .flat_map(|turn| turn_lines(turn, s, width, t))
        .collect()
}

/// The last `height` wrapped lines (at least), wrapping only the turns they need: the
/// view while following, drawn every frame however long the chat grows.
fn tail_lines(s: &State, width: u16, height: usize, t: &Theme) -> Vec<Line<'static>> {
    let mut turns: Vec<Vec<Line<'static>>> = Vec::new();
    let mut n = 0;
    for turn in s.transcript.iter().rev() {
        if n >= height {
            break;
        }
        let l = turn_lines(turn, s, width, t);
        n += l.len();
        turns.push(l);
    }
    turns.into_iter().rev().flatten().collect()
}

/// Wrapped lines at `width` (the reducer scrolls with it).
pub fn line_count(s: &State, width: u16) -> usize {
    lines(s, width, &Theme::dark()).len()
}

pub fn draw(f: &mut Frame, area: Rect, input_area: Rect, s: &State, t: &Theme) {
    let inner = area.inner(Margin::new(1, 1));
    let h = usize::from(inner.height);
    let all = if s.follow {
        tail_lines(s, inner.width, h, t)
    } else {
        lines(s, inner.width, t)
    };
    let max_top = all.len().saturating_sub(h);
    let top = if s.follow {
        max_top
    } else {
        s.scroll_top.min(max_top)
    };
    let mut title = vec![Span::styled(" chat ", t.title)];
    if !s.follow && top < max_top {
        title.push(Span::styled(
            format!("[{} lines below · Ctrl+G follows] ", max_top - top),
            t.warning,
        ));
    }
    if s.origins {
        title.push(Span::styled("draft ", t.accepted));
        title.push(Span::styled("bonus ", t.bonus));
        title.push(Span::styled("reused ", t.reused));
    }
    let shown: Vec<Line> = all.into_iter().skip(top).take(h).collect();
    f.render_widget(
        Paragraph::new(shown).block(pane(Line::from(title), t)),
        area,
    );

    let hint = if s.replay.is_some() {
        " replay (read-only) "
    } else if s.active().is_some() {
        " answering… Esc stops "
    } else {
        " message · Enter sends · Alt+Enter new line "
    };
    let text: Vec<Line> = s
        .input
        .text
        .split('\n')
        .map(|l| Line::styled(l.to_string(), t.text))
        .collect();
    let inner_in = input_area.inner(Margin::new(1, 1));
    let (line, col) = s.input.cursor_line_col();
    let skip = line.saturating_sub(usize::from(inner_in.height.max(1)) - 1);
    f.render_widget(
        Paragraph::new(text.into_iter().skip(skip).collect::<Vec<_>>())
            .block(pane(Line::styled(hint, t.dim), t)),
        input_area,
    );
    if !s.help && s.replay.is_none() {
        let x = inner_in.x + (col as u16).min(inner_in.width.saturating_sub(1));
        let y = inner_in.y + ((line - skip) as u16).min(inner_in.height.saturating_sub(1));
        f.set_cursor_position(Position::new(x, y));
    }
}
