//! Drawing the whole screen from a state snapshot (pure: state in, cells out).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::input::Input;
use super::keymap::Keymap;
use super::panes;
use super::state::State;
use super::theme::Theme;

/// The smallest screen the layout works in.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 20;

/// Where each pane goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub chat: Rect,
    pub input: Rect,
    pub round: Rect,
    pub history: Rect,
    pub status: Rect,
}

/// Rows the input box takes for `rows` rows of text (borders included).
fn input_height(rows: usize) -> u16 {
    (rows.clamp(1, 6) as u16) + 2
}

/// Columns of text inside the input box on a screen of `area`.
fn input_width(area: Rect) -> usize {
    usize::from(layout(area, 1).input.width.saturating_sub(2))
}

/// Rows the input text takes, wrapped to the box, on a screen of `area`.
fn input_rows(area: Rect, input: &Input) -> usize {
    input.rows(input_width(area)).0.len()
}

/// Rows of the history pane for `main` rows beside the chat: the round pane comes
/// first (the draft and its verdict must show), the history takes what is left up to
/// 14 rows, never under 8.
fn history_height(main: u16) -> u16 {
    if main >= 34 {
        14
    } else {
        main.saturating_sub(15).clamp(8, 14)
    }
}

pub fn layout(area: Rect, input_rows: usize) -> Areas {
    let [main, status] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(main);
    let [chat, input] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(input_height(input_rows)),
    ])
    .areas(left);
    let [round, history] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(history_height(main.height)),
    ])
    .areas(right);
    Areas {
        chat,
        input,
        round,
        history,
        status,
    }
}

/// The chat text area (inside the border) for a screen size: what `Msg::ChatArea` says.
pub fn chat_text_area(area: Rect, input: &Input) -> Rect {
    layout(area, input_rows(area, input))
        .chat
        .inner(ratatui::layout::Margin::new(1, 1))
}

pub fn draw(f: &mut Frame, s: &State, theme: &Theme, keys: &Keymap) {
    let area = f.area();
    f.render_widget(Block::default().style(theme.background), area);
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "The terminal is too small for specscope: {}x{}, needs at least {MIN_WIDTH}x{MIN_HEIGHT}.\nMake the window bigger (Ctrl+Q quits).",
            area.width, area.height
        );
        f.render_widget(
            Paragraph::new(msg)
                .style(theme.warning)
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let a = layout(area, input_rows(area, &s.chat.input));
    panes::chat::draw(f, a.chat, a.input, s, theme, keys);
    panes::round::draw(f, a.round, s, theme, keys);
    panes::history::draw(f, a.history, s, theme);
    panes::status::draw(f, a.status, s, theme, keys);
    if !panes::status::notice_inline(s, theme, keys, usize::from(area.width)) {
        let row = Rect::new(area.x, a.status.y.saturating_sub(1), area.width, 1);
        panes::status::draw_notice_row(f, row, s, theme, keys);
    }
    if s.help {
        // The panes behind are blanked (the status line stays): bits of them beside
        // the overlay read as stray letters.
        let behind = Rect::new(area.x, area.y, area.width, a.status.y - area.y);
        f.render_widget(Clear, behind);
        f.render_widget(Block::default().style(theme.background), behind);
        panes::help::draw(f, help_area(area), s, theme, keys);
    }
}

/// Where the help overlay goes on a frame of `area`.
pub fn help_area(area: Rect) -> Rect {
    let w = area.width.saturating_sub(4).min(100);
    let h = area.height.saturating_sub(2);
    Rect::new(area.x + (area.width - w) / 2, area.y + 1, w, h)
}
