//! Session recordings: JSONL with a header line, then one event per line stamped with
//! `t` (seconds since the start) and `seq`, and a `session_end` summary last.
//!
//! The live screen, the replayer and `trace summary` all consume [`TraceEvent`]s, so a
//! replay is the same reducer fed from a file.

pub mod beliefs;
pub mod nld;
pub mod order;
pub mod reader;
pub mod summary;
pub mod validate;
pub mod writer;

use serde::{Deserialize, Serialize};

use std::collections::HashSet;

use crate::engine::ablation::ConfigOptions;
use crate::engine::events::{DecodeEvent, Mode, RequestId, EVENT_VERSION};
use crate::engine::options::{Blocks, DecodeOptions};

pub use reader::{read_trace, Trace};
pub use summary::Summary;
pub use writer::Recorder;

/// The `format` field of every recording's header.
pub const FORMAT: &str = "specscope-trace";
/// Version of the file layout (header + stamped lines).
pub const TRACE_VERSION: u32 = 1;

/// First line of a recording: what produced the events.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// The options the recorded requests start with, and the ablation of a recording
    /// made when ablations were options (shipped in every other).
    pub options: ConfigOptions,
    /// How risky positions were defined.
    pub risk: RiskDefinition,
    /// Where the block policy's prices came from (`--cost-profile`), and whether they
    /// were fixed; empty in recordings made before it was recorded.
    pub cost_profile: String,
    /// The command line and machine that made the recording (empty in older files).
    pub command: String,
    pub machine: String,
    /// An imported log's origin (`trace import`); absent in recordings specscope made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<nld::ImportSource>,
}

impl<'de> Deserialize<'de> for TraceHeader {
    /// This version's header, or event version 1's, whose options were strings
    /// (`mode`, `block_policy`) and loose fields.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            format: String,
            version: u32,
            event_version: u32,
            #[serde(default)]
            app_version: String,
            #[serde(default)]
            created_unix: u64,
            model: String,
            #[serde(default)]
            revision: Option<String>,
            #[serde(default)]
            tokenizer_hash: String,
            device: String,
            options: Option<ConfigOptions>,
            risk: RiskDefinition,
            #[serde(default)]
            cost_profile: String,
            #[serde(default)]
            command: String,
            #[serde(default)]
            machine: String,
            #[serde(default)]
            source: Option<nld::ImportSource>,
            // Event version 1.
            mode: Option<Mode>,
            block_policy: Option<Blocks>,
            overlap: Option<bool>,
            temperature: Option<f32>,
            seed: Option<u64>,
        }
        let r = Raw::deserialize(d)?;
        let options = match r.options {
            Some(o) => o,
            None => {
                let mut o = DecodeOptions::default();
                o.mode = r.mode.unwrap_or(o.mode);
                o.blocks = r.block_policy.unwrap_or(o.blocks);
                o.overlap = r.overlap.unwrap_or(o.overlap);
                o.risk_threshold = r.risk.threshold;
                o.sampling.temperature = r.temperature.unwrap_or(0.0);
                o.sampling.seed = r.seed.unwrap_or(0);
                ConfigOptions::shipped(o)
            }
        };
        Ok(TraceHeader {
            format: r.format,
            version: r.version,
            event_version: r.event_version,
            app_version: r.app_version,
            created_unix: r.created_unix,
            model: r.model,
            revision: r.revision,
            tokenizer_hash: r.tokenizer_hash,
            device: r.device,
            options,
            risk: r.risk,
            cost_profile: r.cost_profile,
            command: r.command,
            machine: r.machine,
            source: r.source,
        })
    }
}

impl TraceHeader {
    /// States the decoding options the recorded requests start with.
    pub fn set_options(&mut self, o: &DecodeOptions) {
        self.options = ConfigOptions::shipped(o.clone());
        self.risk.threshold = o.risk_threshold;
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
        let options = DecodeOptions::default();
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
            risk: RiskDefinition {
                metric: "margin".into(),
                threshold: options.risk_threshold,
            },
            options: ConfigOptions::shipped(options),
            cost_profile: String::new(),
            command: String::new(),
            machine: String::new(),
            source: None,
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
    SessionEnd { summary: Box<Summary> },
    /// A request of an imported log (`trace import`), before its rounds.
    ImportedRequest(nld::ImportedRequest),
    /// A round of an imported log, with the source line's fields.
    ImportedRound(Box<nld::ImportedRound>),
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
pub const SESSION_KINDS: &[&str] = &[
    "user_message",
    "token_text",
    "chat_cleared",
    "session_end",
    "imported_request",
    "imported_round",
];

/// FNV-1a 64-bit hash, hex (identifies a tokenizer file without a crypto dependency).
pub fn fnv1a_hex(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The token ids whose text has been written (recordings) or fed (the screen): the one
/// place that decides which `token_text` line goes before an event.
#[derive(Debug, Clone, Default)]
pub struct TokenTexts {
    known: HashSet<u32>,
}

impl TokenTexts {
    /// The `token_text` event to put before `e`, for the ids not seen yet.
    pub fn before(
        &mut self,
        e: &DecodeEvent,
        text: impl Fn(u32) -> String,
    ) -> Option<SessionEvent> {
        let tokens: Vec<(u32, String)> = token_ids(e)
            .into_iter()
            .filter(|id| self.known.insert(*id))
            .map(|id| (id, text(id)))
            .collect();
        (!tokens.is_empty()).then_some(SessionEvent::TokenText { tokens })
    }

    /// Forgets every id (a new recording must stand alone).
    pub fn reset(&mut self) {
        self.known.clear();
    }
}

/// Every token id an event mentions (their text goes first).
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
        DecodeEvent::Denoised { canvas, .. } => ids.extend(canvas.iter().flatten()),
        DecodeEvent::BlockWritten { block, ar, .. } => {
            ids.extend(block);
            ids.extend(ar);
        }
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
            blocks: Blocks::Fixed(16),
            risk_threshold: 0.3,
            ..DecodeOptions::default()
        };
        h.set_options(&o);
        let back: TraceHeader = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back.options.decode, o);
        assert_eq!(back.risk.threshold, 0.3);
    }

    /// A recording made when the ablations were options (the bundled demo, every row
    /// riding) reads them into its ablation and labels them.
    #[test]
    fn an_ablated_recording_says_so() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.jsonl");
        let demo = std::fs::read_to_string(path).unwrap();
        let h: TraceHeader = serde_json::from_str(demo.lines().next().unwrap()).unwrap();
        assert_eq!(h.options.ablation, crate::engine::Ablation::EVERY_ROW);
        assert!(
            h.options.label().ends_with("+overlap (every row)"),
            "{}",
            h.options.label()
        );
        assert_eq!(h.options.preset(), None);
        let new = TraceHeader::new("m".into(), "cpu".into());
        assert!(new.options.ablation.is_shipped());
    }

    #[test]
    fn version_1_headers_still_read() {
        let v1 = r#"{"format":"specscope-trace","version":1,"event_version":1,"app_version":"0.1.0","created_unix":1,"model":"m","revision":null,"tokenizer_hash":"","device":"cpu","mode":"linear","block_policy":"fixed:8","overlap":false,"risk":{"metric":"margin","threshold":0.4},"temperature":0.0,"seed":0}"#;
        let h: TraceHeader = serde_json::from_str(v1).unwrap();
        assert_eq!(
            (
                h.options.mode,
                h.options.blocks.clone(),
                h.options.risk_threshold
            ),
            (Mode::Linear, Blocks::Fixed(8), 0.4)
        );
    }
}
