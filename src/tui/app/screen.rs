//! The terminal the app draws on, and what goes to the real terminal besides frames
//! (synchronized updates, the clipboard, mouse capture).

use anyhow::{bail, Result};
use ratatui::backend::Backend;
use ratatui::layout::Rect;
use ratatui::Terminal;

use super::Ui;
use crate::tui::state::{update, Msg, State};
use crate::tui::{clipboard, panes, render};

/// A terminal to draw on, and how to talk to the real one.
pub struct Screen<B: Backend> {
    pub terminal: Terminal<B>,
    /// A real terminal: wrap frames in synchronized-update markers, copy with OSC 52 or
    /// tmux, capture the mouse.
    pub real: bool,
}

impl<B: Backend> Screen<B> {
    pub fn new(terminal: Terminal<B>, real: bool) -> Self {
        Self { terminal, real }
    }

    fn area(&mut self) -> Rect {
        self.terminal
            .size()
            .map(|s| Rect::new(0, 0, s.width, s.height))
            .unwrap_or_default()
    }

    /// Draws one frame; tells the reducer first what the chat area holds now.
    pub fn draw(&mut self, s: &mut State, ui: &Ui) -> Result<()> {
        if s.help {
            let help = render::help_area(self.area());
            let max = panes::help::max_scroll(help, s, &ui.theme, &ui.keymap);
            if s.help_scroll > max {
                update(s, Msg::HelpScrollMax(max));
            }
        }
        let chat = render::chat_text_area(self.area(), &s.chat.input);
        // Scrolled back, the reducer needs the transcript's length to bound the scroll;
        // following, nothing depends on it (and wrapping all of it every frame would
        // cost a long chat dearly).
        let lines =
            (!s.chat.following()).then(|| panes::chat::line_count(s, chat.width, &ui.theme));
        if (chat.width, chat.height) != s.chat.area || lines != s.chat.lines {
            update(
                s,
                Msg::ChatArea {
                    width: chat.width,
                    height: chat.height,
                    lines,
                },
            );
        }
        if self.real {
            let _ = crossterm::execute!(
                std::io::stdout(),
                crossterm::terminal::BeginSynchronizedUpdate
            );
        }
        let r = self
            .terminal
            .draw(|f| render::draw(f, s, &ui.theme, &ui.keymap));
        if self.real {
            let _ = crossterm::execute!(
                std::io::stdout(),
                crossterm::terminal::EndSynchronizedUpdate
            );
        }
        if let Err(e) = r {
            bail!("cannot draw on the terminal: {e}");
        }
        Ok(())
    }

    /// Copies `text`; says what was done (for the status line).
    pub fn copy(&mut self, text: &str) -> String {
        if !self.real {
            return "nothing copied (no terminal)".into();
        }
        clipboard::copy(text)
    }

    /// Captures the mouse (the wheel scrolls the chat) or releases it (the terminal
    /// selects text).
    pub fn set_mouse(&mut self, on: bool) {
        if self.real {
            let _ = if on {
                crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture)
            } else {
                crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture)
            };
        }
    }
}
