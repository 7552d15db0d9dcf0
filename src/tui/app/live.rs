//! The live chat: engine events, keys, signals and the recording, through the reducer.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use ratatui::backend::Backend;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{input_msg, Pacer, Screen, Signals, TermInput, Ui};
use crate::engine::{DecodeOptions, EngineCommand, EngineHandle, Submit, Timed};
use crate::model::TextTokenizer;
use crate::trace::{Recorder, SessionEvent, TokenTexts, TraceEvent, TraceHeader};
use crate::tui::action::Action;
use crate::tui::config::recordings_dir;
use crate::tui::state::{pace_label, update, Effect, Level, Msg, State, LIVE_PACES_MS};

/// A live session's engine and everything needed to start requests.
pub struct Live {
    pub handle: EngineHandle,
    pub events: UnboundedReceiver<Timed>,
    pub tokenizer: TextTokenizer,
    /// The model's context window.
    pub context: usize,
    pub header: TraceHeader,
    /// Record from the start into this file.
    pub record: Option<PathBuf>,
}

/// The live session's moving parts besides the state.
struct LiveRun {
    live: Live,
    start: Instant,
    recorder: Option<Recorder>,
    texts: TokenTexts,
}

fn notice(s: &mut State, text: String, level: Level) {
    update(s, Msg::Notice { text, level });
}

impl LiveRun {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Feeds one event to the recorder and the reducer, the text of new token ids first.
    fn feed_at(&mut self, s: &mut State, at: Instant, event: TraceEvent) {
        if let TraceEvent::Decode(d) = &event {
            let tok = &self.live.tokenizer;
            if let Some(texts) = self.texts.before(d, |id| tok.token_text(id)) {
                self.feed_one(s, at, texts.into());
            }
        }
        self.feed_one(s, at, event);
    }

    fn feed(&mut self, s: &mut State, event: TraceEvent) {
        self.feed_at(s, Instant::now(), event);
    }

    fn feed_one(&mut self, s: &mut State, at: Instant, event: TraceEvent) {
        if let Some(r) = &mut self.recorder {
            if let Err(e) = r.write_stamped(at, &event) {
                self.recorder = None;
                update(s, Msg::Recording(None));
                notice(s, format!("recording stopped: {e:#}"), Level::Error);
            }
        }
        let t = at.saturating_duration_since(self.start).as_secs_f64();
        update(s, Msg::Event { t, event });
        // A stop asked mid-answer completes when the answers it waited for end.
        if self.recorder.as_ref().is_some_and(Recorder::closed) {
            self.finish_recording(s);
        }
    }

    fn start_recording(&mut self, s: &mut State, path: PathBuf) {
        let mut header = self.live.header.clone();
        header.set_options(&s.session.options);
        // Never over an existing file: a taken name gets a number (`name-2.jsonl`).
        match Recorder::create_new(&path, &header) {
            Ok(r) => {
                let went = r.path().to_path_buf();
                let renamed = if went == path {
                    String::new()
                } else {
                    format!(" ({} exists)", path.display())
                };
                // Token texts seen before are written again so the file stands alone.
                self.texts.reset();
                // An answer in progress is left out: the file holds whole requests.
                let live = s.session.live.clone();
                let from = if live.is_empty() {
                    ""
                } else {
                    " (from the next message: the answer in progress is not recorded)"
                };
                self.recorder = Some(r.after(live));
                update(s, Msg::Recording(Some(went.display().to_string())));
                notice(
                    s,
                    format!("recording to {}{renamed}{from}", went.display()),
                    Level::Info,
                );
            }
            Err(e) => notice(s, format!("{e:#}"), Level::Error),
        }
    }

    /// F9 while recording: stops once the answers in flight end, so the file holds
    /// them whole (as a start waits for the next message); at once when none is in
    /// flight, or when a stop is already waiting (F9 twice cuts now).
    fn stop_recording(&mut self, s: &mut State) {
        let live = s.session.live.clone();
        match &mut self.recorder {
            Some(r) if !live.is_empty() && !r.stopping() => {
                r.until(live);
                if r.closed() {
                    self.finish_recording(s);
                } else {
                    notice(
                        s,
                        format!(
                            "recording stops when the answer in flight ends ({} again stops it now)",
                            s.keys.key(Action::ToggleRecord)
                        ),
                        Level::Info,
                    );
                }
            }
            _ => self.finish_recording(s),
        }
    }

    /// Writes the recording's summary line and closes it.
    fn finish_recording(&mut self, s: &mut State) {
        if let Some(r) = self.recorder.take() {
            let (text, level) = match r.finish() {
                Ok(p) => (format!("recording saved to {}", p.display()), Level::Info),
                Err(e) => (format!("{e:#}"), Level::Error),
            };
            update(s, Msg::Recording(None));
            update(s, Msg::Notice { text, level });
        }
    }

    fn submit(
        &mut self,
        s: &mut State,
        messages: &[crate::model::ChatMessage],
        text: String,
        regenerate: bool,
        options: DecodeOptions,
    ) {
        let prompt = match self.live.tokenizer.encode_chat(messages, false) {
            Ok(p) => p,
            Err(e) => {
                notice(s, format!("cannot encode the message: {e:#}"), Level::Error);
                return;
            }
        };
        if let Err(e) = crate::engine::check_prompt_len(prompt.len(), self.live.context) {
            let text = match e {
                crate::engine::PromptError::TooLong { len, context } => format!(
                    "the conversation is {len} tokens, the model's window is {context}: clear the chat ({}) or send less",
                    s.keys.key(Action::Clear)
                ),
                crate::engine::PromptError::Empty => e.to_string(),
            };
            notice(s, text, Level::Error);
            return;
        }
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

    /// Carries out what the reducer asked for.
    fn apply<B: Backend>(&mut self, s: &mut State, screen: &mut Screen<B>, fx: Vec<Effect>) {
        for e in fx {
            match e {
                Effect::Submit {
                    messages,
                    text,
                    regenerate,
                    options,
                } => self.submit(s, &messages, text, regenerate, options),
                Effect::Cancel(id) => self.live.handle.send(EngineCommand::Cancel(id)),
                Effect::Clear => {
                    for id in s.session.live.clone() {
                        self.live.handle.send(EngineCommand::Cancel(id));
                    }
                    self.feed(s, SessionEvent::ChatCleared.into());
                }
                Effect::Pause => self.live.handle.send(EngineCommand::Pause),
                Effect::Resume => self.live.handle.send(EngineCommand::Resume),
                Effect::Step => {
                    if !s.status.paused {
                        self.live.handle.send(EngineCommand::Pause);
                    }
                    self.live.handle.send(EngineCommand::Step);
                }
                Effect::SetOptions(o) => self
                    .live
                    .handle
                    .send(EngineCommand::SetOptions(Box::new(o))),
                Effect::Copy(text) => {
                    let said = screen.copy(&text);
                    notice(s, said, Level::Info);
                }
                Effect::SetMouse(on) => screen.set_mouse(on),
                Effect::ToggleRecord => {
                    if self.recorder.is_some() {
                        self.stop_recording(s);
                    } else {
                        let path = self.live.record.clone().unwrap_or_else(|| {
                            let secs = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_secs());
                            recordings_dir().join(format!("session-{}.jsonl", utc_stamp(secs)))
                        });
                        self.start_recording(s, path);
                    }
                }
                Effect::SetPace(i) => {
                    let ms = LIVE_PACES_MS.get(i).copied().unwrap_or(0);
                    self.live
                        .handle
                        .send(EngineCommand::SetDelay(Duration::from_millis(ms)));
                    notice(
                        s,
                        if ms == 0 {
                            "full speed".to_string()
                        } else {
                            format!("slow motion: {} between rounds", pace_label(ms))
                        },
                        Level::Info,
                    );
                }
                Effect::Seek(_) | Effect::Quit => {}
            }
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The user quit (or input ended).
    Quit,
    /// A signal ended it (its number: exit with 128 + it).
    Signal(i32),
}

/// Runs the live chat until the user quits or a signal arrives.
pub async fn run_live<B: Backend>(
    screen: &mut Screen<B>,
    input: &mut UnboundedReceiver<TermInput>,
    live: Live,
    ui: &Ui,
    s: &mut State,
) -> Result<Ended> {
    let record = live.record.clone();
    let mut run = LiveRun {
        live,
        start: Instant::now(),
        recorder: None,
        texts: TokenTexts::default(),
    };
    run.live.handle.set_detail(true);
    // The pace the state opens with (slow motion for the chat, so the first answer can
    // be followed round by round).
    let ms = s.status.live_pace_ms();
    run.live
        .handle
        .send(EngineCommand::SetDelay(Duration::from_millis(ms)));
    screen.set_mouse(s.chat.mouse);
    if let Some(p) = record {
        run.start_recording(s, p);
        if run.recorder.is_none() {
            // Asked to record and cannot: say so before anything is lost.
            bail!(
                "{}",
                s.status
                    .notice
                    .as_ref()
                    .map_or(String::new(), |n| n.text.clone())
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
                run.feed_at(s, e.at, e.event.into());
            }
            if let Err(e) = screen.draw(s, ui) {
                break Err(e);
            }
            pacer.drawn();
        }
        tokio::select! {
            biased;
            i = input.recv() => {
                let Some(i) = i else { break Ok(Ended::Quit) };
                if let Some(m) = input_msg(s, &ui.keymap, i) {
                    let fx = update(s, m);
                    run.apply(s, screen, fx);
                }
                pacer.changed(true);
            }
            e = run.live.events.recv(), if pacer.pending.is_none() => {
                let Some(e) = e else { break Err(anyhow::anyhow!("the engine stopped")) };
                run.feed_at(s, e.at, e.event.into());
                // The next events wait in the channel until the frame is due and are
                // read in one go then: no wake-up per event to take a core from the
                // engine. They carry the engine's time, so recordings stay exact.
                pacer.changed(false);
            }
            _ = tick.tick() => {
                let had = s.status.notice.is_some();
                update(s, Msg::Tick { now: run.now() });
                if had != s.status.notice.is_some() {
                    pacer.changed(false);
                }
            }
            n = signals.recv() => break Ok(Ended::Signal(n)),
            _ = tokio::time::sleep(pacer.wait()) => {}
        }
        if s.quit {
            break Ok(Ended::Quit);
        }
    };
    for id in s.session.live.clone() {
        run.live.handle.send(EngineCommand::Cancel(id));
    }
    run.finish_recording(s);
    run.live.handle.shutdown();
    result
}

/// `2026-12-06_215943Z` for a Unix time: a recording's default name that reads as a
/// date and sorts as one (UTC: no time zone database is consulted).
fn utc_stamp(secs: u64) -> String {
    let rem = secs % 86_400;
    format!(
        "{}_{:02}{:02}{:02}Z",
        crate::utc_date(secs),
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod stamp_tests {
    use super::utc_stamp;

    /// Against dates whose Unix times are known, leap days and year ends included.
    #[test]
    fn utc_stamps_read_as_dates() {
        for (secs, want) in [
            (0, "1970-01-01_000000Z"),
            (951_782_400, "2000-02-29_000000Z"),
            (1_709_251_199, "2024-02-29_235959Z"),
            (1_735_689_599, "2024-12-31_235959Z"),
            (1_796_566_106, "2026-12-06_140826Z"),
            (4_102_444_800, "2100-01-01_000000Z"),
        ] {
            assert_eq!(utc_stamp(secs), want, "{secs}");
        }
    }
}
