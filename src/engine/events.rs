//! `DecodeEvent`: the single vocabulary the engine speaks. The screen, the recorder,
//! the replayer and the benchmarks all consume it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::overlap::{BranchKind, BranchOutcome};
use super::StopReason;

/// Version of the event schema (recordings carry it in their header).
pub const EVENT_VERSION: u32 = 1;

/// Identifies a request for its whole life.
pub type RequestId = u64;

/// Decoding mode of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// AR greedy: one causal token per forward (the reference output).
    Ar,
    /// Vanilla linear self-speculation with a fixed block size.
    Linear,
    /// RecGuide: overlap branches and adaptive block sizes on top of LinearSS.
    Recguide,
}

/// Where a committed token came from (the chat pane can colour by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The first token, from the prefill.
    Prefill,
    /// A draft token the verifier accepted.
    Draft,
    /// A draft token of a reused branch block, accepted.
    Reused,
    /// The verifier's own token (correction or bonus) ending the round.
    Bonus,
}

/// One draft position as the screen shows it (only when a listener wants detail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PosView {
    pub margin: f32,
    pub confidence: f32,
    pub entropy: f32,
    /// Best candidates `(id, probability)`.
    pub top: Vec<(u32, f32)>,
}

/// A branch row as built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchView {
    pub kind: BranchKind,
    pub at: usize,
    pub alt: Option<u32>,
    /// Query tokens of the row.
    pub tokens: usize,
    /// The next block the branch drafted (position 0: alt, or the continuation's guess
    /// for the bonus).
    pub block: Vec<u32>,
}

/// Why a block size was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockReason {
    /// `fixed`, `cold_start`, `ratio` (per request), `round` (chosen with the round's
    /// other requests), `explore` (a size the rule did not pick, run now and then so
    /// that the learned costs keep measuring it), `ar_regime` (an AR step because AR
    /// steps have delivered more tokens per ms than drafting here lately, see
    /// `regime`), `ar_trial` (AR steps tried for a few rounds), `reused`, `untabled` or `context` (clipped to the window).
    pub rule: String,
    /// The history signal (mean verifier entropy over the last two rounds).
    pub signal: Option<f32>,
    /// Per candidate B: expected tokens advanced V_B and cost in ms: T_C(B) for the
    /// per-request rule; the rows it adds to the round for `round`.
    pub candidates: Vec<BlockCandidate>,
    /// `round`: the round's expected tokens per ms λ; the pick maximises V − λ·T.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// `ar_regime`, `ar_trial`: what each regime has delivered here lately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<RegimeRates>,
}

/// Tokens per ms of round time delivered lately at this concurrency (`None`: not
/// measured yet).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegimeRates {
    pub draft: Option<f64>,
    pub ar: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockCandidate {
    pub block: usize,
    pub value: f64,
    pub cost_ms: f64,
}

/// Branch rows built and reused, by kind label (P1, P2, P3, new).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BranchCount {
    pub built: usize,
    pub hits: usize,
}

/// Per-request statistics (TPF: decode tokens / decode forwards, prefill excluded, a
/// fused forward counts once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    pub prompt_tokens: usize,
    pub new_tokens: usize,
    /// New tokens after the prefill's first token.
    pub decode_tokens: usize,
    pub rounds: usize,
    pub draft_forwards: usize,
    pub verify_forwards: usize,
    pub fused_forwards: usize,
    /// Draft forwards skipped because a branch was reused.
    pub saved_drafts: usize,
    /// Query tokens over all decode forwards this request took part in.
    pub query_tokens: usize,
    /// Rows over all decode forwards this request took part in.
    pub rows: usize,
    /// `hist[a]` = rounds that advanced `a` tokens (accepted drafts + 1).
    pub accept_hist: Vec<usize>,
    /// Rounds per block size.
    pub blocks: BTreeMap<String, usize>,
    pub branches: BTreeMap<String, BranchCount>,
    pub prefill_secs: f64,
    pub decode_secs: f64,
}

impl RequestStats {
    pub fn decode_forwards(&self) -> usize {
        self.draft_forwards + self.verify_forwards + self.fused_forwards
    }

    pub fn tpf(&self) -> f64 {
        ratio(self.decode_tokens as f64, self.decode_forwards() as f64)
    }

    /// Mean tokens advanced per round (acceptance length, bonus included).
    pub fn mean_accept(&self) -> f64 {
        let total: usize = self
            .accept_hist
            .iter()
            .enumerate()
            .map(|(a, n)| a * n)
            .sum();
        ratio(total as f64, self.rounds as f64)
    }

    pub fn tokens_per_sec(&self) -> f64 {
        ratio(self.new_tokens as f64, self.prefill_secs + self.decode_secs)
    }

    /// Hits / built over every branch kind.
    pub fn hit_rate(&self) -> f64 {
        hit_rate(&self.branches)
    }

    pub(crate) fn record_accept(&mut self, advance: usize) {
        count_in(&mut self.accept_hist, advance);
    }
}

/// Reused branches / branch rows built, over every kind.
pub fn hit_rate(branches: &BTreeMap<String, BranchCount>) -> f64 {
    let (b, h) = branches
        .values()
        .fold((0, 0), |(b, h), c| (b + c.built, h + c.hits));
    ratio(h as f64, b as f64)
}

/// Counts one more `a` in a histogram indexed by value.
pub fn count_in(hist: &mut Vec<usize>, a: usize) {
    if hist.len() <= a {
        hist.resize(a + 1, 0);
    }
    hist[a] += 1;
}

/// `a / b`, or 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Everything the engine reports, one `kind`-tagged JSON object per event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecodeEvent {
    /// A request was accepted and queued.
    RequestStarted {
        req: RequestId,
        mode: Mode,
        /// `fixed:B` or `adaptive`.
        block_policy: String,
        overlap: bool,
        prompt_tokens: usize,
        max_new_tokens: usize,
        family: Option<String>,
    },
    /// The prompt was prefilled; `seed` is the first generated token.
    Prefilled {
        req: RequestId,
        prompt_tokens: usize,
        seed: u32,
        ms: f64,
    },
    /// The block size of the coming round.
    BlockChosen {
        req: RequestId,
        round: usize,
        block: usize,
        reason: BlockReason,
    },
    /// A draft block `[seed, d1 ..]`, drafted now or reused from a branch.
    Drafted {
        req: RequestId,
        round: usize,
        block: Vec<u32>,
        /// Margins of positions 1.. (position 0 is the seed).
        margins: Vec<f32>,
        risky: Vec<usize>,
        reused: Option<BranchKind>,
        /// Per-position top-k, entropy, confidence (empty unless a listener wants detail).
        detail: Vec<PosView>,
    },
    /// Branch rows fused with this round's verification.
    BranchesBuilt {
        req: RequestId,
        round: usize,
        branches: Vec<BranchView>,
    },
    /// The verifier's verdict on the round's block.
    Verified {
        req: RequestId,
        round: usize,
        accepted: usize,
        first_reject: Option<usize>,
        verifier_tokens: Vec<u32>,
        bonus: u32,
        /// Verifier top-k per position (empty unless detail is wanted).
        detail: Vec<PosView>,
    },
    /// What became of the round's branches.
    BranchResolved {
        req: RequestId,
        round: usize,
        outcome: BranchOutcome,
    },
    /// Tokens appended to the answer this round.
    Committed {
        req: RequestId,
        round: usize,
        tokens: Vec<u32>,
        origins: Vec<Origin>,
        text: String,
    },
    /// A physical forward pass (rows of possibly many requests).
    Forward {
        phase: String,
        rows: usize,
        query_tokens: usize,
        requests: usize,
        ms: f64,
    },
    /// The request ended.
    RequestFinished {
        req: RequestId,
        stop: StopReason,
        text: String,
        stats: RequestStats,
    },
    /// The engine paused or resumed.
    EngineState { paused: bool },
    /// Something went wrong (a request, or the engine when `req` is absent).
    Error {
        req: Option<RequestId>,
        message: String,
    },
}

impl DecodeEvent {
    /// Every `kind` tag (readers skip kinds not listed here).
    pub const KINDS: &'static [&'static str] = &[
        "request_started",
        "prefilled",
        "block_chosen",
        "drafted",
        "branches_built",
        "verified",
        "branch_resolved",
        "committed",
        "forward",
        "request_finished",
        "engine_state",
        "error",
    ];

    /// The request an event belongs to, when it belongs to one.
    pub fn request(&self) -> Option<RequestId> {
        match self {
            DecodeEvent::RequestStarted { req, .. }
            | DecodeEvent::Prefilled { req, .. }
            | DecodeEvent::BlockChosen { req, .. }
            | DecodeEvent::Drafted { req, .. }
            | DecodeEvent::BranchesBuilt { req, .. }
            | DecodeEvent::Verified { req, .. }
            | DecodeEvent::BranchResolved { req, .. }
            | DecodeEvent::Committed { req, .. }
            | DecodeEvent::RequestFinished { req, .. } => Some(*req),
            DecodeEvent::Error { req, .. } => *req,
            DecodeEvent::Forward { .. } | DecodeEvent::EngineState { .. } => None,
        }
    }
}

/// Receives events; `detail` says whether per-position top-k is worth computing.
pub trait EventSink {
    fn detail(&self) -> bool {
        false
    }
    fn emit(&mut self, event: DecodeEvent);
}

/// Drops everything (headless runs that only want the results).
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&mut self, _: DecodeEvent) {}
}

/// Keeps every event (tests, recordings).
#[derive(Default)]
pub struct VecSink {
    pub events: Vec<DecodeEvent>,
    pub detail: bool,
}

impl EventSink for VecSink {
    fn detail(&self) -> bool {
        self.detail
    }
    fn emit(&mut self, event: DecodeEvent) {
        self.events.push(event);
    }
}
