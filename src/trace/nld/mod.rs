//! Real NLD runs in and out: the logs NLD's own tooling writes, read into recordings
//! (`trace import`), and recordings written in their schema (`trace export`).
//!
//! Formats:
//! - the RecGuide author's per-round confidence trace (`linearspec_confidence_round`
//!   lines, schema versions 1 and 2; `xp/pytorch_linearspec_confidence/
//!   confidence_trace.py` of `linyewei526/Nemotron-Labs-Diffusion` documents 2);
//! - SGLang LinearSpec's per-block `stats_file` lines (`forward_passes`, `tokens`,
//!   `block_gen_positions`, `acceptance_rate`);
//! - per-request records joined to either: SGLang's timing lines and the PyTorch
//!   harness's request stats.
//!
//! An imported round keeps each source's fields under that source's own names and
//! nothing else: a field the log lacks stays absent (see `docs/decisions.md`).

pub mod compare;
pub mod export;
pub mod import;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::engine::events::RequestId;

/// The `event` of a confidence-trace line.
pub const CONFIDENCE_EVENT: &str = "linearspec_confidence_round";
/// The schema version `trace export` writes.
pub const CONFIDENCE_VERSION: u32 = 2;

/// One confidence-trace line, every field of schema version 2 (version 1 holds a
/// subset), under the schema's names; absent where the line has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at_unix: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_index: Option<u64>,
    /// The block length L: position 0 is the seed, 1..L−1 the drafts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gen_start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gen_len: Option<u64>,
    /// Tokens generated before the block's first draft position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_draft_tokens: Option<usize>,
    /// Tokens the round added: accepted drafts and the verifier's token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emitted_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_draft_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos_hit: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_rejection: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_forward_passes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfe_after_round: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_positions: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_generation_positions: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_draft_token_ids: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_draft_confidences: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_draft_confidence_mean: Option<f64>,
    /// The first rejected block position (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_generation_position: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_draft_token_id: Option<u32>,
    /// The verifier's token at the rejected position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_correct_token_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_draft_confidence: Option<f64>,
    /// The verifier's token's rank among the draft's candidates there (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_correct_token_rank: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_drop_abs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_drop_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mask_selected_positions: Option<Vec<usize>>,
    /// What specscope adds when it writes the schema (`trace export`); other writers
    /// have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub specscope: Option<Map<String, Value>>,
}

/// One SGLang LinearSpec `stats_file` line: a block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockStats {
    pub forward_passes: u64,
    /// Tokens the block added.
    pub tokens: usize,
    /// The block length L.
    pub block_gen_positions: usize,
    pub acceptance_rate: f64,
}

/// A round as a log recorded it: the source line's fields under its own names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawRound")]
pub struct ImportedRound {
    pub req: RequestId,
    /// The request's round, counted in the order of the log (1-based).
    pub round: usize,
    /// The source line (1-based) in the rounds file the header names.
    pub line: usize,
    /// A confidence-trace line, verbatim (its nulls kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sglang: Option<BlockStats>,
    /// `confidence` read as the schema's fields (`None`: it is not a confidence line).
    #[serde(skip)]
    pub row: Option<ConfidenceRow>,
}

/// An imported round as stored, before its confidence line is read.
#[derive(Deserialize)]
struct RawRound {
    req: RequestId,
    round: usize,
    line: usize,
    #[serde(default)]
    confidence: Option<Map<String, Value>>,
    #[serde(default)]
    sglang: Option<BlockStats>,
}

impl From<RawRound> for ImportedRound {
    fn from(r: RawRound) -> Self {
        let row = r
            .confidence
            .as_ref()
            .and_then(|m| serde_json::from_value(Value::Object(m.clone())).ok());
        ImportedRound {
            req: r.req,
            round: r.round,
            line: r.line,
            confidence: r.confidence,
            sglang: r.sglang,
            row,
        }
    }
}

impl ImportedRound {
    /// The block length L.
    pub fn block(&self) -> usize {
        match (&self.row, &self.sglang) {
            (Some(c), _) => c.block_size.unwrap_or(0),
            (None, Some(s)) => s.block_gen_positions,
            (None, None) => 0,
        }
    }

    /// Tokens the round added.
    pub fn emitted(&self) -> usize {
        match (&self.row, &self.sglang) {
            (Some(c), _) => c.emitted_tokens.unwrap_or(0),
            (None, Some(s)) => s.tokens,
            (None, None) => 0,
        }
    }

    /// The round's forwards when the log counts them (SGLang's `forward_passes`; a
    /// version-2 line's draft forwards and its verify); `None` for version 1.
    pub fn forwards(&self) -> Option<u64> {
        match (&self.row, &self.sglang) {
            (Some(c), _) => c.draft_forward_passes.map(|d| d + 1),
            (None, Some(s)) => Some(s.forward_passes),
            (None, None) => None,
        }
    }

    /// Forwards as `trace summary` counts them: the log's, else LinearSpec's one
    /// draft and one verify per round (the convention SGLang's decode-only TPF uses).
    pub fn forwards_or_linearspec(&self) -> u64 {
        self.forwards().unwrap_or(LINEARSPEC_FORWARDS)
    }

    /// Accepted draft tokens, when the log says.
    pub fn accepted(&self) -> Option<usize> {
        let c = self.row.as_ref()?;
        c.accepted_draft_tokens.or(c.matched_draft_tokens)
    }
}

/// The imported rounds of a recording, in its order.
pub fn imported_rounds(trace: &crate::trace::Trace) -> impl Iterator<Item = &ImportedRound> {
    trace.events.iter().filter_map(|s| match &s.event {
        crate::trace::TraceEvent::Session(crate::trace::SessionEvent::ImportedRound(r)) => {
            Some(&**r)
        }
        _ => None,
    })
}

/// Rounds of a recording whose log counts no forwards (TPF takes two for each).
pub fn forwards_assumed(trace: &crate::trace::Trace) -> usize {
    imported_rounds(trace)
        .filter(|r| r.forwards().is_none())
        .count()
}

/// Forwards of a LinearSpec round: one draft, one verify.
pub const LINEARSPEC_FORWARDS: u64 = 2;

/// A request of an imported log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedRequest {
    pub req: RequestId,
    /// The log's id (absent: SGLang's block stats carry none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The per-request record joined to it, verbatim, and its file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_file: Option<String>,
}

/// Where an imported recording came from (the header's `source`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportSource {
    /// `linearspec-confidence v1`, `linearspec-confidence v2`, `sglang-linearspec-stats`.
    pub format: String,
    /// What ran, in the user's words (`--label`) or the log's (`backend`, `model`).
    pub label: String,
    /// The file the rounds came from.
    pub rounds_file: String,
    /// Per-request files joined, and how (`on request_id`, `by order`).
    #[serde(default)]
    pub joined: Vec<String>,
    /// Health-check requests (`HEALTH_CHECK_…`) dropped, and their rounds.
    #[serde(default)]
    pub health_checks_dropped: usize,
    #[serde(default)]
    pub health_check_rounds_dropped: usize,
    /// Requests no per-request record named, dropped (`--joined-only`).
    #[serde(default)]
    pub unjoined_dropped: usize,
    /// What the format does not carry (named once, never drawn as empty boxes).
    #[serde(default)]
    pub absent: Vec<String>,
}

/// How an imported log's model reads on the screen: `imported: …`.
pub const IMPORTED_PREFIX: &str = "imported: ";

impl ImportSource {
    /// "imported: SGLang LinearSpec, nemotron-labs-diffusion-8b (from its log)".
    pub fn describe(&self) -> String {
        format!("{IMPORTED_PREFIX}{} (from its log)", self.label)
    }
}

impl ImportedRound {
    /// The round as the analyses read rounds (`plot`): what the log holds, nothing else
    /// (no margins, risky positions or branch rows: NLD's logs carry none).
    pub fn record(&self) -> crate::engine::events::RoundRecord {
        let row = self.row.as_ref();
        let ended = row.and_then(|c| c.eos_hit) == Some(true);
        let first_reject = row.and_then(|c| c.rejected_position);
        let rank = row.and_then(|c| c.rejected_correct_token_rank);
        // Each judged position: the draft's confidence, and whether its top choice was
        // the verifier's token (accepted: yes; the first rejection: when it ranked 1st).
        let mut judged: Vec<(f32, bool)> = row
            .and_then(|c| c.accepted_draft_confidences.as_ref())
            .map(|v| v.iter().map(|c| (*c as f32, true)).collect())
            .unwrap_or_default();
        if let Some(c) = row.and_then(|c| c.rejected_draft_confidence) {
            judged.push((c as f32, rank == Some(1)));
        }
        crate::engine::events::RoundRecord {
            req: self.req,
            family: Some(crate::trace::summary::IMPORTED_FAMILY.into()),
            round: self.round,
            block: self.block(),
            advance: self.emitted(),
            ended,
            first_reject,
            margin_at_reject: None,
            second_choice_right: rank.map(|k| k == 2),
            misplaced: None,
            judged,
            risky: Vec::new(),
            reused: None,
            built: Vec::new(),
            branches: None,
        }
    }
}
