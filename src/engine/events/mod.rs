//! `DecodeEvent`: the single vocabulary the engine speaks, and the types it is made
//! of (stop reasons, branch kinds and outcomes, block decisions, statistics). The
//! screen, the recorder, the replayer and the benchmarks all consume it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

pub mod assemble;
mod rounds;
mod stats;

pub use assemble::{Assembler, OrderError, Round};
pub use rounds::{round_records, RoundRecord};
pub use stats::{
    add_hist, count_in, hist_mean, keyed, ratio, BlockTally, RequestStats, RoundTally, Tally,
};

/// Version of the event schema (recordings carry it in their header).
/// 3: a branch miss can be `ended` (the answer ended inside the block).
/// 4: `drafted` carries the round's row decision (`rows`).
/// 5: block diffusion (`mode: diffusion`, `denoised`, `block_written`).
pub const EVENT_VERSION: u32 = 5;

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

/// Which rule set a round's block size (the policy module's rules, `policy::*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A fixed block size (LinearSS, RecGuide without adaptive).
    Fixed,
    /// No history yet: the reference's concurrency cap, valued by the tables' marginal.
    ColdStart,
    /// The per-request ratio rule: argmax V_B / T_C(B).
    Ratio,
    /// Chosen together with the round's other requests (max Σ V / Σ T).
    Round,
    /// A size the rule did not pick, run so the learned costs keep measuring it.
    Explore,
    /// An AR step because AR steps measured more tokens per ms here lately.
    ArRegime,
    /// AR steps tried for a span of rounds, to keep their measure fresh.
    ArTrial,
    /// The block of a reused branch (no draft forward).
    Reused,
    /// None of the sizes asked for has a survival table: the smallest asked.
    Untabled,
    /// Clipped to what is left of the context window.
    Context,
}

impl Rule {
    /// Short words for the round pane.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Fixed => "fixed size",
            Rule::ColdStart => "cold start",
            Rule::Ratio => "best tokens per ms",
            Rule::Round => "best tokens per ms for the round",
            Rule::Explore => "explore (measuring a size not chosen lately)",
            Rule::ArRegime => "AR step (measured regime)",
            Rule::ArTrial => "AR step (trial of the AR regime)",
            Rule::Reused => "reused branch block",
            Rule::Untabled => "no survival table: smallest size",
            Rule::Context => "clipped to the context window",
        }
    }
}

/// A block size and why it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockDecision {
    pub rule: Rule,
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
    /// Tokens per ms the round's requests would make taking AR steps instead, by the
    /// cost model (fitted to this machine's forwards): what drafting is up against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_rate: Option<f64>,
}

impl BlockDecision {
    /// A decision with nothing to show but its rule.
    pub fn plain(rule: Rule) -> Self {
        Self {
            rule,
            signal: None,
            candidates: Vec::new(),
            rate: None,
            measured: None,
            ar_rate: None,
        }
    }
}

/// Tokens per ms of round time delivered lately at this concurrency (`None`: not
/// measured yet).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegimeRates {
    pub draft: Option<f64>,
    pub ar: Option<f64>,
}

/// One block size the rule weighed: expected tokens V, what its forwards cost, and
/// what the branch rows it is expected to carry change that by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockCandidate {
    pub block: usize,
    pub value: f64,
    /// Its draft and verify rows (a bucket's forwards for the per-request rule), ms.
    pub cost_ms: f64,
    /// Expected net price of its branch rows, ms: negative where they are expected
    /// to spare more than they cost (absent before event version 4: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_ms: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl BlockCandidate {
    /// What the rule weighs V against: its forwards and its rows' net price.
    pub fn total_ms(&self) -> f64 {
        (self.cost_ms + self.rows_ms).max(1e-9)
    }

    /// What the rule that chose among these candidates compared: tokens per ms
    /// V ÷ T (the per-request ratio rule, `rate` None), or the net tokens V − λ·T at
    /// the round's rate λ (the round rule: the forwards' fixed part is in λ, so V ÷ T
    /// alone would favour the wrong size).
    pub fn score(&self, rate: Option<f64>) -> f64 {
        match rate {
            Some(lambda) => self.value - lambda * self.total_ms(),
            None => self.value / self.total_ms(),
        }
    }
}

/// Some rows, summed: how many, what they add to the forward, and the draft forwards
/// they are expected to spare (Σ P(hit): at most one row of a round hits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSet {
    pub rows: usize,
    pub added_ms: f64,
    pub saves: f64,
}

impl RowSet {
    pub fn add(&mut self, ms: f64, p: f64) {
        self.rows += 1;
        self.added_ms += ms;
        self.saves += p;
    }
}

/// A round's row decision for one request, for the screen and recordings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RowsPriced {
    pub kept: RowSet,
    pub dropped: RowSet,
    /// This request's share of the verify forward without rows (ms): the rows'
    /// price is stated against it.
    pub share_ms: f64,
    /// What one spared draft is worth (ms).
    pub saving_ms: f64,
    /// Every row kept whatever it costs (the all-rows ablation).
    pub unpriced: bool,
}

impl RowsPriced {
    /// "+41% verify price for 0.30 drafts expected saved" of a set.
    pub fn describe(&self, set: &RowSet) -> String {
        let pct = if self.share_ms > 0.0 {
            100.0 * set.added_ms / self.share_ms
        } else {
            0.0
        };
        format!(
            "+{pct:.0}% verify price for {:.2} drafts expected saved",
            set.saves
        )
    }
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
            DecodeEvent::Forward { .. } | DecodeEvent::EngineState { .. } => None,
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
