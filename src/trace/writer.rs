//! Writes a recording line by line, flushed as it goes, so a killed process leaves a
//! readable prefix.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use super::summary::SummaryBuilder;
use super::{SessionEvent, TraceEvent, TraceHeader};
use crate::engine::events::{DecodeEvent, RequestId};

/// An open recording.
pub struct Recorder {
    path: PathBuf,
    file: File,
    start: Instant,
    seq: u64,
    summary: SummaryBuilder,
    finished: bool,
    /// Requests that started before the recording did: their events, and the
    /// forwards while one is live, are left out, so the file holds whole requests.
    before: HashSet<RequestId>,
}

/// Serialises one stamped line (no newline): `{"t":..,"seq":..,"kind":.., ...}`.
pub fn encode_line(t: f64, seq: u64, event: &TraceEvent) -> Result<String> {
    let body = match event {
        TraceEvent::Decode(d) => serde_json::to_string(d),
        TraceEvent::Session(s) => serde_json::to_string(s),
    }
    .context("cannot serialise an event")?;
    // Straight to text (no intermediate `Value`): this runs for every event of a live
    // session. Events are objects with at least `kind`, so `body` starts with `{"`.
    let fields = body
        .strip_prefix('{')
        .context("an event did not serialise to an object")?;
    // Rounded to microseconds: the file stays short and `t` still orders events.
    let t = serde_json::to_string(&((t * 1e6).round() / 1e6)).context("bad time")?;
    Ok(format!("{{\"t\":{t},\"seq\":{seq},{fields}"))
}

impl Recorder {
    /// Creates (or truncates) `path` and writes the header line.
    pub fn create(path: &Path, header: &TraceHeader) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        let mut file = File::create(path)
            .with_context(|| format!("cannot create the recording {}", path.display()))?;
        let line = serde_json::to_string(header).context("cannot serialise the header")?;
        writeln!(file, "{line}")
            .and_then(|_| file.flush())
            .with_context(|| format!("cannot write to {}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            start: Instant::now(),
            seq: 0,
            summary: SummaryBuilder::default(),
            finished: false,
            before: HashSet::new(),
        })
    }

    /// A recording started while `live` answer: their rest is not written (a request
    /// without its start is what an edited file looks like, and its counts would be
    /// partial); the recording holds the requests after them.
    pub fn after(mut self, live: impl IntoIterator<Item = RequestId>) -> Self {
        self.before = live.into_iter().collect();
        self
    }

    /// Whether `event` belongs in the file; a request started before ends with its
    /// `request_finished` or `error`.
    fn keeps(&mut self, event: &TraceEvent) -> bool {
        let TraceEvent::Decode(d) = event else {
            return true;
        };
        match d.request() {
            Some(r) if self.before.contains(&r) => {
                if matches!(
                    d,
                    DecodeEvent::RequestFinished { .. } | DecodeEvent::Error { .. }
                ) {
                    self.before.remove(&r);
                }
                false
            }
            None if matches!(d, DecodeEvent::Forward { .. }) => self.before.is_empty(),
            _ => true,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Seconds since the recording started.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Appends one event stamped now.
    pub fn write(&mut self, event: &TraceEvent) -> Result<()> {
        let t = self.elapsed();
        self.write_at(t, event)
    }

    /// Appends one event that happened at `at` (the engine's clock, not the writer's).
    pub fn write_stamped(&mut self, at: Instant, event: &TraceEvent) -> Result<()> {
        let t = at.saturating_duration_since(self.start).as_secs_f64();
        self.write_at(t, event)
    }

    /// Appends one event with a given time (replays of other clocks, tests).
    pub fn write_at(&mut self, t: f64, event: &TraceEvent) -> Result<()> {
        if !self.keeps(event) {
            return Ok(());
        }
        self.summary.push(event);
        let line = encode_line(t, self.seq, event)?;
        self.seq += 1;
        // One write per line, then flush: a crash loses at most the line being written.
        writeln!(self.file, "{line}")
            .and_then(|_| self.file.flush())
            .with_context(|| format!("cannot write to {}", self.path.display()))
    }

    /// Writes the `session_end` summary line. Dropping without it leaves a file that
    /// still replays (readers do not need the summary).
    pub fn finish(mut self) -> Result<PathBuf> {
        self.finish_inner()?;
        Ok(self.path.clone())
    }

    fn finish_inner(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let summary = self.summary.summary();
        self.write(&TraceEvent::Session(SessionEvent::SessionEnd {
            summary: Box::new(summary),
        }))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.finish_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::reader::{parse_trace, read_trace};

    /// Started part way through the demo's first request (as F9 while an answer
    /// streams): the file holds the requests after it, whole, and reads.
    #[test]
    fn a_recording_started_mid_answer_holds_whole_requests() {
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
        let trace = read_trace(&demo).unwrap();
        let events: Vec<&TraceEvent> = trace
            .events
            .iter()
            .map(|e| &e.event)
            .filter(|e| !matches!(e, TraceEvent::Session(SessionEvent::SessionEnd { .. })))
            .collect();
        let mid = events
            .iter()
            .position(|e| matches!(e, TraceEvent::Decode(DecodeEvent::Verified { req: 1, .. })))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mid.jsonl");
        let mut rec = Recorder::create(&path, &trace.header).unwrap().after([1]);
        for e in &events[mid..] {
            rec.write(e).unwrap();
        }
        rec.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let t = parse_trace(&bytes, "mid.jsonl").unwrap();
        let s = t.recorded_summary().unwrap();
        let all = trace.recorded_summary().unwrap();
        assert_eq!(
            (s.requests, s.finished),
            (all.requests - 1, all.finished - 1)
        );
        assert!(t
            .events
            .iter()
            .all(|e| !matches!(&e.event, TraceEvent::Decode(d) if d.request() == Some(1))));
        // Without `after`, the same cut is refused: request 1 has no start.
        let mut rec = Recorder::create(&path, &trace.header).unwrap();
        for e in &events[mid..] {
            rec.write(e).unwrap();
        }
        rec.finish().unwrap();
        let e = format!(
            "{:#}",
            parse_trace(&std::fs::read(&path).unwrap(), "x").unwrap_err()
        );
        assert!(e.contains("request 1 has no `request_started`"), "{e}");
    }
}
