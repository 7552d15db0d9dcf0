//! Everything a user can ask the screen to do. Keymap files name these variants in
//! snake_case; the help screen lists them with the doc line below.

use serde::{Deserialize, Serialize};

/// A user-facing action (bindable in keymap.toml).
// `clap::ValueEnum` only for the list of variants (`Action::all`), written once.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Send the message in the input box.
    Submit,
    /// Insert a line break in the input box.
    Newline,
    /// Close the position inspector, or else stop the answer being generated.
    Stop,
    /// Stop generating; when idle, clear the input; pressed again, quit.
    Interrupt,
    /// Quit specscope.
    Quit,
    /// Open or close this help.
    Help,
    /// Previous message from the input history.
    HistoryPrev,
    /// Next message from the input history.
    HistoryNext,
    /// Scroll the chat up a line (stops following the answer).
    ScrollUp,
    /// Scroll the chat down a line.
    ScrollDown,
    /// Scroll the chat up a page.
    PageUp,
    /// Scroll the chat down a page.
    PageDown,
    /// Jump to the end of the chat and follow the answer again.
    FollowBottom,
    /// Ask the last question again.
    Regenerate,
    /// Clear the chat.
    Clear,
    /// Copy the last answer to the clipboard (OSC 52, works over SSH).
    CopyLast,
    /// Colour the answer by where each token came from.
    ToggleOrigins,
    /// Mouse wheel scrolls the chat, or the mouse selects text (toggle).
    ToggleMouse,
    /// Put the next example prompt in the input box.
    Example,
    /// Pause or resume decoding (or replay).
    TogglePause,
    /// Run one round, then stay paused.
    Step,
    /// Show the previous round in the round pane.
    RoundPrev,
    /// Show the next round (past the last: follow live rounds).
    RoundNext,
    /// Follow the live round again.
    RoundLive,
    /// Select the previous draft position for inspection.
    PosPrev,
    /// Select the next draft position for inspection.
    PosNext,
    /// Switch mode: AR, LinearSS, RecGuide, block diffusion.
    CycleMode,
    /// Smaller fixed block size (turns adaptive off).
    BlockSmaller,
    /// Larger fixed block size (turns adaptive off).
    BlockLarger,
    /// RecGuide: adaptive block size on or off.
    ToggleAdaptive,
    /// RecGuide: overlap branches on or off.
    ToggleOverlap,
    /// Slower: wait longer between rounds (slow motion).
    Slower,
    /// Faster: shorter waits between rounds.
    Faster,
    /// Start or stop recording the session.
    ToggleRecord,
    /// Replay: jump back ten rounds.
    SeekBack,
    /// Replay: jump forward ten rounds.
    SeekForward,
}

impl Action {
    /// Every action, in the order the help lists them.
    /// Every action, in the order the enum declares them (the help's order).
    pub fn all() -> &'static [Action] {
        <Action as clap::ValueEnum>::value_variants()
    }

    /// The keymap name (snake_case, as in keymap.toml).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Whether the key does something in a replay (which is read-only: nothing is
    /// typed, sent or changed) or, with `replay` false, in the live chat (where there is
    /// nothing to seek): the help lists only those.
    pub fn acts_in(self, replay: bool) -> bool {
        let writes = matches!(
            self,
            Action::Submit
                | Action::Newline
                | Action::HistoryPrev
                | Action::HistoryNext
                | Action::Regenerate
                | Action::Clear
                | Action::Example
                | Action::CycleMode
                | Action::BlockSmaller
                | Action::BlockLarger
                | Action::ToggleAdaptive
                | Action::ToggleOverlap
                | Action::ToggleRecord
        );
        let seeks = matches!(self, Action::SeekBack | Action::SeekForward);
        if replay {
            !writes
        } else {
            !seeks
        }
    }

    /// The help line in a replay, where it differs: what the key does there (no
    /// answer to stop, no input to clear).
    pub fn replay_help(self) -> Option<&'static str> {
        match self {
            Action::Stop => Some("close the position inspector"),
            Action::Interrupt => Some("quit (twice)"),
            Action::TogglePause => Some("pause / resume the replay"),
            Action::Step => Some("play one round, then pause"),
            _ => None,
        }
    }

    /// One help line.
    pub fn help(self) -> &'static str {
        match self {
            Action::Submit => "send the message",
            Action::Newline => "new line in the input",
            Action::Stop => "close the position inspector; else stop generating",
            Action::Interrupt => "stop / clear input / quit (twice)",
            Action::Quit => "quit",
            Action::Help => "this help",
            Action::HistoryPrev => "previous input",
            Action::HistoryNext => "next input",
            Action::ScrollUp => "scroll chat up",
            Action::ScrollDown => "scroll chat down",
            Action::PageUp => "chat page up",
            Action::PageDown => "chat page down",
            Action::FollowBottom => "follow the answer",
            Action::Regenerate => "regenerate the last answer",
            Action::Clear => "clear the chat",
            Action::CopyLast => "copy the last answer (OSC 52)",
            Action::ToggleOrigins => "colour answer by origin",
            Action::ToggleMouse => "mouse: wheel scrolls / select text",
            Action::Example => "insert an example prompt",
            Action::TogglePause => "pause / resume",
            Action::Step => "step one round (paused)",
            Action::RoundPrev => "previous round",
            Action::RoundNext => "next round",
            Action::RoundLive => "follow the live round",
            Action::PosPrev => "inspect previous position",
            Action::PosNext => "inspect next position",
            Action::CycleMode => "mode: AR / LinearSS / RecGuide / diffusion",
            Action::BlockSmaller => "smaller block size",
            Action::BlockLarger => "larger block size",
            Action::ToggleAdaptive => "adaptive block size on/off",
            Action::ToggleOverlap => "overlap branches on/off",
            Action::Slower => "slower (slow motion)",
            Action::Faster => "faster (to full speed)",
            Action::ToggleRecord => "start / stop recording",
            Action::SeekBack => "replay: back 10 rounds",
            Action::SeekForward => "replay: forward 10 rounds",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_a_distinct_name_that_parses_back() {
        let mut names = std::collections::BTreeSet::new();
        for &a in Action::all() {
            let n = a.name();
            assert!(!n.is_empty());
            let back: Action =
                serde_json::from_value(serde_json::Value::String(n.clone())).unwrap();
            assert_eq!(back, a);
            assert!(names.insert(n));
        }
    }
}
