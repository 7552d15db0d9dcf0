//! A recording played back through the same reducer, on a clock of its own: at a
//! fixed number of rounds a second, or at the recorded timing sped up.

use std::time::Instant;

use anyhow::Result;
use ratatui::backend::Backend;
use tokio::sync::mpsc::UnboundedReceiver;

use super::live::Ended;
use super::{input_msg, Pacer, Screen, Signals, TermInput, Ui, FRAME};
use crate::engine::events::DecodeEvent;
use crate::trace::{SessionEvent, Stamped, Trace, TraceEvent};
use crate::tui::action::Action;
use crate::tui::state::{
    update, Effect, Level, Msg, ReplayPace, ReplayStatus, State, DEFAULT_REPLAY_PACE, REPLAY_PACES,
};

/// Replays skip idle gaps longer than this (seconds of recording time).
const IDLE_LIMIT: f64 = 1.0;

fn ends_round(e: &Stamped) -> bool {
    matches!(e.event, TraceEvent::Decode(DecodeEvent::Committed { round, .. }) if round > 0)
        || matches!(e.event, TraceEvent::Session(SessionEvent::ImportedRound(_)))
}

/// A recording played back through the reducer.
pub struct Player {
    pub trace: Trace,
    pub file: String,
    /// Next event to feed.
    pub pos: usize,
    pub playing: bool,
    /// Index into [`REPLAY_PACES`].
    pub pace: usize,
    /// Recording time reached.
    pub clock: f64,
    /// Seconds played since the last round ended (rounds-per-second paces).
    since_round: f64,
    rounds: usize,
}

impl Player {
    pub fn new(trace: Trace, file: String) -> Self {
        Self {
            trace,
            file,
            pos: 0,
            playing: true,
            pace: DEFAULT_REPLAY_PACE,
            clock: 0.0,
            since_round: 0.0,
            rounds: 0,
        }
    }

    fn feed_next(&mut self, s: &mut State) -> Option<&Stamped> {
        let ev = self.trace.events.get(self.pos)?;
        self.pos += 1;
        if ends_round(ev) {
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

    /// Plays `dt` seconds; whether anything changed.
    pub fn advance(&mut self, s: &mut State, dt: f64) -> bool {
        if !self.playing {
            return false;
        }
        let mut any = false;
        match REPLAY_PACES
            .get(self.pace)
            .copied()
            .unwrap_or(ReplayPace::Recorded(1.0))
        {
            ReplayPace::RoundsPerSec(r) => {
                self.since_round += dt;
                while self.since_round >= 1.0 / r && self.pos < self.trace.events.len() {
                    self.since_round -= 1.0 / r;
                    self.feed_round(s);
                    any = true;
                }
            }
            ReplayPace::Recorded(x) => {
                self.clock += dt * x;
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
            }
        }
        if self.pos >= self.trace.events.len() && self.playing {
            self.playing = false;
            // A recording cut off mid-answer (a killed session) says so: its last
            // answers have no end.
            let cut: Vec<String> = s.session.live.iter().map(ToString::to_string).collect();
            let (text, level) = if cut.is_empty() {
                ("end of the recording".to_string(), Level::Info)
            } else {
                let which = if cut.len() == 1 {
                    format!("request {} has", cut[0])
                } else {
                    format!("requests {} have", cut.join(", "))
                };
                (
                    format!("the recording stops mid-answer: {which} no end"),
                    Level::Warning,
                )
            };
            update(
                s,
                Msg::Notice {
                    text: format!(
                        "{text} ({} plays it again)",
                        s.keys.key(Action::TogglePause)
                    ),
                    level,
                },
            );
            any = true;
        }
        any
    }

    /// Feeds up to and including the next round's commit.
    fn feed_round(&mut self, s: &mut State) {
        while let Some(ev) = self.feed_next(s) {
            if ends_round(ev) {
                break;
            }
        }
    }

    /// F6: one round, then paused.
    pub fn step(&mut self, s: &mut State) {
        self.playing = false;
        self.feed_round(s);
    }

    /// Moves by `by` rounds: forgets what was played and plays again to there (a
    /// replay is cheap).
    pub fn seek(&mut self, s: &mut State, by: i64) {
        let target = (self.rounds as i64 + by).max(0) as usize;
        update(s, Msg::Reset);
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
            pace: REPLAY_PACES
                .get(self.pace)
                .copied()
                .unwrap_or(ReplayPace::Recorded(1.0)),
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
) -> Result<Ended> {
    update(s, Msg::Replay(player.status()));
    for w in ui.warnings.iter().chain(&player.trace.warnings.clone()) {
        update(
            s,
            Msg::Notice {
                text: w.clone(),
                level: Level::Warning,
            },
        );
    }
    if player.trace.events.is_empty() {
        update(
            s,
            Msg::Notice {
                text: format!("{} holds no events: nothing to replay", player.file),
                level: Level::Warning,
            },
        );
    }
    screen.set_mouse(s.chat.mouse);
    let mut signals = Signals::new();
    let mut tick = tokio::time::interval(FRAME);
    let mut last = Instant::now();
    let opened = last;
    let mut pacer = Pacer::new();
    let ended = loop {
        if pacer.due() {
            screen.draw(s, ui)?;
            pacer.drawn();
        }
        tokio::select! {
            biased;
            i = input.recv() => {
                let Some(i) = i else { break Ended::Quit };
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
                            Effect::SetPace(i) => {
                                player.pace = i;
                                // Said, so an older notice ("already at the fastest
                                // pace") does not stand beside the new pace.
                                let label = REPLAY_PACES.get(i).map_or(String::new(), |p| p.label());
                                update(s, Msg::Notice { text: format!("replay pace: {label}"), level: Level::Info });
                            }
                            Effect::Copy(t) => {
                                let said = screen.copy(&t);
                                update(s, Msg::Notice { text: said, level: Level::Info });
                            }
                            Effect::SetMouse(on) => screen.set_mouse(on),
                            _ => {}
                        }
                    }
                    update(s, Msg::Replay(player.status()));
                }
                pacer.changed(true);
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let dt = (now - last).as_secs_f64();
                last = now;
                if player.advance(s, dt) {
                    update(s, Msg::Replay(player.status()));
                    pacer.changed(false);
                }
                let had = s.status.notice.is_some();
                update(s, Msg::Tick { now: opened.elapsed().as_secs_f64() });
                if had != s.status.notice.is_some() {
                    pacer.changed(false);
                }
            }
            n = signals.recv() => break Ended::Signal(n),
            _ = tokio::time::sleep(pacer.wait()) => {}
        }
        if s.quit {
            break Ended::Quit;
        }
    };
    Ok(ended)
}

/// The screen a replay shows at `w`×`h` after its first `rounds` rounds (paused, as
/// F6 leaves it), or at its end, as text: one line per row, trailing blanks cut. What
/// the docs' screen captures are made with, so none is pasted by hand.
pub fn snapshot(
    mut player: Player,
    ui: &Ui,
    s: &mut State,
    (w, h): (u16, u16),
    rounds: Option<usize>,
) -> Result<String> {
    update(s, Msg::Replay(player.status()));
    match rounds {
        Some(n) => {
            let total = player.trace.events.iter().filter(|e| ends_round(e)).count();
            anyhow::ensure!(
                n <= total,
                "{} holds {total} rounds; --at-round {n} is past its end",
                player.file
            );
            // Paused there, as F6 leaves it (round 0 too: nothing played).
            player.playing = false;
            for _ in 0..n {
                player.step(s);
            }
        }
        None => {
            player.advance(s, f64::INFINITY);
        }
    }
    update(s, Msg::Replay(player.status()));
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h))?;
    term.draw(|f| crate::tui::render::draw(f, s, &ui.theme, &ui.keymap))?;
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut row = String::new();
        let mut skip = 0;
        for x in 0..w {
            // A wide symbol's second cell is blank in the buffer: the symbol covers it.
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let sym = buf[(x, y)].symbol();
            skip = unicode_width::UnicodeWidthStr::width(sym).saturating_sub(1);
            row.push_str(sym);
        }
        out.push_str(row.trim_end());
        out.push('\n');
    }
    Ok(out)
}
