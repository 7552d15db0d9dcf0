//! The chat: the transcript as events build it, the input box, scrolling.

use std::collections::HashSet;

use crate::engine::events::{Origin, RequestId, StopReason};
use crate::model::ChatMessage;
use crate::tui::input::Input;

/// Who said a chat turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// How an answer stands.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnStatus {
    Streaming,
    Done(StopReason),
    Failed(String),
}

/// One chat turn; answers keep their text in pieces by origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub role: Role,
    pub req: Option<RequestId>,
    pub text: String,
    pub pieces: Vec<(String, Origin)>,
    pub status: TurnStatus,
}

impl Turn {
    pub fn user(req: RequestId, text: String) -> Self {
        Self {
            role: Role::User,
            req: Some(req),
            text,
            pieces: Vec::new(),
            status: TurnStatus::Done(StopReason::Eos),
        }
    }

    fn answer(req: RequestId) -> Self {
        Self {
            role: Role::Assistant,
            req: Some(req),
            text: String::new(),
            pieces: Vec::new(),
            status: TurnStatus::Streaming,
        }
    }
}

/// The chat pane's state.
#[derive(Debug, Clone)]
pub struct Chat {
    pub transcript: Vec<Turn>,
    /// Requests whose answers were taken off the transcript (regenerated, cleared):
    /// their late events change nothing.
    pub dropped: HashSet<RequestId>,
    /// Lines scrolled up from the end; 0 follows the answer.
    pub scroll_back: usize,
    /// The text area (columns, rows) and how many wrapped lines the transcript has
    /// there, as the last frame measured them.
    pub area: (u16, u16),
    pub lines: Option<usize>,
    pub input: Input,
    /// Colour answers by where each token came from.
    pub origins: bool,
    /// The mouse wheel scrolls the chat (off: the terminal selects text).
    pub mouse: bool,
    /// Which example prompt Tab inserts next.
    pub next_example: usize,
}

impl Default for Chat {
    fn default() -> Self {
        Self {
            transcript: Vec::new(),
            dropped: HashSet::new(),
            scroll_back: 0,
            area: (80, 20),
            lines: None,
            input: Input::default(),
            origins: false,
            mouse: true,
            next_example: 0,
        }
    }
}

impl Chat {
    pub fn following(&self) -> bool {
        self.scroll_back == 0
    }

    /// The answer turn of `req`, created at the end when new; `None` for a dropped one.
    pub fn answer_of(&mut self, req: RequestId) -> Option<&mut Turn> {
        if self.dropped.contains(&req) {
            return None;
        }
        let pos = self
            .transcript
            .iter()
            .rposition(|t| t.role == Role::Assistant && t.req == Some(req));
        let i = match pos {
            Some(i) => i,
            None => {
                self.transcript.push(Turn::answer(req));
                self.transcript.len() - 1
            }
        };
        Some(&mut self.transcript[i])
    }

    /// Drops the turns from `from` on, remembering whose answers they were.
    pub fn truncate(&mut self, from: usize) {
        for t in self.transcript.drain(from..) {
            if let (Role::Assistant, Some(r)) = (t.role, t.req) {
                self.dropped.insert(r);
            }
        }
    }

    /// The last answer with text.
    pub fn last_answer(&self) -> Option<&str> {
        self.transcript
            .iter()
            .rev()
            .find(|t| t.role == Role::Assistant && !t.text.is_empty())
            .map(|t| t.text.as_str())
    }

    /// Scrolls by `by` lines (negative: up), within what the last frame measured.
    pub fn scroll(&mut self, by: i64) {
        let h = usize::from(self.area.1);
        let max = self.lines.map_or(usize::MAX, |n| n.saturating_sub(h));
        let back = self.scroll_back as i64 - by;
        self.scroll_back = (back.max(0) as usize).min(max);
    }
}

/// Turns as chat messages (answers that failed are left out).
pub fn messages_of(turns: &[Turn]) -> Vec<ChatMessage> {
    turns
        .iter()
        .filter(|t| !matches!(t.status, TurnStatus::Failed(_)))
        .map(|t| {
            let role = if t.role == Role::User {
                "user"
            } else {
                "assistant"
            };
            ChatMessage::new(role, &t.text)
        })
        .collect()
}
