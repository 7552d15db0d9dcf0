//! `DecodeEvent`: the single vocabulary the engine speaks, and the types it is made
//! of (stop reasons, branch kinds and outcomes, block decisions, statistics). The
//! screen, the recorder, the replayer and the benchmarks all consume it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use super::policy::{BeliefsStart, Observation};

pub mod assemble;
mod decision;
mod rounds;
mod stats;

pub use assemble::{Assembler, OrderError, Round};
pub use decision::{BlockCandidate, BlockDecision, RegimeRates, RowSet, RowsPriced, Rule};
pub use rounds::{round_records, RoundRecord};
pub use stats::{
    add_hist, count_in, hist_mean, keyed, ratio, BlockTally, RequestStats, RoundTally, Tally,
};

/// Version of the event schema (recordings carry it in their header).
/// 3: a branch miss can be `ended` (the answer ended inside the block).
/// 4: `drafted` carries the round's row decision (`rows`).
/// 5: block diffusion (`mode: diffusion`, `denoised`, `block_written`).
/// 6: `learned`: what the block policy observed in each step of the engine.
pub const EVENT_VERSION: u32 = 6;

/// Identifies a request for its whole life.
pub type RequestId = u64;

/// Decoding mode of a request (`--mode`'s names and help come from the variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// AR greedy: one causal token per forward (the reference output).
    Ar,
    /// Vanilla linear self-speculation with a fixed block size.
    Linear,
    /// RecGuide: overlap branches and adaptive block sizes on top of LinearSS.
    Recguide,
    /// Block diffusion (NLD's third mode): a canvas of masks filled by confidence over
    /// a few bidirectional forwards, no verifier. Fast and not lossless.
    Diffusion,
}

/// How the block size of each round is chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocks {
    /// Always this size (1 is an AR step).
    Fixed(usize),
    /// RecGuide's adaptive rule, choosing from these sizes each round.
    Adaptive(Vec<usize>),
}

impl fmt::Display for Blocks {
    /// `fixed 16`, `adaptive {8,16,32}`: the one label everywhere.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocks::Fixed(b) => write!(f, "fixed {b}"),
            Blocks::Adaptive(set) => {
                let s: Vec<String> = set.iter().map(|b| b.to_string()).collect();
                write!(f, "adaptive {{{}}}", s.join(","))
            }
        }
    }
}

impl<'de> Deserialize<'de> for Blocks {
    /// The typed form, or the strings of event version 1 (`fixed:16`, `adaptive`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum Typed {
            Fixed(usize),
            Adaptive(Vec<usize>),
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Any {
            Typed(Typed),
            Old(String),
        }
        match Any::deserialize(d)? {
            Any::Typed(Typed::Fixed(b)) => Ok(Blocks::Fixed(b)),
            Any::Typed(Typed::Adaptive(s)) => Ok(Blocks::Adaptive(s)),
            // Version 1's adaptive default: {1, 4, 8, 16, 32}.
            Any::Old(s) if s == "adaptive" => Ok(Blocks::Adaptive(vec![1, 4, 8, 16, 32])),
            Any::Old(s) => s
                .strip_prefix("fixed:")
                .and_then(|b| b.parse().ok())
                .map(Blocks::Fixed)
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "block policy `{s}`: expected {{\"fixed\": B}} or {{\"adaptive\": [sizes]}}"
                    ))
                }),
        }
    }
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
    /// A block diffusion token (committed by confidence; no verifier judged it).
    Diffusion,
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

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// An end-of-sequence token was emitted (it is included in the tokens).
    Eos,
    /// `max_new_tokens` reached.
    MaxTokens,
    /// The context window is full.
    Context,
    /// The request was cancelled.
    Cancelled,
}

impl StopReason {
    /// In words, for people.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Eos => "end of answer",
            StopReason::MaxTokens => "token limit reached",
            StopReason::Context => "context window full",
            StopReason::Cancelled => "stopped",
        }
    }
}

/// Kind of a speculative next-draft branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum BranchKind {
    /// Re-draft from the `rank`-th risky position with the alternative token.
    Correction { rank: u8 },
    /// Draft the next block assuming this one is fully accepted.
    Continuation,
}

impl BranchKind {
    /// Short label: P1, P2, P3 or new.
    pub fn label(self) -> String {
        self.to_string()
    }
}

impl fmt::Display for BranchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BranchKind::Correction { rank } => write!(f, "P{rank}"),
            BranchKind::Continuation => f.write_str("new"),
        }
    }
}

impl FromStr for BranchKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "new" {
            return Ok(BranchKind::Continuation);
        }
        s.strip_prefix('P')
            .and_then(|r| r.parse().ok())
            .map(|rank| BranchKind::Correction { rank })
            .ok_or_else(|| format!("`{s}` is not a branch kind (P1, P2, P3 or new)"))
    }
}

/// Why no branch was reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissReason {
    /// No branch row was built this round.
    NoBranches,
    /// The first reject came before the first correction position.
    Before,
    /// The first reject fell between two correction positions.
    Between,
    /// The first reject came after the last correction position (or there was none).
    After,
    /// Reject at a correction position, but the verifier chose another token.
    WrongCandidate,
    /// Full block accepted but the continuation predicted another first token.
    ContinuationMiss,
    /// Full block accepted and no continuation was built.
    ContinuationAbsent,
    /// The answer ended inside the block (an accepted eos, or the budget): what the
    /// verifier said after the end judges no branch.
    Ended,
}

impl MissReason {
    /// In words, for the round pane.
    pub fn describe(self) -> &'static str {
        match self {
            MissReason::NoBranches => "no branch rows",
            // Said of the correction rows built (the risky positions they re-draft
            // from): a risky position without a row does not count.
            MissReason::Before => "rejected before the first correction row's position",
            MissReason::Between => "rejected between the correction rows' positions",
            MissReason::After => "rejected after the last correction row's position",
            MissReason::WrongCandidate => "verifier chose another token",
            MissReason::ContinuationMiss => "continuation guessed another bonus",
            MissReason::ContinuationAbsent => "full block, no continuation built",
            MissReason::Ended => "the answer ended in the block",
        }
    }
}

/// The fate of this round's branches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum BranchOutcome {
    Hit { index: usize, kind: BranchKind },
    Miss { reason: MissReason },
}

/// Branch rows built and reused, of one kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BranchCount {
    pub built: usize,
    pub hits: usize,
}

/// What a physical forward does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Prefill,
    Draft,
    Verify,
    /// Verification with branch rows.
    Fused,
    /// Block diffusion: a denoising step of canvases (cache writes of full canvases
    /// may ride along).
    Denoise,
    /// Block diffusion: only cache writes of full canvases.
    Refresh,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Draft => "draft",
            Phase::Verify => "verify",
            Phase::Fused => "fused",
            Phase::Denoise => "denoise",
            Phase::Refresh => "refresh",
        }
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
        /// The block rule (event version 1 wrote `fixed:B` or `adaptive`).
        #[serde(alias = "block_policy")]
        blocks: Blocks,
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
        reason: BlockDecision,
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
        /// RecGuide: the branch rows the row table asked for, which ride in the verify
        /// forward and why (absent without overlap, and in event versions before 4).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rows: Option<RowsPriced>,
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
    /// Block diffusion: one denoising step of a request's canvas (`round` counts
    /// blocks, `step` the forwards over this one).
    Denoised {
        req: RequestId,
        round: usize,
        step: usize,
        /// The canvas after this step: a token, or null where still masked.
        canvas: Vec<Option<u32>>,
        /// Positions committed by this step, and their top probabilities.
        positions: Vec<usize>,
        confidence: Vec<f32>,
    },
    /// Block diffusion: a full canvas written to the cache by one causal forward, which
    /// also gives what AR would emit at each position given the same prefix.
    BlockWritten {
        req: RequestId,
        round: usize,
        block: Vec<u32>,
        /// The denoising step that committed each position (1-based).
        steps: Vec<usize>,
        /// AR's argmax at each position (position 0's from the forward before).
        ar: Vec<u32>,
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
        phase: Phase,
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
        /// Boxed: the largest payload of any event, and one per request.
        stats: Box<RequestStats>,
    },
    /// What the block policy observed in one step of the engine (a speculation round,
    /// a diffusion step's forwards), in order; `step` counts the engine's steps that
    /// observed anything, from 1. The beliefs are these folded from `start` (carried
    /// by step 1), so a recording rebuilds them (`trace beliefs`).
    Learned {
        step: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<Box<BeliefsStart>>,
        observations: Vec<Observation>,
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
        "denoised",
        "block_written",
        "committed",
        "forward",
        "request_finished",
        "learned",
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
            | DecodeEvent::Denoised { req, .. }
            | DecodeEvent::BlockWritten { req, .. }
            | DecodeEvent::Committed { req, .. }
            | DecodeEvent::RequestFinished { req, .. } => Some(*req),
            DecodeEvent::Error { req, .. } => *req,
            DecodeEvent::Forward { .. }
            | DecodeEvent::Learned { .. }
            | DecodeEvent::EngineState { .. } => None,
        }
    }

    /// The round an event belongs to, when it belongs to one.
    pub fn round(&self) -> Option<usize> {
        match self {
            DecodeEvent::BlockChosen { round, .. }
            | DecodeEvent::Drafted { round, .. }
            | DecodeEvent::BranchesBuilt { round, .. }
            | DecodeEvent::Verified { round, .. }
            | DecodeEvent::BranchResolved { round, .. }
            | DecodeEvent::Denoised { round, .. }
            | DecodeEvent::BlockWritten { round, .. }
            | DecodeEvent::Committed { round, .. } => Some(*round),
            _ => None,
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
