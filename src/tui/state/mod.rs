//! The screen's state and its reducer: `update(&mut State, Msg) -> Vec<Effect>` is the
//! only place state changes, for live sessions and replays alike. The state is made of
//! the parts the panes draw: the session, the chat, the rounds, the statistics and the
//! status line. The reducer calls no drawing code; what it must know of the screen
//! (the chat's size and line count) comes in as messages.

mod actions;
mod chat;
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

use crate::engine::events::{DecodeEvent, Origin, RequestId, StopReason};
use crate::engine::options::DecodeOptions;
use crate::engine::Ablation;
use crate::model::ChatMessage;
use crate::trace::{SessionEvent, TraceEvent};

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
            on_event(s, t, event);
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

/// Before the statistics' round assembler takes `e`: the round it is gathering for
/// `e`'s request, when `e` makes it drop that round unfinished (the request ended, or
/// its events moved on to another round), is kept for the round pane.
fn keep_cut_off(s: &mut State, e: &DecodeEvent) {
    let Some(req) = e.request() else {
        return;
    };
    let Some(open) = s.stats.summary.gathering(req) else {
        return;
    };
    let drops = match e {
        DecodeEvent::RequestFinished { .. } | DecodeEvent::Error { .. } => true,
        _ => e
            .round()
            .is_some_and(|r| r > 0 && r != open.round && s.stats.summary.round(req, r).is_none()),
    };
    if drops {
        if let Some(entry) = s.rounds.find_mut(req, open.round) {
            if entry.kept.is_none() {
                entry.kept = Some(open.clone());
            }
        }
    }
}

/// After the assembler took `e` (in `Stats::push`): the round pane has an entry for
/// the round `e` belongs to, and keeps a copy of it once committed (the assembler
/// holds it until then; a later event of a committed round, in an older recording's
/// order, renews the copy).
fn show_round(s: &mut State, t: f64, e: &DecodeEvent) {
    let (Some(req), Some(round)) = (e.request(), e.round()) else {
        return;
    };
    if round == 0 {
        return; // the prefill's first token: no round to show
    }
    if let Some(r) = s.stats.summary.round(req, round) {
        let entry = s.rounds.get_mut(req, round, t);
        if matches!(e, DecodeEvent::Committed { .. }) || entry.kept.is_some() {
            entry.kept = Some(r.clone());
        }
    }
}

fn on_event(s: &mut State, t: f64, event: TraceEvent) {
    // The size of the round a commit ends, for the speed meter.
    let block = match &event {
        TraceEvent::Decode(DecodeEvent::Committed { req, round, .. }) if *round > 0 => s
            .rounds
            .list
            .iter()
            .rev()
            .find(|r| r.req == *req && r.round == *round)
            .map(|e| e.view(&s.stats.summary).size()),
        _ => None,
    };
    if let TraceEvent::Decode(e) = &event {
        keep_cut_off(s, e);
    }
    s.stats.push(t, &event, block);
    let e = match event {
        TraceEvent::Session(se) => return on_session(s, t, se),
        TraceEvent::Decode(e) => e,
    };
    show_round(s, t, &e);
    match e {
        DecodeEvent::RequestStarted {
            req,
            mode,
            blocks,
            overlap,
            family,
            ..
        } => {
            let o = DecodeOptions {
                mode,
                blocks,
                overlap,
                ..s.session.options.clone()
            };
            s.session.requests.insert(
                req,
                RequestInfo {
                    label: s.session.ablation.label(&o),
                    started: s.session.ablation.label(&o),
                    family: family.unwrap_or_else(|| "chat".into()),
                    stop: None,
                    diffusing: mode == crate::engine::Mode::Diffusion,
                    imported_tokens: None,
                },
            );
            s.session.live.push(req);
            s.chat.answer_of(req);
        }
        DecodeEvent::Prefilled { .. }
        | DecodeEvent::Forward { .. }
        | DecodeEvent::Learned { .. } => {}
        // The round's events: the assembler gathers them (above), the view shows it.
        DecodeEvent::BlockChosen { .. }
        | DecodeEvent::Drafted { .. }
        | DecodeEvent::BranchesBuilt { .. }
        | DecodeEvent::Verified { .. }
        | DecodeEvent::BranchResolved { .. }
        | DecodeEvent::Denoised { .. }
        | DecodeEvent::BlockWritten { .. } => {}
        DecodeEvent::Committed {
            req,
            tokens,
            origins,
            text,
            ..
        } => {
            let pieces = split_by_origin(s, &tokens, &origins, &text);
            if let Some(turn) = s.chat.answer_of(req) {
                turn.text.push_str(&text);
                turn.pieces.extend(pieces);
            }
        }
        DecodeEvent::RequestFinished {
            req, stop, text, ..
        } => {
            s.session.live.retain(|r| *r != req);
            if let Some(info) = s.session.requests.get_mut(&req) {
                info.stop = Some(stop);
            }
            if let Some(turn) = s.chat.answer_of(req) {
                if !text.is_empty() && text != turn.text {
                    // The streaming detokenizer may hold back a partial character; the
                    // final decode is exact.
                    turn.text = text;
                    turn.pieces.clear();
                }
                if !matches!(turn.status, TurnStatus::Failed(_)) {
                    turn.status = TurnStatus::Done(stop);
                }
            }
            if s.session.live.is_empty() {
                s.status.clear(Topic::Busy);
            }
        }
        DecodeEvent::EngineState { paused } => s.status.paused = paused,
        DecodeEvent::Error { req, message } => {
            if let Some(req) = req {
                s.session.live.retain(|r| *r != req);
                if let Some(turn) = s.chat.answer_of(req) {
                    turn.status = TurnStatus::Failed(message.clone());
                }
            }
            s.notice(message, Level::Error);
        }
    }
}

/// Splits a round's committed text into per-token pieces when the token texts add up
/// to it (otherwise one piece with the last token's origin).
fn split_by_origin(
    s: &State,
    tokens: &[u32],
    origins: &[Origin],
    text: &str,
) -> Vec<(String, Origin)> {
    let pieces: Vec<String> = tokens.iter().map(|t| s.session.token(*t)).collect();
    if pieces.concat() == text && pieces.len() == origins.len() {
        let mut out: Vec<(String, Origin)> = Vec::new();
        for (p, o) in pieces.into_iter().zip(origins) {
            match out.last_mut() {
                Some((acc, last)) if last == o => acc.push_str(&p),
                _ => out.push((p, *o)),
            }
        }
        out
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![(text.to_string(), *origins.last().unwrap_or(&Origin::Draft))]
    }
}

fn on_session(s: &mut State, t: f64, e: SessionEvent) {
    match e {
        SessionEvent::UserMessage {
            req,
            text,
            regenerate,
        } => {
            if regenerate {
                if let Some(i) = s.chat.transcript.iter().rposition(|t| t.role == Role::User) {
                    s.chat.truncate(i);
                }
            }
            s.chat.transcript.push(Turn::user(req, text));
            s.chat.answer_of(req);
            s.chat.scroll_back = 0;
        }
        SessionEvent::TokenText { tokens } => s.session.token_text.extend(tokens),
        SessionEvent::ChatCleared => {
            s.chat.truncate(0);
            s.chat.scroll_back = 0;
        }
        SessionEvent::SessionEnd { .. } => {}
        SessionEvent::ImportedRequest(r) => {
            let id = r.request_id.as_deref().unwrap_or("(the log names none)");
            s.session.requests.insert(
                r.req,
                RequestInfo {
                    label: s.session.ablation.label(&s.session.options),
                    started: s.session.ablation.label(&s.session.options),
                    family: crate::trace::summary::IMPORTED_FAMILY.into(),
                    stop: None,
                    diffusing: false,
                    imported_tokens: Some(0),
                },
            );
            s.chat
                .transcript
                .push(Turn::user(r.req, format!("imported request {id}")));
            if let Some(turn) = s.chat.answer_of(r.req) {
                turn.status = TurnStatus::Streaming;
            }
        }
        SessionEvent::ImportedRound(r) => {
            let (req, round, emitted) = (r.req, r.round, r.emitted());
            let ended = r.row.as_ref().and_then(|c| c.eos_hit) == Some(true);
            s.rounds.get_mut(req, round, t).imported = Some(r);
            let Some(tokens) = s
                .session
                .requests
                .get_mut(&req)
                .and_then(|i| i.imported_tokens.as_mut())
            else {
                return;
            };
            *tokens += emitted;
            let text =
                format!("{round} rounds · {tokens} tokens (the log holds counts, not the text)");
            if let Some(turn) = s.chat.answer_of(req) {
                turn.text = text;
                if ended {
                    turn.status = TurnStatus::Done(StopReason::Eos);
                }
            }
        }
    }
}
