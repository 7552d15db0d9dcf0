//! Keys and the mouse into messages: printable keys type while the input has text;
//! keys the keymap knows become actions; readline keys edit the input.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::TermInput;
use crate::tui::action::Action;
use crate::tui::input::{InputEdit, EDITING};
use crate::tui::keymap::Keymap;
use crate::tui::state::{Msg, State};

/// Turns a key into a message.
pub fn key_msg(s: &State, keys: &Keymap, key: &KeyEvent) -> Option<Msg> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if s.help {
        match key.code {
            KeyCode::Esc | KeyCode::Char('?') => return Some(Msg::Action(Action::Help)),
            KeyCode::Left | KeyCode::BackTab => return Some(Msg::HelpPage(-1)),
            KeyCode::Right | KeyCode::Tab => return Some(Msg::HelpPage(1)),
            KeyCode::Up => return Some(Msg::HelpScroll(-1)),
            KeyCode::Down => return Some(Msg::HelpScroll(1)),
            KeyCode::PageUp => return Some(Msg::HelpScroll(-10)),
            KeyCode::PageDown | KeyCode::Char(' ') => return Some(Msg::HelpScroll(10)),
            KeyCode::Home => return Some(Msg::HelpScroll(-10_000)),
            _ => {}
        }
        // While the help covers the screen only closing it and quitting act: keys
        // must not type into the hidden input box or change what is behind it.
        return match keys.action(key) {
            Some(a @ (Action::Help | Action::Quit | Action::Interrupt | Action::Stop)) => {
                Some(Msg::Action(a))
            }
            _ => None,
        };
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let action = keys.action(key);
    if let (KeyCode::Char(c), false, false) = (key.code, ctrl, alt) {
        if !s.chat.input.is_empty() || action.is_none() {
            return Some(Msg::Input(InputEdit::Insert(c)));
        }
    }
    if let Some(a) = action {
        return Some(Msg::Action(a));
    }
    let edit = EDITING
        .iter()
        .find(|e| e.matches(key.code, ctrl, alt))
        .map(|e| e.edit.clone())?;
    Some(Msg::Input(edit))
}

/// Turns terminal input into a message.
pub fn input_msg(s: &State, keys: &Keymap, input: TermInput) -> Option<Msg> {
    match input {
        TermInput::Key(k) => key_msg(s, keys, &k),
        TermInput::Paste(p) => Some(Msg::Input(InputEdit::Paste(p))),
        TermInput::Wheel(by) => Some(Msg::Wheel(by)),
        TermInput::Resize => None,
    }
}
