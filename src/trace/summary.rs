//! Session statistics folded from events: the same numbers for a live session, a
//! replay and `specscope trace summary`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::TraceEvent;
use crate::engine::events::{
    count_in, hit_rate, ratio, BranchCount, DecodeEvent, Origin, RequestId,
};
use crate::engine::overlap::BranchOutcome;
use crate::engine::StopReason;

/// Acceptance lengths of one prompt family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyStats {
    pub rounds: usize,
    /// `hist[a]` = rounds that advanced `a` tokens (accepted drafts + 1).
    pub hist: Vec<usize>,
}

impl FamilyStats {
    pub fn mean(&self) -> f64 {
        mean_of(&self.hist)
    }
}

/// Statistics of a session (TPF: decode tokens / decode forwards, prefill excluded, a
/// fused forward counts once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub requests: usize,
    pub finished: usize,
    pub cancelled: usize,
    pub errors: usize,
    pub rounds: usize,
    /// Committed tokens, the prefill's first token included.
    pub new_tokens: usize,
    /// Committed tokens after each request's first.
    pub decode_tokens: usize,
    pub prefill_forwards: usize,
    pub decode_forwards: usize,
    /// Rows and query tokens over the decode forwards.
    pub rows: usize,
    pub query_tokens: usize,
    /// Milliseconds spent in forwards (prefill included).
    pub forward_ms: f64,
    /// Rounds whose block came from a reused branch (each saved a draft forward).
    pub reused_blocks: usize,
    /// `accept_hist[a]` = rounds that advanced `a` tokens, every family together.
    pub accept_hist: Vec<usize>,
    /// Per prompt family (`chat` when a request had none).
    pub families: BTreeMap<String, FamilyStats>,
    /// Rounds per block size.
    #[serde(with = "int_keys")]
    pub blocks: BTreeMap<usize, usize>,
    /// Branch rows built and reused, by label (P1, P2, P3, new).
    pub branches: BTreeMap<String, BranchCount>,
}

/// Integer map keys as JSON strings, read back even inside tagged enums (whose
/// buffering loses serde_json's key parsing).
mod int_keys {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<usize, usize>, s: S) -> Result<S::Ok, S::Error> {
        m.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<usize, usize>, D::Error> {
        BTreeMap::<String, usize>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                k.parse().map(|k| (k, v)).map_err(|_| {
                    serde::de::Error::custom(format!("block size `{k}` is not a number"))
                })
            })
            .collect()
    }
}

fn mean_of(hist: &[usize]) -> f64 {
    let (n, sum) = hist
        .iter()
        .enumerate()
        .fold((0, 0), |(n, s), (a, c)| (n + c, s + a * c));
    ratio(sum as f64, n as f64)
}

impl Summary {
    pub fn tpf(&self) -> f64 {
        ratio(self.decode_tokens as f64, self.decode_forwards as f64)
    }

    /// Mean tokens advanced per round (bonus included).
    pub fn mean_accept(&self) -> f64 {
        mean_of(&self.accept_hist)
    }

    /// Reused branches / branch rows built.
    pub fn hit_rate(&self) -> f64 {
        hit_rate(&self.branches)
    }

    /// Tokens per second of forward time (what the engine spent, screen excluded).
    pub fn tokens_per_sec(&self) -> f64 {
        ratio(self.new_tokens as f64, self.forward_ms / 1e3)
    }

    /// A plain-text report (`specscope trace summary`).
    pub fn report(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "requests {} (finished {}, cancelled {}, errors {})",
            self.requests, self.finished, self.cancelled, self.errors
        );
        let _ = writeln!(
            s,
            "rounds {}  tokens {}  decode forwards {}  TPF {:.2}  mean acceptance {:.2}",
            self.rounds,
            self.new_tokens,
            self.decode_forwards,
            self.tpf(),
            self.mean_accept()
        );
        let _ = writeln!(
            s,
            "forward time {:.1} ms  tokens/s {:.1}  reused blocks {}  branch hit rate {:.1}%",
            self.forward_ms,
            self.tokens_per_sec(),
            self.reused_blocks,
            100.0 * self.hit_rate()
        );
        if !self.blocks.is_empty() {
            let b: Vec<String> = self
                .blocks
                .iter()
                .map(|(b, n)| format!("B{b}: {n}"))
                .collect();
            let _ = writeln!(s, "block sizes  {}", b.join("  "));
        }
        for (label, c) in &self.branches {
            let _ = writeln!(
                s,
                "branch {label:<4} built {:>5}  hits {:>5}",
                c.built, c.hits
            );
        }
        for (fam, f) in &self.families {
            let hist: Vec<String> = f
                .hist
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(a, n)| format!("{a}:{n}"))
                .collect();
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
}

/// Folds events into a [`Summary`], remembering each request's family.
#[derive(Debug, Clone, Default)]
pub struct SummaryBuilder {
    pub summary: Summary,
    family_of: HashMap<RequestId, String>,
}

impl SummaryBuilder {
    pub fn push(&mut self, e: &TraceEvent) {
        match e {
            TraceEvent::Decode(d) => self.push_decode(d),
            TraceEvent::Session(_) => {}
        }
    }

    pub fn push_decode(&mut self, e: &DecodeEvent) {
        let s = &mut self.summary;
        match e {
            DecodeEvent::RequestStarted { req, family, .. } => {
                s.requests += 1;
                self.family_of
                    .insert(*req, family.clone().unwrap_or_else(|| "chat".into()));
            }
            DecodeEvent::BlockChosen { block, .. } => *s.blocks.entry(*block).or_default() += 1,
            DecodeEvent::Drafted { reused, .. } => {
                if reused.is_some() {
                    s.reused_blocks += 1;
                }
            }
            DecodeEvent::BranchesBuilt { branches, .. } => {
                for b in branches {
                    s.branches.entry(b.kind.label()).or_default().built += 1;
                }
            }
            DecodeEvent::BranchResolved { outcome, .. } => {
                if let BranchOutcome::Hit { kind, .. } = outcome {
                    s.branches.entry(kind.label()).or_default().hits += 1;
                }
            }
            DecodeEvent::Verified { req, accepted, .. } => {
                s.rounds += 1;
                count_in(&mut s.accept_hist, accepted + 1);
                let fam = self
                    .family_of
                    .get(req)
                    .cloned()
                    .unwrap_or_else(|| "chat".into());
                let f = s.families.entry(fam).or_default();
                f.rounds += 1;
                count_in(&mut f.hist, accepted + 1);
            }
            DecodeEvent::Committed {
                tokens, origins, ..
            } => {
                s.new_tokens += tokens.len();
                s.decode_tokens += origins.iter().filter(|o| **o != Origin::Prefill).count();
            }
            DecodeEvent::Forward {
                phase,
                rows,
                query_tokens,
                ms,
                ..
            } => {
                s.forward_ms += ms;
                if phase == "prefill" {
                    s.prefill_forwards += 1;
                } else {
                    s.decode_forwards += 1;
                    s.rows += rows;
                    s.query_tokens += query_tokens;
                }
            }
            DecodeEvent::RequestFinished { stop, .. } => {
                s.finished += 1;
                if *stop == StopReason::Cancelled {
                    s.cancelled += 1;
                }
            }
            DecodeEvent::Error { .. } => s.errors += 1,
            DecodeEvent::Prefilled { .. } | DecodeEvent::EngineState { .. } => {}
        }
    }
}

impl Summary {
    /// The summary of a sequence of events.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a TraceEvent>) -> Summary {
        let mut b = SummaryBuilder::default();
        for e in events {
            b.push(e);
        }
        b.summary
    }
}
