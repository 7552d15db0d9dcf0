//! A recording's events checked against the order a recorder writes them in, line by
//! line (the round order is the round assembler's).

use std::collections::HashMap;

use anyhow::{bail, ensure, Result};

use super::{SessionEvent, Stamped, TraceEvent};
use crate::engine::events::{DecodeEvent, Mode, RequestId, Tally};

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
    /// The whole session's statistics rebuilt from every event, against the closing
    /// summary.
    all: super::summary::SummaryBuilder,
    /// The header's event version: block diffusion came with version 5.
    event_version: u32,
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
    /// Its mode, as `request_started` says: which round events it may have.
    mode: Option<Mode>,
    /// Block diffusion: the round being denoised, as its steps left it.
    canvas: Option<Canvas>,
    /// Block diffusion: the last block written (round, tokens), which the round's
    /// `committed` keeps a prefix of.
    written: Option<(usize, Vec<u32>)>,
}

/// A diffusion round's canvas after its last `denoised` step.
#[derive(Debug)]
struct Canvas {
    round: usize,
    step: usize,
    tokens: Vec<Option<u32>>,
    step_of: Vec<usize>,
}

/// The round events a request of `mode` has, by kind: a LinearSS round's in a
/// diffusion request (or the reverse) was spliced in or edited.
fn belongs(mode: Mode, d: &DecodeEvent) -> bool {
    let diffusion = mode == Mode::Diffusion;
    match d {
        DecodeEvent::BlockChosen { .. }
        | DecodeEvent::Drafted { .. }
        | DecodeEvent::BranchesBuilt { .. }
        | DecodeEvent::Verified { .. }
        | DecodeEvent::BranchResolved { .. } => !diffusion,
        DecodeEvent::Denoised { .. } | DecodeEvent::BlockWritten { .. } => diffusion,
        _ => true,
    }
}

impl Life {
    /// A diffusion event against the round's steps so far: steps rise by one from 1,
    /// a step fills exactly its `positions` and changes nothing committed before, the
    /// block written is the last canvas with each position's step, and the round
    /// commits a prefix of it.
    fn diffusion(&mut self, d: &DecodeEvent) -> Result<()> {
        match d {
            DecodeEvent::Denoised {
                round,
                step,
                canvas,
                positions,
                ..
            } => {
                if let Some((w, _)) = &self.written {
                    ensure!(
                        w < round,
                        "round {round} is denoised after its block was written"
                    );
                }
                let before = match self.canvas.take() {
                    Some(c) if c.round == *round => c,
                    Some(c) => bail!(
                        "round {round} is denoised while round {} has no `block_written`",
                        c.round
                    ),
                    None => Canvas {
                        round: *round,
                        step: 0,
                        tokens: vec![None; canvas.len()],
                        step_of: vec![0; canvas.len()],
                    },
                };
                ensure!(
                    *step == before.step + 1,
                    "round {round}'s `step` is {step} after step {}: steps rise by one from 1",
                    before.step
                );
                ensure!(
                    canvas.len() == before.tokens.len(),
                    "round {round}'s canvas has {} positions, its earlier steps {}",
                    canvas.len(),
                    before.tokens.len()
                );
                let mut step_of = before.step_of;
                for (k, (was, now)) in before.tokens.iter().zip(canvas).enumerate() {
                    let filled = positions.contains(&k);
                    match (was, now, filled) {
                        (None, Some(_), true) => step_of[k] = *step,
                        (was, now, false) if was == now => {}
                        _ => bail!(
                            "round {round} step {step}: canvas position {k} is {now:?} after {was:?}, {} in `positions`",
                            if filled { "named" } else { "not named" }
                        ),
                    }
                }
                self.canvas = Some(Canvas {
                    round: *round,
                    step: *step,
                    tokens: canvas.clone(),
                    step_of,
                });
            }
            DecodeEvent::BlockWritten {
                round,
                block,
                steps,
                ..
            } => {
                let Some(c) = self.canvas.take().filter(|c| c.round == *round) else {
                    bail!("round {round}'s `block_written` has no `denoised` step before it");
                };
                let last: Vec<Option<u32>> = block.iter().copied().map(Some).collect();
                ensure!(
                    c.tokens == last,
                    "round {round}'s `block_written.block` differs from its last canvas (step {})",
                    c.step
                );
                ensure!(
                    *steps == c.step_of,
                    "round {round}'s `block_written.steps` differ from the steps that filled each position"
                );
                self.written = Some((*round, block.clone()));
            }
            DecodeEvent::Committed { round, tokens, .. } if *round > 0 => {
                let ok = self
                    .written
                    .as_ref()
                    .is_some_and(|(w, b)| w == round && b.starts_with(tokens));
                ensure!(
                    ok,
                    "round {round} commits tokens its `block_written` does not begin with"
                );
            }
            _ => {}
        }
        Ok(())
    }
}

impl Order {
    /// The order check of a file of this event version.
    pub fn new(event_version: u32) -> Self {
        Self {
            check_stats: event_version >= 3,
            event_version,
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
            TraceEvent::Session(SessionEvent::SessionEnd { summary }) => {
                self.end = Some(line);
                if self.check_stats {
                    summary_agrees(summary, &self.all.summary())?;
                }
                return Ok(());
            }
            TraceEvent::Session(_) => {
                self.all.push(&s.event);
                return Ok(());
            }
            TraceEvent::Decode(d) => d,
        };
        self.all.push(&s.event);
        ensure!(
            !matches!(d, DecodeEvent::Learned { .. }) || self.event_version >= 6,
            "a `learned` event, which event version {} does not have (version 6 added it)",
            self.event_version
        );
        let Some(req) = d.request() else {
            return Ok(());
        };
        if let DecodeEvent::RequestStarted { mode, .. } = d {
            if let Some(l) = self.requests.get(&req) {
                bail!(
                    "request {req} starts again (it started at line {})",
                    l.started
                );
            }
            ensure!(
                *mode != Mode::Diffusion || self.event_version >= 5,
                "request {req} decodes by block diffusion, which event version {} does not have (version 5 added it)",
                self.event_version
            );
            self.requests.insert(
                req,
                Life {
                    started: line,
                    mode: Some(*mode),
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
        if let Some(mode) = life.mode {
            ensure!(
                belongs(mode, d),
                "request {req} decodes {}: this event belongs to another mode's rounds",
                format!("{mode:?}").to_lowercase()
            );
            if mode == Mode::Diffusion {
                life.diffusion(d)?;
            }
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

/// The closing summary against the one the events add up to; the first field that
/// differs is named.
fn summary_agrees(stated: &super::Summary, events: &super::Summary) -> Result<()> {
    if stated == events {
        return Ok(());
    }
    let (a, b) = (serde_json::to_value(stated)?, serde_json::to_value(events)?);
    let (path, x, y) = first_difference(&a, &b, "summary".to_string());
    bail!("`session_end`'s `{path}` is {x}, but the events add up to {y}")
}

/// The path to the first value where `a` and `b` differ, and the two values there.
fn first_difference(
    a: &serde_json::Value,
    b: &serde_json::Value,
    path: String,
) -> (String, String, String) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (u, v) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if u != v {
                    return first_difference(u, v, format!("{path}.{k}"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if u != v {
                    return first_difference(u, v, format!("{path}[{i}]"));
                }
            }
        }
        _ => {}
    }
    (path, a.to_string(), b.to_string())
}

/// A request's stated statistics against those its events add up to.
fn stats_agree(stated: &Tally, events: &Tally, req: RequestId) -> Result<()> {
    let pairs: [(&str, usize, usize); 12] = [
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
        ("ar_judged", stated.ar_judged, events.ar_judged),
        ("rows", stated.rows, events.rows),
    ];
    for (what, a, b) in pairs {
        ensure!(
            a == b,
            "request {req}'s `stats.tally.{what}` is {a}, but its events add up to {b}"
        );
    }
    for (what, same) in [
        ("accept_hist", stated.accept_hist == events.accept_hist),
        ("ended_hist", stated.ended_hist == events.ended_hist),
        ("blocks", stated.blocks == events.blocks),
        ("branches", stated.branches == events.branches),
    ] {
        ensure!(
            same,
            "request {req}'s `stats.tally.{what}` differs from what its events add up to"
        );
    }
    Ok(())
}
