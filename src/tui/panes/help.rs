//! The help overlay, generated from the active keymap (so it never disagrees with it).

use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::keymap::Keymap;
use crate::tui::render::pane;
use crate::tui::theme::Theme;

pub fn draw(f: &mut Frame, area: Rect, t: &Theme, keys: &Keymap) {
    let rows = keys.help_rows();
    let inner = area.inner(Margin::new(1, 1));
    let per_col = usize::from(inner.height.saturating_sub(2)).max(1);
    let two = rows.len() > per_col;
    let col_w = if two {
        usize::from(inner.width / 2)
    } else {
        usize::from(inner.width)
    };
    let mut lines: Vec<Line> = Vec::new();
    let cell = |r: &(String, crate::tui::action::Action, &'static str)| {
        let keys = format!("{:<18}", r.0);
        let help = format!("{:<w$}", r.2, w = col_w.saturating_sub(19));
        vec![
            Span::styled(keys, t.help_key),
            Span::styled(help, t.text),
            Span::raw(" "),
        ]
    };
    let n = if two {
        rows.len().div_ceil(2)
    } else {
        rows.len()
    };
    for i in 0..n {
        let mut spans = cell(&rows[i]);
        if two {
            if let Some(r) = rows.get(i + n) {
                spans.extend(cell(r));
            }
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        "Printable keys act only while the input is empty. Rebind in <config dir>/keymap.toml.",
        t.dim,
    ));
    f.render_widget(
        Paragraph::new(lines).block(pane(" keys (Esc or ? closes) ", t)),
        area,
    );
}
