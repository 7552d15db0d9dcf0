//! The screen's state and its reducer: `update(&mut State, Msg) -> Vec<Effect>` is the
//! only place state changes, for live sessions and replays alike.

use std::collections::{HashMap, VecDeque};

use crate::engine::events::{
    BlockReason, BranchView, DecodeEvent, Mode, Origin, PosView, RequestId,
};
use crate::engine::overlap::{BranchKind, BranchOutcome};
use crate::engine::StopReason;
use crate::model::ChatMessage;
use crate::trace::summary::SummaryBuilder;
use crate::trace::{SessionEvent, TraceEvent};

use super::action::Action;
use super::input::{Input, InputEdit};

/// Rounds kept for walking back (older ones drop off).
pub const MAX_ROUNDS: usize = 4000;
/// Fixed block sizes the block keys step through.
pub const BLOCK_STEPS: &[usize] = &[1, 4, 8, 16, 32];
/// Slow-motion pauses between live rounds, in milliseconds.
pub const LIVE_DELAYS_MS: &[u64] = &[0, 150, 500, 1500];
/// Replay speeds (multiples of the recorded pace).
pub const REPLAY_SPEEDS: &[f64] = &[0.25, 0.5, 1.0, 2.0, 4.0, 16.0];

/// Everything that can change the state.
#[derive(Debug, Clone)]
pub enum Msg {
    /// An engine or session event at `t` seconds since the session (or recording) began.
    Event { t: f64, event: TraceEvent },
    /// A user action, resolved through the keymap.
    Action(Action),
    /// Typing in the input box.
    Input(InputEdit),
    /// The chat pane's text area (columns, rows) after a layout change.
    ChatArea { width: u16, height: u16 },
    /// Time passes (notices expire).
    Tick { now: f64 },
    /// A message for the status line.
    Notice { text: String, level: Level },
    /// Replay position and pace.
    Replay(ReplayStatus),
    /// Whether a recording is being written, and where.
    Recording(Option<String>),
}

/// What the app must do after an update (the reducer itself touches nothing outside).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start a request answering `messages` (the last is the new user message).
    Submit {
        messages: Vec<ChatMessage>,
        text: String,
        regenerate: bool,
        options: UiOptions,
    },
    Cancel(RequestId),
    /// Clear the chat (cancels what runs, then the app records `chat_cleared`).
    Clear,
    Pause,
    Resume,
    Step,
    /// New options for live and later requests.
    SetOptions(UiOptions),
    /// Copy text to the clipboard.
    Copy(String),
    ToggleRecord,
    /// New pace index (live: [`LIVE_DELAYS_MS`], replay: [`REPLAY_SPEEDS`]).
    SetSpeed(usize),
    /// Replay: move by this many rounds.
    Seek(i64),
    Quit,
}

/// Notice severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

/// Decoding options the keys change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UiOptions {
    pub mode: Mode,
    pub block: usize,
    pub overlap: bool,
    pub adaptive: bool,
}

impl From<&crate::engine::DecodeOptions> for UiOptions {
    fn from(o: &crate::engine::DecodeOptions) -> Self {
        Self {
            mode: o.mode,
            block: o.block,
            overlap: o.overlap,
            adaptive: o.adaptive,
        }
    }
}

impl UiOptions {
    /// `RecGuide adaptive +overlap`, `LinearSS B=16`, `AR`.
    pub fn label(&self) -> String {
        match self.mode {
            Mode::Ar => "AR".into(),
            Mode::Linear => format!("LinearSS B={}", self.block),
            Mode::Recguide => format!(
                "RecGuide {}{}",
                if self.adaptive {
                    "adaptive".to_string()
                } else {
                    format!("B={}", self.block)
                },
                if self.overlap { " +overlap" } else { "" }
            ),
        }
    }
}

/// Replay progress as the status line shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStatus {
    pub file: String,
    /// Events fed so far / in the file.
    pub pos: usize,
    pub len: usize,
    pub playing: bool,
    pub speed: f64,
}

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

/// The verifier's verdict on a round, as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictView {
    pub accepted: usize,
    pub first_reject: Option<usize>,
    pub verifier_tokens: Vec<u32>,
    pub bonus: u32,
    pub detail: Vec<PosView>,
}

/// Everything known about one round of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundView {
    pub req: RequestId,
    pub round: usize,
    pub t: f64,
    pub block_size: Option<usize>,
    pub reason: Option<BlockReason>,
    /// `[seed, d1, ..]`.
    pub block: Vec<u32>,
    pub margins: Vec<f32>,
    pub risky: Vec<usize>,
    pub reused: Option<BranchKind>,
    pub draft_detail: Vec<PosView>,
    pub branches: Vec<BranchView>,
    pub verdict: Option<VerdictView>,
    pub outcome: Option<BranchOutcome>,
    pub committed: Vec<u32>,
}

impl RoundView {
    fn new(req: RequestId, round: usize, t: f64) -> Self {
        Self {
            req,
            round,
            t,
            block_size: None,
            reason: None,
            block: Vec::new(),
            margins: Vec::new(),
            risky: Vec::new(),
            reused: None,
            draft_detail: Vec::new(),
            branches: Vec::new(),
            verdict: None,
            outcome: None,
            committed: Vec::new(),
        }
    }

    /// Tokens the round advanced (accepted drafts + 1), once verified.
    pub fn advance(&self) -> Option<usize> {
        self.verdict.as_ref().map(|v| v.accepted + 1)
    }

    /// Positions shown: the block when drafted, else the seed and the verifier's token.
    pub fn positions(&self) -> usize {
        self.block.len().max(self.block_size.unwrap_or(1)).max(1)
    }
}

/// What a request was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInfo {
    pub mode: Mode,
    pub block_policy: String,
    pub overlap: bool,
    pub family: String,
}

/// One point of the throughput timeline (cumulative counters after a round).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t: f64,
    pub tokens: usize,
    pub decode_tokens: usize,
    pub decode_forwards: usize,
    pub forward_ms: f64,
}

/// A status-line message.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub text: String,
    pub level: Level,
    pub until: f64,
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct State {
    /// Model label and device (status line).
    pub model: String,
    pub device: String,
    pub options: UiOptions,
    pub transcript: Vec<Turn>,
    pub requests: HashMap<RequestId, RequestInfo>,
    /// Requests started and not finished.
    pub live: Vec<RequestId>,
    pub rounds: VecDeque<RoundView>,
    /// Index into `rounds` being looked at; `None` follows the newest.
    pub view: Option<usize>,
    /// Inspected block position in the viewed round.
    pub selected: Option<usize>,
    pub summary: SummaryBuilder,
    pub samples: VecDeque<Sample>,
    pub token_text: HashMap<u32, String>,
    pub paused: bool,
    /// Pace index (slow motion live, speed in replays).
    pub speed: usize,
    pub follow: bool,
    /// First wrapped chat line shown when not following.
    pub scroll_top: usize,
    pub chat_area: (u16, u16),
    pub input: Input,
    pub help: bool,
    pub origins: bool,
    pub recording: Option<String>,
    pub replay: Option<ReplayStatus>,
    pub notice: Option<Notice>,
    pub quit_armed: bool,
    pub now: f64,
    pub quit: bool,
}

impl State {
    pub fn new(model: &str, device: &str, options: UiOptions) -> Self {
        Self {
            model: model.to_string(),
            device: device.to_string(),
            options,
            transcript: Vec::new(),
            requests: HashMap::new(),
            live: Vec::new(),
            rounds: VecDeque::new(),
            view: None,
            selected: None,
            summary: SummaryBuilder::default(),
            samples: VecDeque::new(),
            token_text: HashMap::new(),
            paused: false,
            speed: 0,
            follow: true,
            scroll_top: 0,
            chat_area: (80, 20),
            input: Input::default(),
            help: false,
            origins: false,
            recording: None,
            replay: None,
            notice: None,
            quit_armed: false,
            now: 0.0,
            quit: false,
        }
    }

    /// The round the round pane shows.
    pub fn shown_round(&self) -> Option<&RoundView> {
        match self.view {
            Some(i) => self.rounds.get(i),
            None => self.rounds.back(),
        }
    }

    pub fn shown_index(&self) -> Option<usize> {
        self.view.or_else(|| self.rounds.len().checked_sub(1))
    }

    /// Text of a token id (`⟨id⟩` when unknown).
    pub fn token(&self, id: u32) -> String {
        self.token_text
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("⟨{id}⟩"))
    }

    /// The request being answered (the newest live one).
    pub fn active(&self) -> Option<RequestId> {
        self.live.last().copied()
    }

    /// The last finished answer's text.
    pub fn last_answer(&self) -> Option<&str> {
        self.transcript
            .iter()
            .rev()
            .find(|t| t.role == Role::Assistant && !t.text.is_empty())
            .map(|t| t.text.as_str())
    }

    fn notice(&mut self, text: impl Into<String>, level: Level) {
        let secs = if level == Level::Info { 4.0 } else { 10.0 };
        self.notice = Some(Notice {
            text: text.into(),
            level,
            until: self.now + secs,
        });
    }

    fn turn_of(&mut self, req: RequestId) -> &mut Turn {
        let pos = self
            .transcript
            .iter()
            .rposition(|t| t.role == Role::Assistant && t.req == Some(req));
        match pos {
            Some(i) => &mut self.transcript[i],
            None => {
                self.transcript.push(Turn {
                    role: Role::Assistant,
                    req: Some(req),
                    text: String::new(),
                    pieces: Vec::new(),
                    status: TurnStatus::Streaming,
                });
                let n = self.transcript.len() - 1;
                &mut self.transcript[n]
            }
        }
    }

    fn round_mut(&mut self, req: RequestId, round: usize, t: f64) -> &mut RoundView {
        let found = self
            .rounds
            .iter()
            .rev()
            .take(64)
            .position(|r| r.req == req && r.round == round);
        let i = match found {
            Some(back) => self.rounds.len() - 1 - back,
            None => {
                if self.rounds.len() >= MAX_ROUNDS {
                    self.rounds.pop_front();
                    self.view = self.view.map(|v| v.saturating_sub(1));
                }
                self.rounds.push_back(RoundView::new(req, round, t));
                self.rounds.len() - 1
            }
        };
        &mut self.rounds[i]
    }
}

/// Turns as chat messages (answers that failed are left out).
fn messages_of(turns: &[Turn]) -> Vec<ChatMessage> {
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

/// The reducer.
pub fn update(s: &mut State, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::Event { t, event } => {
            s.now = s.now.max(t);
            on_event(s, t, event);
            Vec::new()
        }
        Msg::Action(a) => on_action(s, a),
        Msg::Input(e) => {
            s.quit_armed = false;
            s.input.edit(e);
            Vec::new()
        }
        Msg::ChatArea { width, height } => {
            s.chat_area = (width, height);
            Vec::new()
        }
        Msg::Tick { now } => {
            s.now = s.now.max(now);
            if s.notice.as_ref().is_some_and(|n| n.until < s.now) {
                s.notice = None;
            }
            Vec::new()
        }
        Msg::Notice { text, level } => {
            s.notice(text, level);
            Vec::new()
        }
        Msg::Replay(r) => {
            s.replay = Some(r);
            Vec::new()
        }
        Msg::Recording(r) => {
            s.recording = r;
            Vec::new()
        }
    }
}

fn on_event(s: &mut State, t: f64, event: TraceEvent) {
    s.summary.push(&event);
    let e = match event {
        TraceEvent::Session(se) => return on_session(s, se),
        TraceEvent::Decode(e) => e,
    };
    match e {
        DecodeEvent::RequestStarted {
            req,
            mode,
            block_policy,
            overlap,
            family,
            ..
        } => {
            s.requests.insert(
                req,
                RequestInfo {
                    mode,
                    block_policy,
                    overlap,
                    family: family.unwrap_or_else(|| "chat".into()),
                },
            );
            s.live.push(req);
            s.turn_of(req);
        }
        DecodeEvent::Prefilled { .. } | DecodeEvent::Forward { .. } => {}
        DecodeEvent::BlockChosen {
            req,
            round,
            block,
            reason,
        } => {
            let r = s.round_mut(req, round, t);
            r.block_size = Some(block);
            r.reason = Some(reason);
        }
        DecodeEvent::Drafted {
            req,
            round,
            block,
            margins,
            risky,
            reused,
            detail,
        } => {
            let r = s.round_mut(req, round, t);
            r.block_size.get_or_insert(block.len());
            r.block = block;
            r.margins = margins;
            r.risky = risky;
            r.reused = reused;
            r.draft_detail = detail;
        }
        DecodeEvent::BranchesBuilt {
            req,
            round,
            branches,
        } => s.round_mut(req, round, t).branches = branches,
        DecodeEvent::Verified {
            req,
            round,
            accepted,
            first_reject,
            verifier_tokens,
            bonus,
            detail,
        } => {
            let r = s.round_mut(req, round, t);
            r.verdict = Some(VerdictView {
                accepted,
                first_reject,
                verifier_tokens,
                bonus,
                detail,
            });
            let sm = &s.summary.summary;
            s.samples.push_back(Sample {
                t,
                tokens: sm.new_tokens,
                decode_tokens: sm.decode_tokens,
                decode_forwards: sm.decode_forwards,
                forward_ms: sm.forward_ms,
            });
            if s.samples.len() > MAX_ROUNDS {
                s.samples.pop_front();
            }
        }
        DecodeEvent::BranchResolved {
            req,
            round,
            outcome,
        } => s.round_mut(req, round, t).outcome = Some(outcome),
        DecodeEvent::Committed {
            req,
            round,
            tokens,
            origins,
            text,
        } => {
            if round > 0 {
                s.round_mut(req, round, t).committed = tokens.clone();
            }
            let pieces = split_by_origin(s, &tokens, &origins, &text);
            let turn = s.turn_of(req);
            turn.text.push_str(&text);
            turn.pieces.extend(pieces);
        }
        DecodeEvent::RequestFinished {
            req, stop, text, ..
        } => {
            s.live.retain(|r| *r != req);
            let turn = s.turn_of(req);
            if !text.is_empty() && text != turn.text {
                // The streaming detokenizer may hold back a partial character; the final
                // decode is exact.
                turn.text = text;
                turn.pieces.clear();
            }
            if !matches!(turn.status, TurnStatus::Failed(_)) {
                turn.status = TurnStatus::Done(stop);
            }
        }
        DecodeEvent::EngineState { paused } => s.paused = paused,
        DecodeEvent::Error { req, message } => {
            if let Some(req) = req {
                s.live.retain(|r| *r != req);
                s.turn_of(req).status = TurnStatus::Failed(message.clone());
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
    let pieces: Vec<String> = tokens.iter().map(|t| s.token(*t)).collect();
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

fn on_session(s: &mut State, e: SessionEvent) {
    match e {
        SessionEvent::UserMessage {
            req,
            text,
            regenerate,
        } => {
            if regenerate {
                if let Some(i) = s.transcript.iter().rposition(|t| t.role == Role::User) {
                    s.transcript.truncate(i);
                }
            }
            s.transcript.push(Turn {
                role: Role::User,
                req: Some(req),
                text,
                pieces: Vec::new(),
                status: TurnStatus::Done(StopReason::Eos),
            });
            s.turn_of(req);
            s.follow = true;
        }
        SessionEvent::TokenText { tokens } => s.token_text.extend(tokens),
        SessionEvent::ChatCleared => {
            s.transcript.clear();
            s.follow = true;
            s.scroll_top = 0;
        }
        SessionEvent::SessionEnd { .. } => {}
    }
}

fn read_only(s: &mut State) -> bool {
    if s.replay.is_some() {
        s.notice("a replay is read-only", Level::Warning);
        true
    } else {
        false
    }
}

fn on_action(s: &mut State, a: Action) -> Vec<Effect> {
    if a != Action::Interrupt && a != Action::Quit {
        s.quit_armed = false;
    }
    let mut fx = Vec::new();
    match a {
        Action::Submit => {
            if read_only(s) || s.input.text.trim().is_empty() {
                return fx;
            }
            if let Some(req) = s.active() {
                s.notice(
                    format!("still answering (request {req}); Esc stops it"),
                    Level::Warning,
                );
                return fx;
            }
            let text = s.input.take();
            let mut messages = messages_of(&s.transcript);
            messages.push(ChatMessage::new("user", &text));
            fx.push(Effect::Submit {
                messages,
                text,
                regenerate: false,
                options: s.options,
            });
        }
        Action::Regenerate => {
            if read_only(s) {
                return fx;
            }
            if let Some(req) = s.active() {
                fx.push(Effect::Cancel(req));
            }
            let Some(i) = s.transcript.iter().rposition(|t| t.role == Role::User) else {
                s.notice("nothing to regenerate", Level::Info);
                return fx;
            };
            let text = s.transcript[i].text.clone();
            let mut messages = messages_of(&s.transcript[..i]);
            messages.push(ChatMessage::new("user", &text));
            fx.push(Effect::Submit {
                messages,
                text,
                regenerate: true,
                options: s.options,
            });
        }
        Action::Newline => s.input.newline(),
        Action::Stop => match s.active() {
            Some(req) if s.replay.is_none() => fx.push(Effect::Cancel(req)),
            _ => {
                s.help = false;
                s.selected = None;
            }
        },
        Action::Interrupt => {
            if s.quit_armed {
                s.quit = true;
                fx.push(Effect::Quit);
            } else if let (Some(req), None) = (s.active(), &s.replay) {
                // Stop; a second Ctrl+C right after quits.
                fx.push(Effect::Cancel(req));
                s.quit_armed = true;
                s.notice("stopped; Ctrl+C again quits", Level::Info);
            } else if !s.input.is_empty() {
                s.input.clear();
            } else {
                s.quit_armed = true;
                s.notice("press Ctrl+C again to quit", Level::Info);
            }
        }
        Action::Quit => {
            s.quit = true;
            fx.push(Effect::Quit);
        }
        Action::Help => s.help = !s.help,
        Action::HistoryPrev => s.input.history_prev(),
        Action::HistoryNext => s.input.history_next(),
        Action::ScrollUp => scroll(s, -1),
        Action::ScrollDown => scroll(s, 1),
        Action::PageUp => scroll(s, -(i64::from(s.chat_area.1.max(2)) - 1)),
        Action::PageDown => scroll(s, i64::from(s.chat_area.1.max(2)) - 1),
        Action::FollowBottom => {
            s.follow = true;
        }
        Action::Clear => {
            if !read_only(s) {
                fx.push(Effect::Clear);
            }
        }
        Action::CopyLast => match s.last_answer() {
            Some(t) => {
                fx.push(Effect::Copy(t.to_string()));
                s.notice("copied the last answer", Level::Info);
            }
            None => s.notice("no answer to copy yet", Level::Info),
        },
        Action::ToggleOrigins => {
            s.origins = !s.origins;
            let msg = if s.origins {
                "answer coloured by origin: draft, bonus, reused"
            } else {
                "origin colours off"
            };
            s.notice(msg, Level::Info);
        }
        Action::TogglePause => {
            fx.push(if s.paused {
                Effect::Resume
            } else {
                Effect::Pause
            });
            if s.replay.is_some() {
                s.paused = !s.paused;
            }
        }
        Action::Step => fx.push(Effect::Step),
        Action::RoundPrev => {
            if let Some(i) = s.shown_index() {
                s.view = Some(i.saturating_sub(1));
            }
        }
        Action::RoundNext => {
            if let Some(i) = s.view {
                s.view = (i + 1 < s.rounds.len().saturating_sub(1)).then_some(i + 1);
            }
        }
        Action::RoundLive => s.view = None,
        Action::PosPrev | Action::PosNext => {
            let n = s.shown_round().map_or(0, RoundView::positions);
            if n > 0 {
                let cur = s
                    .selected
                    .unwrap_or(if a == Action::PosNext { n - 1 } else { 0 });
                s.selected = Some(if a == Action::PosNext {
                    (cur + 1) % n
                } else {
                    (cur + n - 1) % n
                });
            }
        }
        Action::CycleMode
        | Action::BlockSmaller
        | Action::BlockLarger
        | Action::ToggleAdaptive
        | Action::ToggleOverlap => {
            if read_only(s) {
                return fx;
            }
            change_options(&mut s.options, a);
            s.notice(format!("now {}", s.options.label()), Level::Info);
            fx.push(Effect::SetOptions(s.options));
        }
        Action::Slower | Action::Faster => {
            let n = if s.replay.is_some() {
                REPLAY_SPEEDS.len()
            } else {
                LIVE_DELAYS_MS.len()
            };
            // Live: a higher index is slower; replay: a higher index is faster.
            let up = (a == Action::Slower) == s.replay.is_none();
            s.speed = if up {
                (s.speed + 1).min(n - 1)
            } else {
                s.speed.saturating_sub(1)
            };
            fx.push(Effect::SetSpeed(s.speed));
        }
        Action::ToggleRecord => {
            if !read_only(s) {
                fx.push(Effect::ToggleRecord);
            }
        }
        Action::SeekBack | Action::SeekForward => {
            if s.replay.is_some() {
                fx.push(Effect::Seek(if a == Action::SeekBack { -10 } else { 10 }));
            } else {
                s.notice("seeking works in replays", Level::Info);
            }
        }
    }
    fx
}

fn scroll(s: &mut State, by: i64) {
    let total = super::panes::chat::line_count(s, s.chat_area.0) as i64;
    let h = i64::from(s.chat_area.1);
    let max_top = (total - h).max(0);
    let cur = if s.follow {
        max_top
    } else {
        s.scroll_top as i64
    };
    let next = (cur + by).clamp(0, max_top);
    s.scroll_top = next as usize;
    s.follow = next >= max_top;
}

/// Applies a mode/block key to the options.
pub fn change_options(o: &mut UiOptions, a: Action) {
    match a {
        Action::CycleMode => {
            o.mode = match o.mode {
                Mode::Ar => Mode::Linear,
                Mode::Linear => Mode::Recguide,
                Mode::Recguide => Mode::Ar,
            };
            if o.mode == Mode::Linear && o.block < 2 {
                o.block = 8;
            }
        }
        Action::BlockSmaller | Action::BlockLarger => {
            let i = BLOCK_STEPS
                .iter()
                .position(|b| *b >= o.block)
                .unwrap_or(BLOCK_STEPS.len() - 1);
            let j = if a == Action::BlockSmaller {
                i.saturating_sub(1)
            } else {
                (i + 1).min(BLOCK_STEPS.len() - 1)
            };
            o.block = BLOCK_STEPS[j];
            if o.mode == Mode::Ar && o.block > 1 {
                o.mode = Mode::Linear;
            }
            o.adaptive = false;
        }
        Action::ToggleAdaptive => {
            o.mode = Mode::Recguide;
            o.adaptive = !o.adaptive;
        }
        Action::ToggleOverlap => {
            o.mode = Mode::Recguide;
            o.overlap = !o.overlap;
        }
        _ => {}
    }
}
