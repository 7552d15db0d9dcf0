//! What the keys do to the state (and ask of the app).

use super::{
    messages_of, Effect, HelpPage, Level, RequestInfo, Role, State, Topic, BLOCK_STEPS,
    LIVE_PACES_MS, REPLAY_PACES,
};
use crate::engine::options::Blocks;
use crate::engine::Mode;
use crate::model::ChatMessage;
use crate::tui::action::Action;
use crate::tui::input::InputEdit;

fn read_only(s: &mut State) -> bool {
    if s.replaying() {
        s.notice("a replay is read-only", Level::Warning);
        true
    } else {
        false
    }
}

fn submit(s: &mut State, text: String, history_end: usize, regenerate: bool) -> Effect {
    let mut messages = messages_of(&s.chat.transcript[..history_end]);
    if let Some(n) = s.session.context_turns {
        // The last n exchanges, each from its user message on.
        let users: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i].role == "user")
            .collect();
        let from = match n {
            0 => messages.len(),
            n => users.len().checked_sub(n).map_or(0, |k| users[k]),
        };
        messages.drain(..from);
    }
    messages.push(ChatMessage::new("user", &text));
    // A new answer is what one wants to watch: the round pane follows it again, and
    // the inspector (a position of the old round) closes.
    s.rounds.view = None;
    s.rounds.selected = None;
    Effect::Submit {
        messages,
        text,
        regenerate,
        options: s.session.options.clone(),
    }
}

#[allow(clippy::too_many_lines)] // the reducer's one arm per action
pub(super) fn on_action(s: &mut State, a: Action) -> Vec<Effect> {
    if a != Action::Interrupt && a != Action::Quit {
        s.status.clear(Topic::Quit);
    }
    let mut fx = Vec::new();
    match a {
        Action::Submit => {
            if read_only(s) || s.chat.input.text.trim().is_empty() {
                return fx;
            }
            if let Some(req) = s.session.active() {
                let key = s.keys.key(Action::Stop).to_string();
                // Info: feedback on a key, not a warning to repeat at exit.
                s.status.notice(
                    format!("still answering (request {req}); {key} stops it"),
                    Level::Info,
                    Topic::Busy,
                );
                return fx;
            }
            let text = s.chat.input.take();
            let end = s.chat.transcript.len();
            fx.push(submit(s, text, end, false));
        }
        Action::Regenerate => {
            if read_only(s) {
                return fx;
            }
            let Some(i) = s.chat.transcript.iter().rposition(|t| t.role == Role::User) else {
                s.notice("nothing to regenerate", Level::Info);
                return fx;
            };
            if let Some(req) = s.session.active() {
                fx.push(Effect::Cancel(req));
            }
            let text = s.chat.transcript[i].text.clone();
            fx.push(submit(s, text, i, true));
        }
        Action::Newline => s.chat.input.newline(),
        // Esc closes what is open first (one reaches for it to dismiss the inspector,
        // often while paused), and stops the answer only when nothing is.
        Action::Stop => match s.session.active() {
            _ if s.rounds.selected.is_some() => s.rounds.selected = None,
            Some(req) if !s.replaying() => {
                fx.push(Effect::Cancel(req));
                s.notice("stopped", Level::Info);
            }
            _ => s.help = false,
        },
        Action::Interrupt => {
            if s.status.quit_armed() {
                s.quit = true;
                fx.push(Effect::Quit);
            } else if let (Some(req), false) = (s.session.active(), s.replaying()) {
                // Stop; a second press right after quits.
                fx.push(Effect::Cancel(req));
                let key = s.keys.key(Action::Interrupt).to_string();
                s.status.notice(
                    format!("stopped; {key} again quits"),
                    Level::Info,
                    Topic::Quit,
                );
            } else if !s.chat.input.is_empty() {
                s.chat.input.clear();
            } else {
                let key = s.keys.key(Action::Interrupt).to_string();
                s.status.notice(
                    format!("press {key} again to quit"),
                    Level::Info,
                    Topic::Quit,
                );
            }
        }
        Action::Quit => {
            s.quit = true;
            fx.push(Effect::Quit);
        }
        Action::Help => {
            s.help = !s.help;
            s.help_scroll = 0;
            // Always the first page: "F1 →" and "F1 ←" on the screen name the pages
            // from there.
            s.help_page = HelpPage::Keys;
        }
        // Like every key that writes, they say so in a replay instead of doing nothing.
        Action::HistoryPrev if !read_only(s) => s.chat.input.history_prev(),
        Action::HistoryNext if !read_only(s) => s.chat.input.history_next(),
        Action::HistoryPrev | Action::HistoryNext => {}
        Action::ScrollUp => s.chat.scroll(-1),
        Action::ScrollDown => s.chat.scroll(1),
        Action::PageUp => s.chat.scroll(-(i64::from(s.chat.area.1.max(2)) - 1)),
        Action::PageDown => s.chat.scroll(i64::from(s.chat.area.1.max(2)) - 1),
        Action::FollowBottom => s.chat.scroll_back = 0,
        Action::Clear => {
            if !read_only(s) {
                fx.push(Effect::Clear);
            }
        }
        Action::CopyLast => match s.chat.last_answer() {
            Some(t) => fx.push(Effect::Copy(t.to_string())),
            None => s.notice("no answer to copy yet", Level::Info),
        },
        Action::ToggleOrigins => {
            s.chat.origins = !s.chat.origins;
            let msg = if s.chat.origins {
                "answer coloured by origin: accepted draft, bonus, reused branch"
            } else {
                "origin colours off"
            };
            s.notice(msg, Level::Info);
        }
        Action::ToggleMouse => {
            s.chat.mouse = !s.chat.mouse;
            let msg = if s.chat.mouse {
                "mouse wheel scrolls the chat (text selection: press again)"
            } else {
                "mouse released: select text with it; the wheel no longer scrolls"
            };
            s.notice(msg, Level::Info);
            fx.push(Effect::SetMouse(s.chat.mouse));
        }
        Action::Example => {
            if read_only(s) || s.session.examples.is_empty() {
                return fx;
            }
            let n = s.session.examples.len();
            let ex = s.session.examples[s.chat.next_example % n].clone();
            s.chat.next_example = (s.chat.next_example + 1) % n;
            s.chat.input.clear();
            s.chat.input.edit(InputEdit::Paste(ex));
        }
        Action::TogglePause => {
            fx.push(if s.status.paused {
                Effect::Resume
            } else {
                Effect::Pause
            });
        }
        Action::Step => fx.push(Effect::Step),
        Action::RoundPrev => s.rounds.prev(&s.stats.summary),
        Action::RoundNext => s.rounds.next(),
        Action::RoundLive => s.rounds.view = None,
        Action::PosPrev | Action::PosNext => {
            let n = s.shown_round().map_or(0, |r| r.positions());
            s.rounds.select(a == Action::PosNext, n);
        }
        Action::CycleMode
        | Action::BlockSmaller
        | Action::BlockLarger
        | Action::ToggleAdaptive
        | Action::ToggleOverlap => {
            if read_only(s) {
                return fx;
            }
            change_options(s, a);
            fx.push(Effect::SetOptions(s.session.options.clone()));
        }
        Action::Slower | Action::Faster => {
            let n = if s.replaying() {
                REPLAY_PACES.len()
            } else {
                LIVE_PACES_MS.len()
            };
            // Live: a higher index is slower; replay: a higher index is faster.
            let up = (a == Action::Slower) != s.replaying();
            let next = if up {
                (s.status.pace + 1).min(n - 1)
            } else {
                s.status.pace.saturating_sub(1)
            };
            if next == s.status.pace {
                let end = if a == Action::Slower {
                    "slowest"
                } else {
                    "fastest"
                };
                s.notice(format!("already at the {end} pace"), Level::Info);
            } else {
                // No effect at a limit: the pace's own notice would hide the one above.
                s.status.pace = next;
                fx.push(Effect::SetPace(next));
            }
        }
        Action::ToggleRecord => {
            if !read_only(s) {
                fx.push(Effect::ToggleRecord);
            }
        }
        Action::SeekBack | Action::SeekForward => {
            if s.replaying() {
                fx.push(Effect::Seek(if a == Action::SeekBack { -10 } else { 10 }));
            } else {
                s.notice("seeking works in replays", Level::Info);
            }
        }
    }
    fx
}

/// A mode or block key: the options change, live requests' labels follow, and the
/// notice says what happened (or that nothing could).
fn change_options(s: &mut State, a: Action) {
    let base = s.session.base.clone();
    let o = &mut s.session.options;
    let before = o.clone();
    let note = match a {
        Action::CycleMode => {
            o.cycle_mode(&base);
            if *o == base {
                format!("back to the starting setup: {}", o.label())
            } else {
                format!("mode: {}", o.label())
            }
        }
        Action::BlockSmaller | Action::BlockLarger => {
            let larger = a == Action::BlockLarger;
            let was_adaptive = matches!(o.block_policy(), Blocks::Adaptive(_));
            if o.step_block(&base, BLOCK_STEPS, larger) {
                let off = if was_adaptive {
                    format!(
                        " (adaptive off: {} turns it on)",
                        s.keys.key(Action::ToggleAdaptive)
                    )
                } else {
                    String::new()
                };
                format!("block size: {}{off}", o.label())
            } else {
                let end = if larger { "largest" } else { "smallest" };
                format!("already at the {end} block size ({})", o.label())
            }
        }
        Action::ToggleAdaptive => {
            o.toggle_adaptive(&base);
            match &o.blocks {
                Blocks::Adaptive(_) => format!("adaptive block size on: {}", o.label()),
                Blocks::Fixed(b) => format!("adaptive block size off: fixed {b}"),
            }
        }
        Action::ToggleOverlap => {
            o.toggle_overlap();
            if o.overlap {
                format!(
                    "overlap branches on (a row rides where its price pays): {}",
                    o.label()
                )
            } else {
                format!("overlap branches off: {}", o.label())
            }
        }
        _ => return,
    };
    let label = o.label();
    let diffusion = o.mode == Mode::Diffusion;
    // The engine moves a live answer to or from block diffusion never (its canvas and
    // cache keep another rhythm): those changes are for the next message.
    let applies = |info: &RequestInfo| info.diffusing == diffusion;
    let mut note = note;
    if *o != before {
        let mut waiting = false;
        for r in &s.session.live {
            if let Some(info) = s.session.requests.get_mut(r) {
                if applies(info) {
                    info.label = label.clone();
                } else {
                    waiting = true;
                }
            }
        }
        if waiting {
            note.push_str(" (from the next message)");
        }
    }
    s.notice(note, Level::Info);
}
