//! One file per screen region; each draws from the state snapshot only.

pub mod chat;
pub mod help;
pub mod history;
pub mod round;
pub mod status;
pub mod text;

use ratatui::widgets::{Block, Borders};
use unicode_width::UnicodeWidthStr;

use super::theme::Theme;

/// A token's text made visible: spaces as `·`, newlines as `⏎`, tabs as `⇥`, cut to
/// `max` columns with `…`.
pub fn visible_token(text: &str, max: usize) -> String {
    let mut s: String = text
        .chars()
        .map(|c| match c {
            ' ' => '·',
            '\n' => '⏎',
            '\t' => '⇥',
            c if c.is_control() => '�',
            c => c,
        })
        .collect();
    if s.is_empty() {
        s.push('∅');
    }
    if s.width() > max {
        let mut out = String::new();
        for c in s.chars() {
            if out.width() + 1 >= max {
                break;
            }
            out.push(c);
        }
        out.push('…');
        s = out;
    }
    s
}

/// A bordered block with a title in the theme's colours.
pub fn pane<'a>(title: impl Into<ratatui::text::Line<'a>>, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title.into().style(theme.title))
}
