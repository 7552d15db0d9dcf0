//! Session statistics folded from events: the same numbers for a live session, a
//! replay and `specscope trace summary`. Each request's rounds are rebuilt from its
//! events by the one [`Assembler`] and counted by the engine's own [`Tally`], so
//! `run`, `bench` and a recording of the same requests agree.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::nld::ImportedRound;
use super::{SessionEvent, TraceEvent};

/// The family an imported log's rounds count under.
pub const IMPORTED_FAMILY: &str = "imported";
use crate::engine::events::{
    count_in, hist_mean, ratio, Assembler, DecodeEvent, OrderError, Phase, RequestId, Round,
    StopReason, Tally,
};

/// Acceptance lengths of one prompt family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyStats {
    pub rounds: usize,
    /// `hist[a]` = rounds that advanced `a` tokens (accepted drafts + 1, cut at the
    /// answer's end).
    pub hist: Vec<usize>,
}

impl FamilyStats {
    pub fn mean(&self) -> f64 {
        hist_mean(&self.hist)
    }
}

/// Physical forwards of a session (one shared by many requests counts once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Forwards {
    pub prefill: usize,
    pub decode: usize,
    /// Rows and query tokens over the decode forwards.
    pub rows: usize,
    pub query_tokens: usize,
    /// Milliseconds spent in forwards (prefill included).
    pub ms: f64,
}

/// Statistics of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "AnySummary")]
pub struct Summary {
    /// Requests started; of those, finished (cancelled ones included) and failed.
    pub requests: usize,
    pub finished: usize,
    pub cancelled: usize,
    pub errors: usize,
    /// Every request's rounds, forwards and tokens (the engine's per-request counts).
    pub tally: Tally,
    pub forwards: Forwards,
    /// Per prompt family (`chat` when a request had none).
    pub families: BTreeMap<String, FamilyStats>,
}

/// A summary line as this version writes it, or as event version 1 did (flat, with
/// string-keyed branch labels and no per-request forward kinds).
#[derive(Deserialize)]
#[serde(untagged)]
enum AnySummary {
    Now {
        requests: usize,
        finished: usize,
        cancelled: usize,
        errors: usize,
        tally: Tally,
        forwards: Forwards,
        families: BTreeMap<String, FamilyStats>,
    },
    V1 {
        requests: usize,
        finished: usize,
        cancelled: usize,
        errors: usize,
        rounds: usize,
        new_tokens: usize,
        decode_tokens: usize,
        prefill_forwards: usize,
        decode_forwards: usize,
        rows: usize,
        query_tokens: usize,
        forward_ms: f64,
        reused_blocks: usize,
        accept_hist: Vec<usize>,
        families: BTreeMap<String, FamilyStats>,
        #[serde(with = "crate::engine::events::keyed")]
        blocks: BTreeMap<usize, usize>,
        #[serde(with = "crate::engine::events::keyed")]
        branches: BTreeMap<crate::engine::events::BranchKind, crate::engine::events::BranchCount>,
    },
}

impl From<AnySummary> for Summary {
    fn from(a: AnySummary) -> Self {
        match a {
            AnySummary::Now {
                requests,
                finished,
                cancelled,
                errors,
                tally,
                forwards,
                families,
            } => Summary {
                requests,
                finished,
                cancelled,
                errors,
                tally,
                forwards,
                families,
            },
            AnySummary::V1 {
                requests,
                finished,
                cancelled,
                errors,
                rounds,
                new_tokens,
                decode_tokens,
                prefill_forwards,
                decode_forwards,
                rows,
                query_tokens,
                forward_ms,
                reused_blocks,
                accept_hist,
                families,
                blocks,
                branches,
            } => Summary {
                requests,
                finished,
                cancelled,
                errors,
                tally: Tally {
                    new_tokens,
                    decode_tokens,
                    rounds,
                    saved_drafts: reused_blocks,
                    accept_hist,
                    blocks,
                    branches,
                    ..Tally::default()
                },
                forwards: Forwards {
                    prefill: prefill_forwards,
                    decode: decode_forwards,
                    rows,
                    query_tokens,
                    ms: forward_ms,
                },
                families,
            },
        }
    }
}

impl Summary {
    /// Decode tokens per physical decode forward: what the session's forwards bought.
    pub fn tpf(&self) -> f64 {
        ratio(self.tally.decode_tokens as f64, self.forwards.decode as f64)
    }

    /// Tokens per second of forward time (what the engine spent, screen excluded).
    pub fn tokens_per_sec(&self) -> f64 {
        ratio(self.tally.new_tokens as f64, self.forwards.ms / 1e3)
    }

    /// Requests started and neither finished nor failed (a cut-off recording).
    pub fn unfinished(&self) -> usize {
        self.requests.saturating_sub(self.finished + self.errors)
    }

    /// A plain-text report (`specscope trace summary`).
    pub fn report(&self) -> String {
        let t = &self.tally;
        let mut s = String::new();
        let mut head = format!(
            "requests {}: {} answered, {} cancelled, {} failed",
            self.requests,
            self.finished.saturating_sub(self.cancelled),
            self.cancelled,
            self.errors
        );
        if self.unfinished() > 0 {
            let _ = write!(
                head,
                ", {} cut off (the recording ends mid-answer)",
                self.unfinished()
            );
        }
        let _ = writeln!(s, "{head}");
        // Every round a diffusion block: nothing was accepted, blocks were filled.
        let per_round = if t.rounds > 0 && t.refresh_forwards == t.rounds {
            "tokens per block"
        } else {
            "mean acceptance"
        };
        let _ = writeln!(
            s,
            "rounds {}  tokens {}  physical decode forwards {}  TPF {:.2}  {per_round} {:.2}",
            t.rounds,
            t.new_tokens,
            self.forwards.decode,
            self.tpf(),
            t.mean_accept()
        );
        let _ = writeln!(
            s,
            "forward time {:.1} ms  tokens/s {:.1}  reused blocks {}  branch hit rate {}",
            self.forwards.ms,
            self.tokens_per_sec(),
            t.saved_drafts,
            if t.branches.is_empty() {
                "- (no branch rows built)".to_string()
            } else {
                format!("{:.1}%", 100.0 * t.hit_rate())
            }
        );
        if t.refresh_forwards > 0 {
            let _ = writeln!(
                s,
                "block diffusion  blocks {}  denoising forwards {}  cache writes {}  agreement with AR {:.1}% of {} tokens (not lossless)",
                t.refresh_forwards,
                t.denoise_forwards,
                t.refresh_forwards,
                100.0 * t.ar_agreement(),
                t.ar_judged
            );
        }
        if !t.blocks.is_empty() {
            let b: Vec<String> = t.blocks.iter().map(|(b, n)| format!("B{b}: {n}")).collect();
            let _ = writeln!(s, "block sizes  {}", b.join("  "));
        }
        for (kind, c) in &t.branches {
            let _ = writeln!(
                s,
                "branch {:<4} built {:>5}  hits {:>5}",
                kind.label(),
                c.built,
                c.hits
            );
        }
        for (fam, f) in &self.families {
            let hist = hist_text(&f.hist);
            let _ = writeln!(
                s,
                "family {fam:<6} rounds {:>5}  mean acceptance {:.2}  histogram {}",
                f.rounds,
                f.mean(),
                hist.join(" ")
            );
        }
        s
    }

    /// The report of an imported log: what it counts, and how its forwards were
    /// counted (`assumed`: rounds whose log holds no forward count).
    pub fn report_imported(&self, assumed: usize) -> String {
        let t = &self.tally;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "requests {}  rounds {}  tokens {}  mean tokens per round {:.2}",
            self.requests,
            t.rounds,
            t.new_tokens,
            t.mean_accept()
        );
        let how = if assumed == 0 {
            "as the log counts them".to_string()
        } else if assumed == t.rounds {
            format!(
                "{} per round, LinearSpec's draft and verify: the log counts none",
                super::nld::LINEARSPEC_FORWARDS
            )
        } else {
            format!("the log's, and 2 per round for the {assumed} rounds it does not count")
        };
        let _ = writeln!(
            s,
            "TPF {:.2} decode-only ({} tokens / {} forwards; forwards {how})",
            self.tpf(),
            t.decode_tokens,
            self.forwards.decode
        );
        if !t.blocks.is_empty() {
            let b: Vec<String> = t.blocks.iter().map(|(b, n)| format!("B{b}: {n}")).collect();
            let _ = writeln!(s, "block sizes  {}", b.join("  "));
        }
        let _ = writeln!(
            s,
            "tokens per round histogram  {}",
            hist_text(&t.accept_hist).join(" ")
        );
        s
    }

    /// The summary of a sequence of events.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a TraceEvent>) -> Summary {
        let mut b = SummaryBuilder::default();
        for e in events {
            b.push(e);
        }
        b.summary()
    }
}

/// A histogram's non-empty cells as `tokens:rounds`.
fn hist_text(hist: &[usize]) -> Vec<String> {
    hist.iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(a, n)| format!("{a}:{n}"))
        .collect()
}

/// One request as the events show it so far.
#[derive(Debug, Clone, Default)]
struct Open {
    family: String,
    tally: Tally,
}

/// Folds events into a [`Summary`]: finished requests count with the engine's own
/// statistics, requests still open (live, or cut off) with the rounds [`Assembler`]
/// rebuilt from their events.
#[derive(Debug, Clone, Default)]
pub struct SummaryBuilder {
    done: Summary,
    open: HashMap<RequestId, Open>,
    rounds: Assembler,
}

impl SummaryBuilder {
    /// A builder whose round assembler takes in requests whose start it did not see
    /// (the screen's, after Ctrl+L clears it mid-answer).
    pub fn adopting() -> Self {
        Self {
            rounds: Assembler::adopting(),
            ..Self::default()
        }
    }

    /// Round `round` of request `req` as its events told it so far.
    pub fn round(&self, req: RequestId, round: usize) -> Option<&Round> {
        self.rounds.round(req, round)
    }

    /// The round of `req` being gathered (`Assembler::gathering`).
    pub fn gathering(&self, req: RequestId) -> Option<&Round> {
        self.rounds.gathering(req)
    }

    pub fn push(&mut self, e: &TraceEvent) {
        match e {
            TraceEvent::Decode(d) => {
                // An event out of round order is left out (`trace::validate` refuses it).
                let _out_of_order = self.push_decode(d);
            }
            TraceEvent::Session(SessionEvent::ImportedRequest(_)) => {
                self.done.requests += 1;
                // A log holds what its requests did; none is still answering.
                self.done.finished += 1;
            }
            TraceEvent::Session(SessionEvent::ImportedRound(r)) => self.push_imported(r),
            TraceEvent::Session(_) => {}
        }
    }

    /// An imported round counts what its log says it emitted, its forwards the log's
    /// (or LinearSpec's draft and verify where the log has no count).
    fn push_imported(&mut self, r: &ImportedRound) {
        let s = &mut self.done;
        let (emitted, block) = (r.emitted(), r.block());
        let t = &mut s.tally;
        t.rounds += 1;
        t.new_tokens += emitted;
        t.decode_tokens += emitted;
        count_in(&mut t.accept_hist, emitted);
        *t.blocks.entry(block).or_default() += 1;
        s.forwards.decode += r.forwards_or_linearspec() as usize;
        let f = s.families.entry(IMPORTED_FAMILY.into()).or_default();
        f.rounds += 1;
        count_in(&mut f.hist, emitted);
    }

    /// The statistics rebuilt so far of a request still open.
    pub fn open_tally(&self, req: RequestId) -> Option<&Tally> {
        self.open.get(&req).map(|o| &o.tally)
    }

    /// The statistics so far.
    pub fn summary(&self) -> Summary {
        let mut s = self.done.clone();
        for o in self.open.values() {
            s.tally += &o.tally;
        }
        s
    }

    /// Takes one event; an event out of round order is left out, and its error
    /// returned.
    pub fn push_decode(&mut self, e: &DecodeEvent) -> Result<(), OrderError> {
        let round = self.rounds.push(e)?;
        let s = &mut self.done;
        match e {
            DecodeEvent::RequestStarted { req, family, .. } => {
                s.requests += 1;
                self.open.insert(
                    *req,
                    Open {
                        family: family.clone().unwrap_or_else(|| "chat".into()),
                        ..Open::default()
                    },
                );
            }
            DecodeEvent::Committed {
                req,
                round: n,
                tokens,
                ..
            } => {
                if let Some(o) = self.open.get_mut(req) {
                    o.tally.record_commit(tokens.len(), *n == 0);
                    // A round counts what it committed (a verdict cut at the answer's
                    // end, a diffusion block), as the engine counts it.
                    if let Some(r) = round {
                        let f = s.families.entry(o.family.clone()).or_default();
                        f.rounds += 1;
                        count_in(&mut f.hist, r.committed.len());
                        r.count_in(&mut o.tally);
                    }
                }
            }
            DecodeEvent::Forward {
                phase,
                rows,
                query_tokens,
                ms,
                ..
            } => {
                let f = &mut s.forwards;
                f.ms += ms;
                if *phase == Phase::Prefill {
                    f.prefill += 1;
                } else {
                    f.decode += 1;
                    f.rows += rows;
                    f.query_tokens += query_tokens;
                }
            }
            DecodeEvent::RequestFinished {
                req, stop, stats, ..
            } => {
                s.finished += 1;
                if *stop == StopReason::Cancelled {
                    s.cancelled += 1;
                }
                // The engine's own counts are exact; the rebuilt ones only stand in
                // while the request is open.
                self.open.remove(req);
                s.tally += &stats.tally;
            }
            DecodeEvent::Error { req, .. } => {
                s.errors += 1;
                if let Some(o) = req.and_then(|r| self.open.remove(&r)) {
                    s.tally += &o.tally;
                }
            }
            _ => {}
        }
        Ok(())
    }
}
