//! The event loops: live chat (engine events, keys, signals, recording) and replay (a
//! recording fed through the same reducer on its own clock). Both draw only when
//! something changed: at most 20 frames a second for decoding progress, at once for a
//! key; events arriving in between are read in one go before the frame.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::backend::Backend;
use ratatui::layout::Rect;
use ratatui::Terminal;
use tokio::sync::mpsc::UnboundedReceiver;

use super::action::Action;
use super::clipboard;
use super::config::recordings_dir;
use super::input::InputEdit;
use super::keymap::Keymap;
use super::render;
use super::state::{
    update, Effect, Level, Msg, ReplayStatus, State, UiOptions, LIVE_DELAYS_MS, REPLAY_SPEEDS,
};
use super::theme::Theme;
use crate::engine::events::{DecodeEvent, RequestId};
use crate::engine::{
    DecodeOptions, EngineCommand, EngineHandle, Mode, OptionsPatch, Submit, Timed,
};
use crate::model::TextTokenizer;
use crate::trace::{self, Recorder, SessionEvent, Stamped, Trace, TraceEvent, TraceHeader};

/// Shortest gap between frames that only show decoding progress (20 per second: the
/// eye gains nothing from more, and each frame takes CPU from the engine).
const FRAME: Duration = Duration::from_millis(50);
/// Shortest gap between frames answering a key (keys should feel immediate).
const KEY_FRAME: Duration = Duration::from_millis(4);
/// Replays skip idle gaps longer than this (seconds of recording time).
const IDLE_LIMIT: f64 = 1.0;

/// What the terminal sends.
#[derive(Debug, Clone)]
pub enum TermInput {
    Key(KeyEvent),
    Paste(String),
    Resize,
}

/// Theme, keys and the problems found loading them.
pub struct Ui {
    pub theme: Theme,
    pub keymap: Keymap,
    pub warnings: Vec<String>,
}

/// A terminal to draw on, and how to talk to the real one.
pub struct Screen<B: Backend> {
    pub terminal: Terminal<B>,
    /// Wrap frames in synchronized-update markers and send OSC 52 (a real terminal).
    pub real: bool,
    /// Frames drawn (for measurements).
    pub frames: u64,
    /// Time spent drawing.
    pub draw_time: Duration,
    /// (start, end) of every frame, when measuring (`specscope ui-bench`).
    pub frame_log: Option<Vec<(Instant, Instant)>>,
}

impl<B: Backend> Screen<B> {
    pub fn new(terminal: Terminal<B>, real: bool) -> Self {
        Self {
            terminal,
            real,
            frames: 0,
            draw_time: Duration::ZERO,
            frame_log: None,
        }
    }

    fn area(&mut self) -> Rect {
        self.terminal
            .size()
            .map(|s| Rect::new(0, 0, s.width, s.height))
            .unwrap_or_default()
    }

    /// Draws one frame; tells the reducer first when the chat area changed.
    pub fn draw(&mut self, s: &mut State, ui: &Ui) -> Result<()> {
        let chat = render::chat_text_area(self.area(), s.input.line_count());
        if (chat.width, chat.height) != s.chat_area {
            update(
                s,
                Msg::ChatArea {
                    width: chat.width,
                    height: chat.height,
                },
            );
        }
        let start = Instant::now();
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
        self.frames += 1;
        self.draw_time += start.elapsed();
        if let Some(log) = &mut self.frame_log {
            log.push((start, Instant::now()));
        }
        Ok(())
    }

    fn copy(&mut self, text: &str) {
        if self.real {
            use std::io::Write;
            let seq = clipboard::osc52(text, std::env::var_os("TMUX").is_some());
            let mut out = std::io::stdout();
            let _ = out.write_all(seq.as_bytes()).and_then(|_| out.flush());
        }
    }
}

/// Turns a key into a message: printable keys type while the input has text; keys the
/// keymap knows become actions; editing keys edit.
pub fn key_msg(s: &State, keys: &Keymap, key: &KeyEvent) -> Option<Msg> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if s.help && matches!(key.code, KeyCode::Esc | KeyCode::Char('?')) {
        return Some(Msg::Action(Action::Help));
    }
    let plain = !key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    let action = keys.action(key);
    if let (KeyCode::Char(c), true) = (key.code, plain) {
        if !s.input.is_empty() || action.is_none() {
            return Some(Msg::Input(InputEdit::Insert(c)));
        }
    }
    if let Some(a) = action {
        return Some(Msg::Action(a));
    }
    let edit = match key.code {
        KeyCode::Backspace => InputEdit::Backspace,
        KeyCode::Delete => InputEdit::Delete,
        KeyCode::Left => InputEdit::Left,
        KeyCode::Right => InputEdit::Right,
        KeyCode::Home => InputEdit::Home,
        KeyCode::End => InputEdit::End,
        KeyCode::Tab => InputEdit::Insert(' '),
        _ => return None,
    };
    Some(Msg::Input(edit))
}

fn input_msg(s: &State, keys: &Keymap, input: TermInput) -> Option<Msg> {
    match input {
        TermInput::Key(k) => key_msg(s, keys, &k),
        TermInput::Paste(p) => Some(Msg::Input(InputEdit::Paste(p))),
        TermInput::Resize => None,
    }
}

/// A live session's engine and everything needed to start requests.
pub struct Live {
    pub handle: EngineHandle,
    pub events: UnboundedReceiver<Timed>,
    pub tokenizer: TextTokenizer,
    /// Options every request starts from (the keys change mode and block size).
    pub base: DecodeOptions,
    /// The model's context window.
    pub context: usize,
    pub header: TraceHeader,
    /// Record from the start into this file.
    pub record: Option<PathBuf>,
    /// Finished requests as the engine stamped them, for measurements (`ui-bench`).
    pub request_log: Option<RequestLog>,
}

/// Shared list of finished requests; the app appends, a measuring thread reads.
pub type RequestLog = std::sync::Arc<std::sync::Mutex<Vec<RequestTiming>>>;

/// One request from the engine's `request_started` to its `request_finished`.
#[derive(Debug, Clone)]
pub struct RequestTiming {
    pub started: Instant,
    pub finished: Instant,
    pub new_tokens: usize,
    pub text: String,
}

/// The live session's moving parts besides the state.
struct LiveRun {
    live: Live,
    start: Instant,
    recorder: Option<Recorder>,
    known: HashSet<u32>,
    /// When each running request started (for `Live::request_log`).
    started: HashMap<RequestId, Instant>,
}

impl LiveRun {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Feeds an engine event, stamped with when the engine emitted it.
    fn feed_engine(&mut self, s: &mut State, e: Timed) {
        if let Some(log) = &self.live.request_log {
            match &e.event {
                DecodeEvent::RequestStarted { req, .. } => {
                    self.started.insert(*req, e.at);
                }
                DecodeEvent::RequestFinished {
                    req, text, stats, ..
                } => {
                    let started = self.started.remove(req).unwrap_or(e.at);
                    if let Ok(mut log) = log.lock() {
                        log.push(RequestTiming {
                            started,
                            finished: e.at,
                            new_tokens: stats.new_tokens,
                            text: text.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
        self.feed_at(s, e.at, e.event.into());
    }

    /// Feeds an event that happens now.
    fn feed(&mut self, s: &mut State, event: TraceEvent) {
        self.feed_at(s, Instant::now(), event);
    }

    /// Feeds one event to the reducer and the recorder (token text first).
    fn feed_at(&mut self, s: &mut State, at: Instant, event: TraceEvent) {
        if let TraceEvent::Decode(d) = &event {
            let fresh: Vec<u32> = trace::token_ids(d)
                .into_iter()
                .filter(|id| self.known.insert(*id))
                .collect();
            if !fresh.is_empty() {
                let tokens = fresh
                    .into_iter()
                    .map(|id| (id, self.live.tokenizer.token_text(id)))
                    .collect();
                self.feed_one(s, at, SessionEvent::TokenText { tokens }.into());
            }
        }
        self.feed_one(s, at, event);
    }

    fn feed_one(&mut self, s: &mut State, at: Instant, event: TraceEvent) {
        if let Some(r) = &mut self.recorder {
            if let Err(e) = r.write_stamped(at, &event) {
                self.recorder = None;
                update(s, Msg::Recording(None));
                update(
                    s,
                    Msg::Notice {
                        text: format!("recording stopped: {e:#}"),
                        level: Level::Error,
                    },
                );
            }
        }
        let t = at.saturating_duration_since(self.start).as_secs_f64();
        update(s, Msg::Event { t, event });
    }

    fn start_recording(&mut self, s: &mut State, path: PathBuf) {
        let mut header = self.live.header.clone();
        header.set_options(&self.options_for(s.options));
        match Recorder::create(&path, &header) {
            Ok(r) => {
                // Token texts seen before are written again so the file stands alone.
                self.known.clear();
                self.recorder = Some(r);
                update(s, Msg::Recording(Some(path.display().to_string())));
                notice(s, format!("recording to {}", path.display()), Level::Info);
            }
            Err(e) => notice(s, format!("{e:#}"), Level::Error),
        }
    }

    fn stop_recording(&mut self, s: &mut State) {
        if let Some(r) = self.recorder.take() {
            let (text, level) = match r.finish() {
                Ok(p) => (format!("recording saved to {}", p.display()), Level::Info),
                Err(e) => (format!("{e:#}"), Level::Error),
            };
            update(s, Msg::Recording(None));
            update(s, Msg::Notice { text, level });
        }
    }

    fn options_for(&self, o: UiOptions) -> DecodeOptions {
        let mut d = self.live.base.clone();
        d.mode = o.mode;
        d.block = if o.mode == Mode::Ar {
            1
        } else {
            o.block.max(1)
        };
        d.overlap = o.overlap;
        d.adaptive = o.adaptive;
        d
    }

    /// Carries out what the reducer asked for.
    fn apply<B: Backend>(&mut self, s: &mut State, screen: &mut Screen<B>, fx: Vec<Effect>) {
        for e in fx {
            match e {
                Effect::Submit {
                    messages,
                    text,
                    regenerate,
                    options,
                } => {
                    let prompt = match self.live.tokenizer.encode_chat(&messages, false) {
                        Ok(p) => p,
                        Err(e) => {
                            notice(s, format!("cannot encode the message: {e:#}"), Level::Error);
                            continue;
                        }
                    };
                    if prompt.len() + 1 >= self.live.context {
                        notice(
                            s,
                            format!(
                                "the conversation is {} tokens, the model's window is {}: clear the chat (Ctrl+L) or send less",
                                prompt.len(),
                                self.live.context
                            ),
                            Level::Error,
                        );
                        continue;
                    }
                    let options = self.options_for(options);
                    let req = self.live.handle.submit(Submit {
                        prompt,
                        options,
                        family: None,
                    });
                    self.feed(
                        s,
                        SessionEvent::UserMessage {
                            req,
                            text,
                            regenerate,
                        }
                        .into(),
                    );
                }
                Effect::Cancel(id) => self.live.handle.send(EngineCommand::Cancel(id)),
                Effect::Clear => {
                    for id in s.live.clone() {
                        self.live.handle.send(EngineCommand::Cancel(id));
                    }
                    self.feed(s, SessionEvent::ChatCleared.into());
                }
                Effect::Pause => self.live.handle.send(EngineCommand::Pause),
                Effect::Resume => self.live.handle.send(EngineCommand::Resume),
                Effect::Step => {
                    if !s.paused {
                        self.live.handle.send(EngineCommand::Pause);
                    }
                    self.live.handle.send(EngineCommand::Step);
                }
                Effect::SetOptions(o) => {
                    let d = self.options_for(o);
                    self.live
                        .handle
                        .send(EngineCommand::SetOptions(OptionsPatch {
                            mode: Some(d.mode),
                            block: Some(d.block),
                            overlap: Some(d.overlap),
                            adaptive: Some(d.adaptive),
                        }));
                }
                Effect::Copy(text) => screen.copy(&text),
                Effect::ToggleRecord => {
                    if self.recorder.is_some() {
                        self.stop_recording(s);
                    } else {
                        let path = self.live.record.clone().unwrap_or_else(|| {
                            let secs = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_secs());
                            recordings_dir().join(format!("session-{secs}.jsonl"))
                        });
                        self.start_recording(s, path);
                    }
                }
                Effect::SetSpeed(i) => {
                    let ms = LIVE_DELAYS_MS.get(i).copied().unwrap_or(0);
                    self.live
                        .handle
                        .send(EngineCommand::SetDelay(Duration::from_millis(ms)));
                    notice(
                        s,
                        if ms == 0 {
                            "full speed".to_string()
                        } else {
                            format!("slow motion: {ms} ms between rounds")
                        },
                        Level::Info,
                    );
                }
                Effect::Seek(_) => {}
                Effect::Quit => {}
            }
        }
    }
}

fn notice(s: &mut State, text: String, level: Level) {
    update(s, Msg::Notice { text, level });
}

/// Unix signals that end the app cleanly (terminal restored, recording closed).
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Self {
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            let term = async {
                match &mut self.term {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let hup = async {
                match &mut self.hup {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = term => {},
                _ = hup => {},
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    }
}

/// When to draw: after a change, at most every [`FRAME`] for decoding progress and
/// every [`KEY_FRAME`] for keys; bursts in between coalesce into one frame.
struct Pacer {
    /// The gap the pending change needs, `None` when nothing changed.
    pending: Option<Duration>,
    last: Instant,
}

impl Pacer {
    fn new() -> Self {
        Self {
            pending: Some(Duration::ZERO),
            last: Instant::now(),
        }
    }

    /// Something changed; `key` when the user is waiting for it.
    fn changed(&mut self, key: bool) {
        let gap = if key { KEY_FRAME } else { FRAME };
        self.pending = Some(self.pending.map_or(gap, |g| g.min(gap)));
    }

    fn due(&self) -> bool {
        self.pending.is_some_and(|g| self.last.elapsed() >= g)
    }

    fn drawn(&mut self) {
        self.pending = None;
        self.last = Instant::now();
    }

    /// How long until the next frame may be drawn (forever when nothing changed).
    fn wait(&self) -> Duration {
        match self.pending {
            Some(g) => g.saturating_sub(self.last.elapsed()),
            None => Duration::from_secs(3600),
        }
    }
}

/// Runs the live chat until the user quits or a signal arrives.
pub async fn run_live<B: Backend>(
    screen: &mut Screen<B>,
    input: &mut UnboundedReceiver<TermInput>,
    live: Live,
    ui: &Ui,
    s: &mut State,
) -> Result<()> {
    let record = live.record.clone();
    let mut run = LiveRun {
        live,
        start: Instant::now(),
        recorder: None,
        known: HashSet::new(),
        started: HashMap::new(),
    };
    run.live.handle.set_detail(true);
    if let Some(p) = record {
        run.start_recording(s, p);
        if run.recorder.is_none() {
            // Asked to record and cannot: say so before anything is lost.
            bail!(
                "{}",
                s.notice.as_ref().map_or(String::new(), |n| n.text.clone())
            );
        }
    }
    for w in &ui.warnings {
        notice(s, w.clone(), Level::Warning);
    }
    let mut signals = Signals::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut pacer = Pacer::new();
    let result = loop {
        if pacer.due() {
            while let Ok(e) = run.live.events.try_recv() {
                run.feed_engine(s, e);
            }
            if let Err(e) = screen.draw(s, ui) {
                break Err(e);
            }
            pacer.drawn();
        }
        tokio::select! {
            biased;
            i = input.recv() => {
                let Some(i) = i else { break Ok(()) };
                if let Some(m) = input_msg(s, &ui.keymap, i) {
                    let fx = update(s, m);
                    run.apply(s, screen, fx);
                }
                pacer.changed(true);
            }
            e = run.live.events.recv(), if pacer.pending.is_none() => {
                let Some(e) = e else { break Err(anyhow::anyhow!("the engine stopped")) };
                run.feed_engine(s, e);
                // The next events wait in the channel until the frame is due and are
                // read in one go then: no wake-up per event to take a core from the
                // engine. They carry the engine's time, so recordings stay exact.
                pacer.changed(false);
            }
            _ = tick.tick() => {
                let had = s.notice.is_some();
                update(s, Msg::Tick { now: run.now() });
                if had != s.notice.is_some() {
                    pacer.changed(false);
                }
            }
            _ = signals.recv() => break Ok(()),
            _ = tokio::time::sleep(pacer.wait()) => {}
        }
        if s.quit {
            break Ok(());
        }
    };
    for id in s.live.clone() {
        run.live.handle.send(EngineCommand::Cancel(id));
    }
    run.stop_recording(s);
    run.live.handle.shutdown();
    result
}

/// A recording played back through the reducer.
pub struct Player {
    pub trace: Trace,
    pub file: String,
    /// Next event to feed.
    pub pos: usize,
    pub playing: bool,
    pub speed: usize,
    /// Recording time reached.
    pub clock: f64,
    rounds: usize,
}

impl Player {
    pub fn new(trace: Trace, file: String) -> Self {
        Self {
            trace,
            file,
            pos: 0,
            playing: true,
            speed: REPLAY_SPEEDS.iter().position(|s| *s == 1.0).unwrap_or(0),
            clock: 0.0,
            rounds: 0,
        }
    }

    fn feed_next(&mut self, s: &mut State) -> Option<&Stamped> {
        let ev = self.trace.events.get(self.pos)?;
        self.pos += 1;
        if matches!(ev.event, TraceEvent::Decode(DecodeEvent::Verified { .. })) {
            self.rounds += 1;
        }
        self.clock = self.clock.max(ev.t);
        update(
            s,
            Msg::Event {
                t: ev.t,
                event: ev.event.clone(),
            },
        );
        Some(ev)
    }

    /// Feeds every event up to recording time `clock + dt × speed`.
    pub fn advance(&mut self, s: &mut State, dt: f64) -> bool {
        if !self.playing {
            return false;
        }
        let speed = REPLAY_SPEEDS.get(self.speed).copied().unwrap_or(1.0);
        self.clock += dt * speed;
        let mut any = false;
        if let Some(next) = self.trace.events.get(self.pos) {
            if next.t - self.clock > IDLE_LIMIT {
                self.clock = next.t - IDLE_LIMIT;
            }
        }
        while self
            .trace
            .events
            .get(self.pos)
            .is_some_and(|e| e.t <= self.clock)
        {
            self.feed_next(s);
            any = true;
        }
        if self.pos >= self.trace.events.len() && self.playing {
            self.playing = false;
            notice(s, "end of the recording".into(), Level::Info);
            any = true;
        }
        any
    }

    /// Feeds up to and including the next round's commit.
    pub fn step(&mut self, s: &mut State) {
        self.playing = false;
        while let Some(ev) = self.feed_next(s) {
            if matches!(ev.event, TraceEvent::Decode(DecodeEvent::Committed { round, .. }) if round > 0)
            {
                break;
            }
        }
    }

    /// Moves by `by` rounds: rebuilds the state from the start (a replay is cheap).
    pub fn seek(&mut self, s: &mut State, by: i64) {
        let target = (self.rounds as i64 + by).max(0) as usize;
        let mut fresh = State::new(&s.model, &s.device, s.options);
        fresh.chat_area = s.chat_area;
        fresh.origins = s.origins;
        fresh.speed = s.speed;
        fresh.replay = s.replay.clone();
        *s = fresh;
        self.pos = 0;
        self.rounds = 0;
        self.clock = 0.0;
        while self.rounds < target && self.pos < self.trace.events.len() {
            self.feed_next(s);
        }
        // Finish the round reached so it shows whole.
        while let Some(ev) = self.trace.events.get(self.pos) {
            if matches!(
                ev.event,
                TraceEvent::Decode(DecodeEvent::BlockChosen { .. } | DecodeEvent::Drafted { .. })
            ) {
                break;
            }
            self.feed_next(s);
        }
    }

    pub fn status(&self) -> ReplayStatus {
        ReplayStatus {
            file: self.file.clone(),
            pos: self.pos,
            len: self.trace.events.len(),
            playing: self.playing,
            speed: REPLAY_SPEEDS.get(self.speed).copied().unwrap_or(1.0),
        }
    }
}

/// Plays a recording until the user quits.
pub async fn run_replay<B: Backend>(
    screen: &mut Screen<B>,
    input: &mut UnboundedReceiver<TermInput>,
    mut player: Player,
    ui: &Ui,
    s: &mut State,
) -> Result<()> {
    s.replay = Some(player.status());
    s.speed = player.speed;
    for w in ui.warnings.iter().chain(&player.trace.warnings.clone()) {
        notice(s, w.clone(), Level::Warning);
    }
    let mut signals = Signals::new();
    let mut tick = tokio::time::interval(FRAME);
    let mut last = Instant::now();
    let mut pacer = Pacer::new();
    loop {
        if pacer.due() {
            screen.draw(s, ui)?;
            pacer.drawn();
        }
        tokio::select! {
            biased;
            i = input.recv() => {
                let Some(i) = i else { break };
                if let Some(m) = input_msg(s, &ui.keymap, i) {
                    for e in update(s, m) {
                        match e {
                            Effect::Pause => player.playing = false,
                            Effect::Resume => {
                                if player.pos >= player.trace.events.len() {
                                    player.seek(s, -(i64::MAX / 2));
                                }
                                player.playing = true;
                                last = Instant::now();
                            }
                            Effect::Step => player.step(s),
                            Effect::Seek(by) => player.seek(s, by),
                            Effect::SetSpeed(i) => player.speed = i,
                            Effect::Copy(t) => screen.copy(&t),
                            _ => {}
                        }
                    }
                    s.paused = !player.playing;
                    s.replay = Some(player.status());
                }
                pacer.changed(true);
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let dt = (now - last).as_secs_f64();
                last = now;
                if player.advance(s, dt) {
                    s.paused = !player.playing;
                    s.replay = Some(player.status());
                    pacer.changed(false);
                }
                let had = s.notice.is_some();
                update(s, Msg::Tick { now: s.now.max(player.clock) });
                if had != s.notice.is_some() {
                    pacer.changed(false);
                }
            }
            _ = signals.recv() => break,
            _ = tokio::time::sleep(pacer.wait()) => {}
        }
        if s.quit {
            break;
        }
    }
    Ok(())
}
