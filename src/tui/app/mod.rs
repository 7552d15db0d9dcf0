//! The app around the reducer: the terminal it draws on (`screen`), keys and mouse into
//! messages (`keys`), the live chat's loop with the engine, signals and recording
//! (`live`), and the replay player (`replay`). Each loop draws only when something
//! changed: at most 20 frames a second for decoding progress, at once for a key.

mod keys;
mod live;
mod replay;
mod screen;

use std::time::{Duration, Instant};

pub use keys::{input_msg, key_msg};
pub use live::{run_live, Ended, Live};
pub use replay::{run_replay, snapshot, Player};
pub use screen::Screen;

use super::keymap::Keymap;
use super::theme::Theme;

/// Shortest gap between frames that only show decoding progress (20 per second: the
/// eye gains nothing from more, and each frame takes CPU from the engine).
const FRAME: Duration = Duration::from_millis(50);
/// Shortest gap between frames answering a key (keys should feel immediate).
const KEY_FRAME: Duration = Duration::from_millis(4);

/// What the terminal sends.
#[derive(Debug, Clone)]
pub enum TermInput {
    Key(crossterm::event::KeyEvent),
    Paste(String),
    /// The mouse wheel: negative scrolls up.
    Wheel(i64),
    Resize,
}

/// Theme, keys and the problems found loading them.
pub struct Ui {
    pub theme: Theme,
    pub keymap: Keymap,
    pub warnings: Vec<String>,
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

/// Unix signals that end the app cleanly (terminal restored, recording closed): the
/// ones a terminal or `kill` sends to end a process. Which one came decides the exit
/// status (128 + its number).
pub struct Signals {
    #[cfg(unix)]
    streams: Vec<(i32, tokio::signal::unix::Signal)>,
}

impl Signals {
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let kinds = [
                (1, SignalKind::hangup()),
                (2, SignalKind::interrupt()),
                (3, SignalKind::quit()),
                (15, SignalKind::terminate()),
            ];
            Self {
                streams: kinds
                    .into_iter()
                    .filter_map(|(n, k)| signal(k).ok().map(|s| (n, s)))
                    .collect(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next signal's number.
    pub async fn recv(&mut self) -> i32 {
        #[cfg(unix)]
        {
            if self.streams.is_empty() {
                return std::future::pending().await;
            }
            let streams = &mut self.streams;
            std::future::poll_fn(move |cx| {
                for (n, s) in streams.iter_mut() {
                    if s.poll_recv(cx).is_ready() {
                        return std::task::Poll::Ready(*n);
                    }
                }
                std::task::Poll::Pending
            })
            .await
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}
