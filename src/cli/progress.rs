//! Progress of long commands (bench, eval, survival, train): a bar on a terminal
//! (indicatif), plain lines every few seconds otherwise, so a log file or a pipe gets
//! readable lines instead of one that grows with carriage returns.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Plain lines come at most this often (and at the end).
const EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    last: Option<Instant>,
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines when it is not.
    pub fn new(label: &str, total: u64) -> Self {
        Self::with(label, total, std::io::stderr().is_terminal())
    }

    pub fn with(label: &str, total: u64, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let b = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}, ETA {eta})",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_prefix(label.to_string());
            b
        });
        Self {
            bar,
            label: label.to_string(),
            total,
            last: None,
        }
    }

    /// The line plain output prints for `done` of the total, if one is due.
    pub fn line(&mut self, done: u64, msg: &str) -> Option<String> {
        let due = done >= self.total || self.last.is_none_or(|t| t.elapsed() >= EVERY);
        if !due {
            return None;
        }
        self.last = Some(Instant::now());
        Some(format!("{}: {done}/{} {msg}", self.label, self.total))
    }

    /// A new total (a command whose work is known in parts).
    pub fn set_total(&mut self, total: u64) {
        if total != self.total {
            self.total = total;
            if let Some(b) = &self.bar {
                b.set_length(total);
            }
        }
    }

    /// `done` of the total, with what is going on.
    pub fn set(&mut self, done: u64, msg: &str) {
        match &self.bar {
            Some(b) => {
                b.set_position(done);
                b.set_message(msg.to_string());
            }
            None => {
                if let Some(l) = self.line(done, msg) {
                    eprintln!("{l}");
                }
            }
        }
    }

    pub fn finish(&mut self, msg: &str) {
        match &self.bar {
            Some(b) => b.finish_with_message(msg.to_string()),
            None => eprintln!("{}: {msg}", self.label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_periodic_and_end_on_the_total() {
        let mut p = Progress::with("bench", 3, false);
        assert_eq!(p.line(1, "x").as_deref(), Some("bench: 1/3 x"));
        assert_eq!(p.line(2, "y"), None, "too soon");
        assert_eq!(p.line(3, "done").as_deref(), Some("bench: 3/3 done"));
    }
}
