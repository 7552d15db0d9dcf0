//! The status line's state: pause, pace, recording, replay position, notices (and
//! every warning in full, for the help page).

/// Pauses between live rounds, in milliseconds: full speed, then slow motion.
pub const LIVE_PACES_MS: &[u64] = &[0, 100, 300, 1000, 2000];
/// The chat's pace when it opens, 1 s a round: a newcomer can read a round's verdict
/// and its branch rows before the next round replaces them (at 300 ms they could
/// not). Alt+= speeds up.
pub const DEFAULT_LIVE_PACE: usize = 3;

/// A live pace as the status line says it: `300ms`, `1s`.
pub fn pace_label(ms: u64) -> String {
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// How fast a replay plays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayPace {
    /// A fixed number of rounds per second, whatever the recording's timing.
    RoundsPerSec(f64),
    /// The recorded timing, this many times faster.
    Recorded(f64),
}

impl ReplayPace {
    pub fn label(self) -> String {
        match self {
            ReplayPace::RoundsPerSec(1.0) => "1 round/s".to_string(),
            ReplayPace::RoundsPerSec(r) => format!("{r} rounds/s"),
            ReplayPace::Recorded(x) => format!("×{x} recorded"),
        }
    }
}

/// Replay paces, slowest first.
pub const REPLAY_PACES: &[ReplayPace] = &[
    ReplayPace::RoundsPerSec(1.0),
    ReplayPace::RoundsPerSec(3.0),
    ReplayPace::RoundsPerSec(10.0),
    ReplayPace::Recorded(1.0),
    ReplayPace::Recorded(4.0),
    ReplayPace::Recorded(16.0),
];
/// A replay opens at 3 rounds a second: readable, and a recording made headless
/// (whose rounds took a millisecond) does not flash by.
pub const DEFAULT_REPLAY_PACE: usize = 1;

/// Notice severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

/// What a notice is about, so that the state it describes can take it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topic {
    #[default]
    General,
    /// "Still answering": gone once nothing answers.
    Busy,
    /// "Ctrl+C again quits": a second Ctrl+C quits only while this is shown.
    Quit,
}

/// A status-line message.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub text: String,
    pub level: Level,
    pub until: f64,
    pub topic: Topic,
}

/// Replay progress as the status line shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStatus {
    pub file: String,
    /// Events fed so far / in the file.
    pub pos: usize,
    pub len: usize,
    pub playing: bool,
    pub pace: ReplayPace,
}

/// The status line's state.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub paused: bool,
    /// Index into `LIVE_PACES_MS` (live) or `REPLAY_PACES` (replay).
    pub pace: usize,
    pub recording: Option<String>,
    pub replay: Option<ReplayStatus>,
    pub notice: Option<Notice>,
    /// The session's notices in full, oldest first (the help's messages page lists
    /// them newest first; the status line may have cut them). At most `MAX_MESSAGES`.
    pub messages: Vec<(Level, String)>,
    /// Wall-clock seconds of the session (ticks), what notices expire by.
    pub clock: f64,
}

/// Notices kept for the help's messages page.
pub const MAX_MESSAGES: usize = 200;

impl Status {
    pub fn notice(&mut self, text: impl Into<String>, level: Level, topic: Topic) {
        let text = text.into();
        let repeated = self.messages.last().is_some_and(|m| m.1 == text)
            || (level != Level::Info && self.messages.iter().any(|m| m.1 == text));
        if !repeated {
            if self.messages.len() == MAX_MESSAGES {
                self.messages.remove(0);
            }
            self.messages.push((level, text.clone()));
        }
        let secs = if level == Level::Info { 4.0 } else { 10.0 };
        self.notice = Some(Notice {
            text,
            level,
            until: self.clock + secs,
            topic,
        });
    }

    /// Time passes: notices expire.
    pub fn tick(&mut self, clock: f64) {
        self.clock = self.clock.max(clock);
        if self.notice.as_ref().is_some_and(|n| n.until < self.clock) {
            self.notice = None;
        }
    }

    /// Ctrl+C was pressed and its notice still shows: a second one quits.
    pub fn quit_armed(&self) -> bool {
        self.notice.as_ref().is_some_and(|n| n.topic == Topic::Quit)
    }

    /// Takes back a notice about `topic`.
    pub fn clear(&mut self, topic: Topic) {
        if self.notice.as_ref().is_some_and(|n| n.topic == topic) {
            self.notice = None;
        }
    }

    /// The live pause between rounds.
    pub fn live_pace_ms(&self) -> u64 {
        LIVE_PACES_MS.get(self.pace).copied().unwrap_or(0)
    }
}
