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
    /// Stopping: only these requests (live when the stop was asked) are still
    /// written; the recording is done when the last of them ends (`closed`).
    until: Option<HashSet<RequestId>>,
}

/// How many other names a new recording tries before giving up.
const FRESH_NAMES: usize = 1000;

/// `dir/name-2.jsonl`, `-3`, … for `dir/name.jsonl`: the `n`-th other name of `path`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "recording".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// Takes the advisory exclusive lock of an open output, or says another process
/// writes it (two writers would interleave their lines).
fn lock(file: &File, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on a descriptor this `File` owns and keeps open; it touches no
        // memory of ours.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            anyhow::ensure!(
                e.kind() != std::io::ErrorKind::WouldBlock,
                "{} is being written by another process (it holds the file's lock)",
                path.display()
            );
            // No locks here (some network file systems): write without one.
        }
    }
    #[cfg(not(unix))]
    let _ = (file, path);
    Ok(())
}

fn parent_dir(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    }
    Ok(())
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
    /// Creates (or truncates) `path`, an output asked for by name (`trace record
    /// --out`), and writes the header line. It holds the file's lock while it lives:
    /// a second writer of the same file is refused before it truncates anything.
    pub fn create(path: &Path, header: &TraceHeader) -> Result<Self> {
        parent_dir(path)?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot create the recording {}", path.display()))?;
        lock(&file, path)?;
        // A device or a pipe (`--out /dev/stdout`) has nothing to truncate.
        if file.metadata().is_ok_and(|m| m.is_file()) {
            file.set_len(0)
                .with_context(|| format!("cannot truncate {}", path.display()))?;
        }
        Self::begin(file, path, header)
    }

    /// Creates a new recording at `path`, or, when a file is there, at the first free
    /// `name-2.jsonl`, `name-3.jsonl`, …: a recording never replaces a file (F9,
    /// `--record`). `path()` says where it went.
    pub fn create_new(path: &Path, header: &TraceHeader) -> Result<Self> {
        parent_dir(path)?;
        let candidates =
            std::iter::once(path.to_path_buf()).chain((2..FRESH_NAMES).map(|n| numbered(path, n)));
        for p in candidates {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
            {
                Ok(file) => {
                    // Another process may have taken it between creation and lock.
                    if lock(&file, &p).is_err() {
                        continue;
                    }
                    return Self::begin(file, &p, header);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot create the recording {}", p.display()))
                }
            }
        }
        anyhow::bail!(
            "{} and the numbered names beside it up to -{} exist: not recording over them",
            path.display(),
            FRESH_NAMES - 1
        )
    }

    fn begin(mut file: File, path: &Path, header: &TraceHeader) -> Result<Self> {
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
            until: None,
        })
    }

    /// Stops after the requests in `live` end (a stop asked mid-answer): their events
    /// are still written, later requests' are not. With none live, it is closed now.
    pub fn until(&mut self, live: impl IntoIterator<Item = RequestId>) {
        let open: HashSet<RequestId> = live
            .into_iter()
            .filter(|r| !self.before.contains(r))
            .collect();
        self.until = Some(open);
    }

    /// A stop was asked and every request it waited for has ended.
    pub fn closed(&self) -> bool {
        self.until.as_ref().is_some_and(|u| u.is_empty())
    }

    /// Whether a stop is waiting for answers to end.
    pub fn stopping(&self) -> bool {
        self.until.as_ref().is_some_and(|u| !u.is_empty())
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
        if let Some(until) = &mut self.until {
            return match d.request() {
                Some(r) if until.contains(&r) => {
                    if matches!(
                        d,
                        DecodeEvent::RequestFinished { .. } | DecodeEvent::Error { .. }
                    ) {
                        until.remove(&r);
                    }
                    true
                }
                Some(_) => false,
                // Forwards while the requests waited for answer, unless one from
                // before the recording shares them.
                None => !until.is_empty() && self.before.is_empty(),
            };
        }
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

/// A whole recording as text (header, stamped events, then the closing summary):
/// what `trace import` writes in one piece.
pub fn encode_trace(trace: &super::Trace) -> Result<String> {
    let mut out = serde_json::to_string(&trace.header).context("cannot serialise the header")?;
    out.push('\n');
    let (mut t, mut seq) = (0.0, 0);
    for s in &trace.events {
        out.push_str(&encode_line(s.t, s.seq, &s.event)?);
        out.push('\n');
        (t, seq) = (s.t, s.seq + 1);
    }
    let summary = super::Summary::of(trace.events.iter().map(|s| &s.event));
    let end = TraceEvent::Session(SessionEvent::SessionEnd {
        summary: Box::new(summary),
    });
    out.push_str(&encode_line(t, seq, &end)?);
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::reader::{parse_trace, read_trace, Trace};

    /// The bundled demo recording.
    fn demo() -> Trace {
        read_trace(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl"))
            .unwrap()
    }

    /// Its events but the closing summary.
    fn events_before_the_end(trace: &Trace) -> Vec<&TraceEvent> {
        trace
            .events
            .iter()
            .map(|e| &e.event)
            .filter(|e| !matches!(e, TraceEvent::Session(SessionEvent::SessionEnd { .. })))
            .collect()
    }

    /// Started part way through the demo's first request (as F9 while an answer
    /// streams): the file holds the requests after it, whole, and reads.
    #[test]
    fn a_recording_started_mid_answer_holds_whole_requests() {
        let trace = demo();
        let events = events_before_the_end(&trace);
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

    fn demo_header() -> TraceHeader {
        demo().header
    }

    /// Every subset of taken names among `a.jsonl`, `a-2.jsonl` … `a-5.jsonl`: a new
    /// recording goes to the first free one and no taken file changes.
    #[test]
    fn a_new_recording_never_replaces_a_file() {
        let header = demo_header();
        for taken in 0u32..(1 << 5) {
            let dir = tempfile::tempdir().unwrap();
            let asked = dir.path().join("a.jsonl");
            let name = |k: u32| {
                if k == 0 {
                    asked.clone()
                } else {
                    numbered(&asked, k as usize + 1)
                }
            };
            for k in 0..5 {
                if taken & (1 << k) != 0 {
                    std::fs::write(name(k), format!("file {k}")).unwrap();
                }
            }
            let rec = Recorder::create_new(&asked, &header).unwrap();
            let first_free = (0..6).find(|k| taken & (1 << k) == 0).unwrap();
            assert_eq!(rec.path(), name(first_free), "taken {taken:05b}");
            rec.finish().unwrap();
            for k in 0..5 {
                if taken & (1 << k) != 0 {
                    assert_eq!(
                        std::fs::read_to_string(name(k)).unwrap(),
                        format!("file {k}")
                    );
                }
            }
        }
        assert_eq!(
            numbered(std::path::Path::new("/x/rec"), 3),
            std::path::Path::new("/x/rec-3")
        );
    }

    /// Two writers of one output: the second is refused before it truncates anything,
    /// whichever way each was opened; once the first is done the name is free again.
    #[cfg(unix)]
    #[test]
    fn two_writers_of_one_file_cannot_interleave() {
        let header = demo_header();
        type Open = fn(&Path, &TraceHeader) -> Result<Recorder>;
        let ways: [(&str, Open); 2] = [
            ("create", Recorder::create),
            ("create_new", Recorder::create_new),
        ];
        for (first_name, first) in ways {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("out.jsonl");
            let mut a = first(&path, &header).unwrap();
            a.write(&TraceEvent::Decode(DecodeEvent::EngineState {
                paused: true,
            }))
            .unwrap();
            let before = std::fs::read(&path).unwrap();
            let e = Recorder::create(&path, &header)
                .err()
                .map(|e| format!("{e:#}"));
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("being written by another process")),
                "{first_name} then create: {e:?}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), before, "nothing truncated");
            // A new recording of the same name goes beside it.
            let b = Recorder::create_new(&path, &header).unwrap();
            assert_ne!(b.path(), path.as_path());
            a.finish().unwrap();
            Recorder::create(&path, &header).unwrap().finish().unwrap();
        }
    }

    /// A stop asked while requests answer: their events are still written, later
    /// requests' are not, and the recording is closed when the last one ends; the file
    /// holds whole requests and reads, for every request the stop can come during.
    #[test]
    fn a_stop_mid_answer_waits_for_the_answer_in_flight() {
        let trace = demo();
        let events = events_before_the_end(&trace);
        let started: Vec<usize> = (0..events.len())
            .filter(|&i| {
                matches!(
                    events[i],
                    TraceEvent::Decode(DecodeEvent::RequestStarted { .. })
                )
            })
            .collect();
        assert!(started.len() >= 2);
        let dir = tempfile::tempdir().unwrap();
        for (n, &start) in started.iter().enumerate() {
            // Stop a few events into request n + 1.
            let stop_at = start + 5;
            let path = dir.path().join(format!("stop-{n}.jsonl"));
            let mut rec = Recorder::create(&path, &trace.header).unwrap();
            let live = match events[start] {
                TraceEvent::Decode(d) => d.request().unwrap(),
                _ => unreachable!(),
            };
            let mut closed_at = None;
            for (i, e) in events.iter().enumerate() {
                if i == stop_at {
                    rec.until([live]);
                }
                rec.write(e).unwrap();
                if rec.closed() {
                    closed_at = Some(i);
                    break;
                }
            }
            rec.finish().unwrap();
            let t = parse_trace(&std::fs::read(&path).unwrap(), "stop.jsonl").unwrap();
            let s = t.recorded_summary().unwrap();
            assert_eq!(
                (s.requests, s.finished),
                (n + 1, n + 1),
                "stop during request {live}"
            );
            let finished_at = events
                .iter()
                .position(|e| matches!(e, TraceEvent::Decode(DecodeEvent::RequestFinished { req, .. }) if *req == live))
                .unwrap();
            assert_eq!(closed_at, Some(finished_at));
        }
    }
}
