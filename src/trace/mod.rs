//! Session recordings: JSONL with a header line, then one event per line stamped with
//! `t` (seconds since the start) and `seq`, and a `session_end` summary last.
//!
//! The live screen, the replayer and `trace summary` all consume [`TraceEvent`]s, so a
//! replay is the same reducer fed from a file.

pub mod reader;
pub mod summary;
pub mod writer;

use serde::{Deserialize, Serialize};

use crate::engine::events::{DecodeEvent, Mode, RequestId, EVENT_VERSION};
use crate::engine::DecodeOptions;

pub use reader::{read_trace, Trace};
pub use summary::Summary;
pub use writer::Recorder;

/// The `format` field of every recording's header.
pub const FORMAT: &str = "specscope-trace";
/// Version of the file layout (header + stamped lines).
pub const TRACE_VERSION: u32 = 1;

/// First line of a recording: what produced the events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    pub format: String,
    pub version: u32,
    pub event_version: u32,
    pub app_version: String,
    /// Seconds since the Unix epoch when the recording started.
    pub created_unix: u64,
    /// What `--model` named (`bundled:tiny-nld`, a hub id or a directory).
    pub model: String,
    /// The hub commit, when the model came from the hub.
    pub revision: Option<String>,
    /// FNV-1a 64 of tokenizer.json, hex.
    pub tokenizer_hash: String,
    pub device: String,
    pub mode: String,
    /// `fixed:B` or `adaptive`.
    pub block_policy: String,
    pub overlap: bool,
    /// How risky positions were defined.
    pub risk: RiskDefinition,
    pub temperature: f32,
    pub seed: u64,
}

impl TraceHeader {
    /// States the decoding options the recorded requests start with.
    pub fn set_options(&mut self, o: &DecodeOptions) {
        self.mode = serde_json::to_value(o.mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        self.block_policy = o.block_policy();
        self.overlap = o.mode == Mode::Recguide && o.overlap;
        self.risk.threshold = o.risk_threshold;
        self.temperature = o.sampling.temperature;
        self.seed = o.sampling.seed;
    }

    /// The mode named in the header (RecGuide when it is not one this build knows).
    pub fn decode_mode(&self) -> Mode {
        serde_json::from_value(serde_json::Value::String(self.mode.clone()))
            .unwrap_or(Mode::Recguide)
    }
}

/// The risk rule in force when the recording was made (old files stay interpretable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RiskDefinition {
    /// Always `margin` here: top-1 minus top-2 draft probability, mask token excluded.
    pub metric: String,
    pub threshold: f32,
}

impl TraceHeader {
    /// A header with the current format and versions.
    pub fn new(model: String, device: String) -> Self {
        Self {
            format: FORMAT.into(),
            version: TRACE_VERSION,
            event_version: EVENT_VERSION,
            app_version: env!("CARGO_PKG_VERSION").into(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            model,
            revision: None,
            tokenizer_hash: String::new(),
            device,
            mode: "recguide".into(),
            block_policy: "adaptive".into(),
            overlap: true,
            risk: RiskDefinition {
                metric: "margin".into(),
                threshold: 0.5,
            },
            temperature: 0.0,
            seed: 0,
        }
    }
}

/// Events a recording holds beyond the engine's own: what the user typed, the text of
/// token ids (so a file reads without the tokenizer) and the closing summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionEvent {
    /// The user sent a message; `req` is the request answering it.
    UserMessage {
        req: RequestId,
        text: String,
        /// The message replaces the last exchange (regenerate).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        regenerate: bool,
    },
    /// Text of token ids seen for the first time in the following events.
    TokenText { tokens: Vec<(u32, String)> },
    /// The chat was cleared.
    ChatCleared,
    /// Statistics of the whole session (always the last line of a finished file).
    SessionEnd { summary: Summary },
}

/// One line of a recording after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    Decode(DecodeEvent),
    Session(SessionEvent),
}

impl From<DecodeEvent> for TraceEvent {
    fn from(e: DecodeEvent) -> Self {
        TraceEvent::Decode(e)
    }
}

impl From<SessionEvent> for TraceEvent {
    fn from(e: SessionEvent) -> Self {
        TraceEvent::Session(e)
    }
}

/// A trace event with its time and sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped {
    /// Seconds since the recording started.
    pub t: f64,
    pub seq: u64,
    pub event: TraceEvent,
}

/// The `kind`s of [`SessionEvent`].
pub const SESSION_KINDS: &[&str] = &["user_message", "token_text", "chat_cleared", "session_end"];

/// FNV-1a 64-bit hash, hex (identifies a tokenizer file without a crypto dependency).
pub fn fnv1a_hex(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Every token id an event mentions (the recorder writes their text first).
pub fn token_ids(e: &DecodeEvent) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut views = |v: &[crate::engine::events::PosView]| {
        for p in v {
            ids.extend(p.top.iter().map(|(id, _)| *id));
        }
    };
    match e {
        DecodeEvent::Drafted { block, detail, .. } => {
            views(detail);
            ids.extend(block);
        }
        DecodeEvent::Verified {
            verifier_tokens,
            bonus,
            detail,
            ..
        } => {
            views(detail);
            ids.extend(verifier_tokens);
            ids.push(*bonus);
        }
        DecodeEvent::BranchesBuilt { branches, .. } => {
            for b in branches {
                ids.extend(&b.block);
                ids.extend(b.alt);
            }
        }
        DecodeEvent::Committed { tokens, .. } => ids.extend(tokens),
        DecodeEvent::Prefilled { seed, .. } => ids.push(*seed),
        _ => {}
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_states_the_options_in_force() {
        let mut h = TraceHeader::new("m".into(), "cpu".into());
        let o = DecodeOptions {
            mode: Mode::Linear,
            block: 16,
            risk_threshold: 0.3,
            ..DecodeOptions::default()
        };
        h.set_options(&o);
        assert_eq!(
            (h.mode.as_str(), h.block_policy.as_str()),
            ("linear", "fixed:16")
        );
        assert!(!h.overlap, "overlap only means something in RecGuide");
        assert_eq!(h.risk.threshold, 0.3);
        assert_eq!(h.decode_mode(), Mode::Linear);
        h.mode = "warp".into();
        assert_eq!(h.decode_mode(), Mode::Recguide);
    }
}
