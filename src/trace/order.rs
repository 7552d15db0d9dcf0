//! A recording's events checked against the order a recorder writes them in, line by
//! line (the round order is the round assembler's).

use std::collections::HashMap;

use anyhow::{bail, ensure, Result};

use super::{SessionEvent, Stamped, TraceEvent};
use crate::engine::events::{DecodeEvent, RequestId, Tally};

/// The order a recorder writes: `seq` rises line by line, a request starts once and its
/// events come between its start and its end (`request_finished`, or an `error` naming
/// it), each round of a request is verified and committed once and in turn, and
/// `session_end` is the last event. A file that breaks it was edited or spliced, and
/// its statistics would be wrong (a request finished twice counts twice).
#[derive(Debug, Default)]
pub struct Order {
    /// The last event's `seq` and line.
    last: Option<(u64, usize)>,
    /// Each request's statistics rebuilt from its events, against those its
    /// `request_finished` states (event version 3 on: before, the engine counted an
    /// answer's last round past its end).
    rebuilt: super::summary::SummaryBuilder,
    check_stats: bool,
    /// The line of `session_end`.
    end: Option<usize>,
    requests: HashMap<RequestId, Life>,
}

/// One request's lines so far.
#[derive(Debug, Default)]
struct Life {
    started: usize,
    /// The line that ended it, and how.
    ended: Option<(usize, &'static str)>,
}

impl Order {
    /// The order check of a file of this event version.
    pub fn new(event_version: u32) -> Self {
        Self {
            check_stats: event_version >= 3,
            ..Self::default()
        }
    }

    /// A line whose event this reader does not know (skipped), for the `seq` count.
    pub fn skip(&mut self, seq: u64, line: usize) -> Result<()> {
        self.next_seq(seq, line)
    }

    /// `seq` runs 0, 1, 2 … without a gap: a line deleted, repeated or moved breaks it.
    fn next_seq(&mut self, seq: u64, line: usize) -> Result<()> {
        let want = self.last.map_or(0, |(s, _)| s.saturating_add(1));
        match self.last {
            Some((prev, at)) => ensure!(
                seq == want,
                "`seq` is {seq} after {prev} at line {at}: expected {want}; events are missing, out of order or repeated"
            ),
            None => ensure!(
                seq == 0,
                "`seq` of the first event is {seq}, not 0: events before it are missing"
            ),
        }
        self.last = Some((seq, line));
        Ok(())
    }

    /// Checks the event read at `line` against those before it.
    pub fn push(&mut self, s: &Stamped, line: usize) -> Result<()> {
        self.next_seq(s.seq, line)?;
        if let Some(at) = self.end {
            bail!("an event after `session_end` (line {at}), which closes the recording");
        }
        let d = match &s.event {
            TraceEvent::Session(SessionEvent::SessionEnd { .. }) => {
                self.end = Some(line);
                return Ok(());
            }
            TraceEvent::Session(_) => return Ok(()),
            TraceEvent::Decode(d) => d,
        };
        let Some(req) = d.request() else {
            return Ok(());
        };
        if let DecodeEvent::RequestStarted { .. } = d {
            if let Some(l) = self.requests.get(&req) {
                bail!(
                    "request {req} starts again (it started at line {})",
                    l.started
                );
            }
            self.requests.insert(
                req,
                Life {
                    started: line,
                    ..Life::default()
                },
            );
            self.rebuilt.push_decode(d)?;
            return Ok(());
        }
        let Some(life) = self.requests.get_mut(&req) else {
            // A submission the engine refused fails before it starts.
            if let DecodeEvent::Error { .. } = d {
                return Ok(());
            }
            bail!("request {req} has no `request_started` before this line");
        };
        if let Some((at, how)) = life.ended {
            bail!("request {req} {how} at line {at}");
        }
        if let (true, DecodeEvent::RequestFinished { stats, .. }) = (self.check_stats, d) {
            if let Some(rebuilt) = self.rebuilt.open_tally(req) {
                stats_agree(&stats.tally, rebuilt, req)?;
            }
        }
        // The round order is the assembler's: its error is the recording's.
        self.rebuilt.push_decode(d)?;
        match d {
            DecodeEvent::RequestFinished { .. } => life.ended = Some((line, "already finished")),
            DecodeEvent::Error { .. } => life.ended = Some((line, "already failed")),
            _ => {}
        }
        Ok(())
    }
}

/// A request's stated statistics against those its events add up to.
fn stats_agree(stated: &Tally, events: &Tally, req: RequestId) -> Result<()> {
    let pairs: [(&str, usize, usize); 10] = [
        ("new_tokens", stated.new_tokens, events.new_tokens),
        ("decode_tokens", stated.decode_tokens, events.decode_tokens),
        ("rounds", stated.rounds, events.rounds),
        (
            "draft_forwards",
            stated.draft_forwards,
            events.draft_forwards,
        ),
        ("saved_drafts", stated.saved_drafts, events.saved_drafts),
        (
            "verify_forwards + fused_forwards",
            stated.verify_forwards + stated.fused_forwards,
            events.verify_forwards + events.fused_forwards,
        ),
        ("query_tokens", stated.query_tokens, events.query_tokens),
        (
            "denoise_forwards",
            stated.denoise_forwards,
            events.denoise_forwards,
        ),
        (
            "refresh_forwards",
            stated.refresh_forwards,
            events.refresh_forwards,
        ),
        ("ar_agree", stated.ar_agree, events.ar_agree),
    ];
    for (what, a, b) in pairs {
        ensure!(
            a == b,
            "request {req}'s `stats.tally.{what}` is {a}, but its events add up to {b}"
        );
    }
    ensure!(
        stated.accept_hist == events.accept_hist && stated.blocks == events.blocks,
        "request {req}'s `stats.tally` histograms differ from what its events add up to"
    );
    Ok(())
}
