//! The screen's state and its reducer: `update(&mut State, Msg) -> Vec<Effect>` is the
//! only place state changes, for live sessions and replays alike. The state is made of
//! the parts the panes draw: the session, the chat, the rounds, the statistics and the
//! status line. The reducer calls no drawing code; what it must know of the screen
//! (the chat's size and line count) comes in as messages.

mod actions;
mod chat;
mod events;
mod rounds;
mod stats;
mod status;

use std::collections::HashMap;

pub use chat::{messages_of, Chat, Role, Turn, TurnStatus};
pub use rounds::{DiffusionView, RoundEntry, RoundView, Rounds, VerdictView, MAX_ROUNDS};
pub use stats::{Comparison, Rate, Sample, SpeedMeter, Stats};
pub use status::{
    pace_label, Level, Notice, ReplayPace, ReplayStatus, Status, Topic, DEFAULT_LIVE_PACE,
    DEFAULT_REPLAY_PACE, LIVE_PACES_MS, REPLAY_PACES,
};

use crate::engine::events::{RequestId, StopReason};
use crate::engine::options::DecodeOptions;
use crate::engine::Ablation;
use crate::model::ChatMessage;
use crate::trace::TraceEvent;

use super::action::Action;
use super::input::InputEdit;
use super::keymap::KeyHints;

/// Fixed block sizes the block keys step through.
pub const BLOCK_STEPS: &[usize] = &[1, 4, 8, 16, 32];

/// Everything that can change the state.
#[derive(Debug, Clone)]
pub enum Msg {
    /// An engine or session event at `t` seconds since the session (or recording) began.
    Event { t: f64, event: TraceEvent },
    /// A user action, resolved through the keymap.
    Action(Action),
    /// Typing in the input box.
    Input(InputEdit),
    /// The mouse wheel over the screen (negative: up).
    Wheel(i64),
    /// The chat pane's text area (columns, rows) and the transcript's wrapped line
    /// count there, when measured (while scrolled back).
    ChatArea {
        width: u16,
        height: u16,
        lines: Option<usize>,
    },
    /// Wall-clock seconds since the screen opened: notices expire.
    Tick { now: f64 },
    /// A message for the status line (and the message list, when not Info).
    Notice { text: String, level: Level },
    /// Replay position and pace.
    Replay(ReplayStatus),
    /// Whether a recording is being written, and where.
    Recording(Option<String>),
    /// A replay seeks: forget what the events built (settings stay).
    Reset,
    /// Another page of the help (negative: back).
    HelpPage(i64),
    /// Scroll the help page by this many lines (negative: up); the pane clamps it.
    HelpScroll(i64),
    /// The help page as drawn scrolls at most this far (sent before a frame): a
    /// scroll past it comes back, so the next key moves the page at once.
    HelpScrollMax(usize),
}

/// What the app must do after an update (the reducer itself touches nothing outside).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start a request answering `messages` (the last is the new user message).
    Submit {
        messages: Vec<ChatMessage>,
        text: String,
        regenerate: bool,
        options: DecodeOptions,
    },
    Cancel(RequestId),
    /// Clear the chat (cancels what runs, then the app records `chat_cleared`).
    Clear,
    Pause,
    Resume,
    Step,
    /// New options for live and later requests.
    SetOptions(DecodeOptions),
    /// Copy text to the clipboard.
    Copy(String),
    ToggleRecord,
    /// New pace index (live: [`LIVE_PACES_MS`], replay: [`REPLAY_PACES`]).
    SetPace(usize),
    /// Replay: move by this many rounds.
    Seek(i64),
    /// Capture the mouse (wheel scrolls) or leave it to the terminal (selection).
    SetMouse(bool),
    Quit,
}

/// What a request was started with, as labels show it (kept current when keys change
/// the options of a live request).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInfo {
    /// The options in force now (a key may change them mid-answer).
    pub label: String,
    /// The options it started with.
    pub started: String,
    pub family: String,
    /// Why it ended, once it has (kept when Ctrl+L clears the chat's turns).
    pub stop: Option<StopReason>,
    /// It decodes by block diffusion (for its whole life: see `change_options`).
    pub diffusing: bool,
    /// An imported log's request: tokens its rounds emitted so far.
    pub imported_tokens: Option<usize>,
}

/// The help overlay's pages, in order (`clap::ValueEnum` only for the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HelpPage {
    /// The keys that act here.
    #[default]
    Keys,
    /// What every term on the screen means.
    Legend,
    /// The session's notices.
    Messages,
}

impl HelpPage {
    /// The pages in tab order.
    pub fn all() -> &'static [HelpPage] {
        <HelpPage as clap::ValueEnum>::value_variants()
    }

    /// The tab's name.
    pub fn name(self) -> &'static str {
        match self {
            HelpPage::Keys => "keys",
            HelpPage::Legend => "what you see",
            HelpPage::Messages => "messages",
        }
    }

    /// `by` pages on, wrapping around.
    pub fn moved(self, by: i64) -> Self {
        let n = Self::all().len() as i64;
        let i = Self::all().iter().position(|p| *p == self).unwrap_or(0) as i64;
        Self::all()[(i + by).rem_euclid(n) as usize]
    }
}

/// The model and what the session decodes with.
#[derive(Debug, Clone)]
pub struct Session {
    /// Model label and device (status line).
    pub model: String,
    pub device: String,
    /// What prices the policy's decisions ("B200 · NLD-8B (modeled)"; empty: unknown).
    pub prices: String,
    /// A few lines on what the model is (the bundled model introduces itself).
    pub about: Vec<String>,
    /// Prompts the model handles, offered on the empty chat (Tab inserts them).
    pub examples: Vec<String>,
    /// Earlier exchanges sent with each message (`None`: the whole chat).
    pub context_turns: Option<usize>,
    /// What the next request uses (and live ones, after a key changed it).
    pub options: DecodeOptions,
    /// What the session started with (keys return to it).
    pub base: DecodeOptions,
    pub requests: HashMap<RequestId, RequestInfo>,
    /// Requests started and not finished.
    pub live: Vec<RequestId>,
    pub token_text: HashMap<u32, String>,
    /// An imported log's origin (a replay of `trace import`'s recording).
    pub source: Option<crate::trace::nld::ImportSource>,
    /// What a replayed recording turned off, made when ablations were options
    /// (shipped otherwise): its labels say so.
    pub ablation: Ablation,
}

impl Session {
    /// A simulated backbone's session: its clock times the simulator, not a model, so
    /// no speed of this machine is shown.
    pub fn simulated(&self) -> bool {
        self.model.starts_with(crate::sim::PREFIX)
    }

    /// No clock of this machine times the session's forwards (a simulator, or an
    /// imported log whose forwards ran elsewhere): no tokens per second are shown.
    pub fn untimed(&self) -> bool {
        self.simulated() || self.source.is_some()
    }

    /// The request being answered (the newest live one).
    pub fn active(&self) -> Option<RequestId> {
        self.live.last().copied()
    }

    /// Text of a token id (`⟨id⟩` when unknown).
    pub fn token(&self, id: u32) -> String {
        self.token_text
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("⟨{id}⟩"))
    }

    /// The label of what decodes now: the live request's, else the next one's.
    pub fn label(&self) -> String {
        self.active()
            .and_then(|r| self.requests.get(&r))
            .map_or_else(|| self.ablation.label(&self.options), |i| i.label.clone())
    }
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct State {
    pub session: Session,
    pub chat: Chat,
    pub rounds: Rounds,
    pub stats: Stats,
    pub status: Status,
    pub help: bool,
    /// The help page shown (keys, what you see, messages).
    pub help_page: HelpPage,
    /// Lines of the help page scrolled past (the pane clamps it when drawing).
    pub help_scroll: usize,
    pub now: f64,
    pub quit: bool,
    /// The active keymap's keys, for notices that name one.
    pub keys: KeyHints,
}

impl State {
    pub fn new(model: &str, device: &str, options: DecodeOptions) -> Self {
        Self {
            session: Session {
                model: model.to_string(),
                device: device.to_string(),
                prices: String::new(),
                about: Vec::new(),
                examples: Vec::new(),
                context_turns: None,
                base: options.clone(),
                options,
                requests: HashMap::new(),
                live: Vec::new(),
                token_text: HashMap::new(),
                source: None,
                ablation: Ablation::SHIPPED,
            },
            chat: Chat::default(),
            rounds: Rounds::default(),
            stats: Stats::default(),
            status: Status::default(),
            help: false,
            help_page: HelpPage::default(),
            help_scroll: 0,
            now: 0.0,
            quit: false,
            keys: KeyHints::default(),
        }
    }

    /// The round the round pane shows (`Rounds::shown`).
    pub fn shown_round(&self) -> Option<RoundView<'_>> {
        self.rounds.shown(&self.stats.summary)
    }

    /// The same with the active keymap's keys for what notices name.
    pub fn with_keys(mut self, keymap: &crate::tui::keymap::Keymap) -> Self {
        self.keys = KeyHints::of(keymap);
        self
    }

    /// The same replaying a recording made with `ablation` (its labels name it).
    pub fn with_ablation(mut self, ablation: Ablation) -> Self {
        self.session.ablation = ablation;
        self
    }

    /// The same with what prices the policy's decisions, for the status line.
    pub fn with_prices(mut self, prices: &str) -> Self {
        self.session.prices = prices.to_string();
        self
    }

    /// The same replaying an imported log: the status line says where it came from.
    pub fn with_source(mut self, source: Option<crate::trace::nld::ImportSource>) -> Self {
        if let Some(src) = &source {
            self.session.model = src.describe();
        }
        self.session.source = source;
        self
    }

    /// The same with the model's introduction and example prompts.
    pub fn with_intro(mut self, about: Vec<String>, examples: Vec<String>) -> Self {
        self.session.about = about;
        self.session.examples = examples;
        self
    }

    pub fn replaying(&self) -> bool {
        self.status.replay.is_some()
    }

    fn notice(&mut self, text: impl Into<String>, level: Level) {
        self.status.notice(text, level, Topic::General);
    }
}

/// The reducer.
pub fn update(s: &mut State, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::Event { t, event } => {
            s.now = s.now.max(t);
            events::on_event(s, t, event);
            Vec::new()
        }
        Msg::Action(a) => actions::on_action(s, a),
        Msg::Input(e) => {
            s.status.clear(Topic::Quit);
            if s.replaying() {
                s.notice("a replay is read-only: nothing to type", Level::Info);
            } else {
                s.chat.input.edit(e);
            }
            Vec::new()
        }
        Msg::Wheel(by) => {
            s.chat.scroll(3 * by);
            Vec::new()
        }
        Msg::ChatArea {
            width,
            height,
            lines,
        } => {
            s.chat.area = (width, height);
            s.chat.lines = lines;
            if lines.is_some() {
                s.chat.scroll(0);
            }
            Vec::new()
        }
        Msg::Tick { now } => {
            s.status.tick(now);
            Vec::new()
        }
        Msg::Notice { text, level } => {
            s.notice(text, level);
            Vec::new()
        }
        Msg::Replay(r) => {
            s.status.paused = !r.playing;
            s.status.pace = REPLAY_PACES
                .iter()
                .position(|p| *p == r.pace)
                .unwrap_or(s.status.pace);
            s.status.replay = Some(r);
            Vec::new()
        }
        Msg::Recording(r) => {
            s.status.recording = r;
            Vec::new()
        }
        Msg::HelpPage(by) => {
            s.help_page = s.help_page.moved(by);
            s.help_scroll = 0;
            Vec::new()
        }
        Msg::HelpScroll(by) => {
            s.help_scroll = s.help_scroll.saturating_add_signed(by as isize);
            Vec::new()
        }
        Msg::HelpScrollMax(max) => {
            s.help_scroll = s.help_scroll.min(max);
            Vec::new()
        }
        Msg::Reset => {
            let input = std::mem::take(&mut s.chat.input);
            let (origins, mouse, area) = (s.chat.origins, s.chat.mouse, s.chat.area);
            s.chat = Chat {
                input,
                origins,
                mouse,
                area,
                ..Chat::default()
            };
            s.rounds = Rounds::default();
            s.stats = Stats::default();
            s.session.requests.clear();
            s.session.live.clear();
            s.session.token_text.clear();
            Vec::new()
        }
    }
}
