//! The JSON files specscope writes and reads back, one type each (`bench`, `profile`,
//! `eval`, `run`, `check`, `ui-bench`, `inspect`): the command that writes a file
//! serializes this type and `plot` and the tests deserialize the same one, so a renamed
//! field breaks the build or the test here, not a reader in another module. (The cost model reads a profile's latencies as `engine::cost::Profile`,
//! which `ProfileDoc::profile` gives; the test below holds the two together.) Their
//! format versions live here too. A recording is `trace`'s: it is written event by
//! event.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bench::acceptance::AcceptanceReport;
use crate::bench::sweep::BenchResult;
use crate::engine::ablation::ConfigOptions;
use crate::engine::cost::{CostModel, Profile, ProfilePoint};
use crate::engine::events::StopReason;
use crate::engine::events::{keyed, ratio, BranchCount, RequestStats};
use crate::engine::options::Blocks;
use crate::engine::overlap::BranchKind;
use crate::model::config::RopeParameters;
use crate::Provenance;

/// Version of `bench --json`'s layout (a field added keeps it; one renamed or removed
/// moves it, and so does one `plot` needs). `plot` reads this version only.
/// 2: each result carries its configuration's `options` and `batching`.
pub const BENCH_VERSION: u32 = 2;

/// Versions of the other documents' layouts (as `BENCH_VERSION`).
pub const EVAL_VERSION: u32 = 1;
pub const RUN_VERSION: u32 = 1;
pub const CHECK_VERSION: u32 = 1;
pub const UI_BENCH_VERSION: u32 = 1;
pub const INSPECT_VERSION: u32 = 1;

/// A document's name and layout version, the first fields of every file but a bench's
/// and a profile's (which predate it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Format {
    /// "specscope-eval", "specscope-run", …
    pub format: String,
    pub format_version: u32,
}

impl Format {
    pub fn new(name: &str, version: u32) -> Self {
        Self {
            format: format!("specscope-{name}"),
            format_version: version,
        }
    }
}

/// `specscope bench --json`: every result with what produced it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchDoc {
    /// "specscope-bench".
    #[serde(default)]
    pub format: String,
    /// [`BENCH_VERSION`] when written; absent in the first layout.
    #[serde(default)]
    pub format_version: Option<u32>,
    pub model: String,
    /// Where the acceptance figures come from ("measured on this model", or the
    /// simulator's label).
    #[serde(default)]
    pub acceptance: String,
    /// Prompts in the run (before repeats for held loads).
    #[serde(default)]
    pub prompts: usize,
    #[serde(default)]
    pub requests_per_slot: usize,
    #[serde(default)]
    pub max_new_tokens: usize,
    #[serde(default)]
    pub repeats: u16,
    /// The prices decisions and modeled times used.
    #[serde(default)]
    pub cost_profile: Option<CostModel>,
    /// The prices did not learn from the run's forwards.
    #[serde(default)]
    pub cost_profile_fixed: bool,
    /// Where the survival tables came from.
    #[serde(default)]
    pub survival_tables: String,
    #[serde(default)]
    pub provenance: Option<Provenance>,
    pub results: Vec<BenchResult>,
}

impl BenchDoc {
    pub const FORMAT: &'static str = "specscope-bench";
}

/// `specscope profile --json` (and the saved profile a run prices by): forward
/// latencies by shape, and the host's memory bandwidth where measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileDoc {
    pub model: String,
    /// A streaming read of a buffer larger than the caches (CPU only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_gb_s: Option<f64>,
    pub points: Vec<MeasuredPoint>,
    #[serde(default)]
    pub provenance: Option<Provenance>,
}

/// One measured shape of a profile: what the cost model fits, and what `profile`
/// prints beside it (absent from files it did not measure them in).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasuredPoint {
    /// The shape and its latency, as the cost model reads them.
    #[serde(flatten)]
    pub point: ProfilePoint,
    /// What the logits statistics read into host memory per forward (all rows).
    #[serde(default)]
    pub host_bytes_per_forward: f64,
    /// Bytes a forward of this shape must read from memory at least: the weights once
    /// and each row's cached keys and values.
    #[serde(default)]
    pub bytes_read: f64,
    /// `bytes_read` over the median time: the memory bandwidth the forward attains.
    #[serde(default)]
    pub gb_per_s: f64,
    /// The roofline model's ms for this shape (`--roofline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline_ms: Option<f64>,
}

impl ProfileDoc {
    /// The latencies, as the cost model fits them.
    pub fn profile(&self) -> Profile {
        Profile {
            model: self.model.clone(),
            points: self.points.iter().map(|p| p.point.clone()).collect(),
        }
    }
}

/// `specscope eval --json`: the acceptance report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalDoc {
    #[serde(flatten)]
    pub format: Format,
    #[serde(flatten)]
    pub report: AcceptanceReport,
}

/// `specscope run --json`: one answer and what decoding it took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunDoc {
    #[serde(flatten)]
    pub format: Format,
    pub model: String,
    /// Where the acceptance figures come from (measured, or the simulator's label).
    pub acceptance: String,
    /// The hub commit the files came from, if they came from the hub.
    pub commit: Option<String>,
    /// The options, with the (shipped) ablation's fields beside them.
    pub options: ConfigOptions,
    pub label: String,
    pub block_policy: Blocks,
    pub prompt_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
    pub text: String,
    pub stop: StopReason,
    pub stats: RunStats,
    /// What the logits statistics read into host memory (prefill included).
    pub host_reads: HostReadsDoc,
    pub signals_kernel: String,
}

/// A run's counts and rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStats {
    pub prompt_len: usize,
    pub new_tokens: usize,
    pub decode_tokens: usize,
    pub rounds: usize,
    pub forwards: RunForwards,
    /// Block diffusion (not lossless) only.
    pub diffusion: Option<DiffusionAgreement>,
    pub rows_per_forward: f64,
    pub query_tokens_per_forward: f64,
    pub tpf: f64,
    pub mean_acceptance: f64,
    pub acceptance_histogram: Vec<usize>,
    /// Rounds per block size.
    #[serde(with = "keyed")]
    pub blocks: BTreeMap<usize, usize>,
    /// Branch rows built and reused by kind, and the share of rounds a branch hit
    /// (RecGuide's overlap only).
    pub branches: Option<BranchCounts>,
    pub branch_hit_rate: Option<f64>,
    pub prefill_secs: f64,
    pub decode_secs: f64,
    pub tokens_per_sec: f64,
}

impl RunStats {
    /// A request's statistics as a run reports them; `overlap`: RecGuide's branch rows
    /// were on (their counts and hit rate are reported).
    pub fn of(st: &RequestStats, overlap: bool) -> Self {
        let t = &st.tally;
        let per_forward = |x: usize| ratio(x as f64, t.decode_forwards() as f64);
        Self {
            prompt_len: st.prompt_tokens,
            new_tokens: t.new_tokens,
            decode_tokens: t.decode_tokens,
            rounds: t.rounds,
            forwards: RunForwards {
                draft: t.draft_forwards,
                verify: t.verify_forwards,
                fused: t.fused_forwards,
                denoise: t.denoise_forwards,
                refresh: t.refresh_forwards,
                decode_total: t.decode_forwards(),
                saved_drafts: t.saved_drafts,
            },
            diffusion: (t.refresh_forwards > 0).then(|| DiffusionAgreement {
                ar_agreement: t.ar_agreement(),
                ar_agree: t.ar_agree,
                ar_judged: t.ar_judged,
                first_divergence: st.first_divergence,
            }),
            rows_per_forward: per_forward(t.rows),
            query_tokens_per_forward: per_forward(t.query_tokens),
            tpf: t.tpf(),
            mean_acceptance: t.mean_accept(),
            acceptance_histogram: t.accept_hist.clone(),
            blocks: t.blocks.clone(),
            branches: overlap.then(|| BranchCounts(t.branches.clone())),
            branch_hit_rate: overlap.then(|| t.hit_rate()),
            prefill_secs: st.prefill_secs,
            decode_secs: st.decode_secs,
            tokens_per_sec: st.tokens_per_sec(),
        }
    }
}

/// Branch rows by kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BranchCounts(#[serde(with = "keyed")] pub BTreeMap<BranchKind, BranchCount>);

/// A run's decode forwards by phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunForwards {
    pub draft: usize,
    pub verify: usize,
    pub fused: usize,
    pub denoise: usize,
    pub refresh: usize,
    pub decode_total: usize,
    pub saved_drafts: usize,
}

/// How many of a diffusion answer's tokens AR would have emitted at their position,
/// and where the first one it would not is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiffusionAgreement {
    pub ar_agreement: f64,
    pub ar_agree: usize,
    pub ar_judged: usize,
    pub first_divergence: Option<usize>,
}

/// Bytes the logits statistics read into host memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostReadsDoc {
    /// Which code read them (the fused kernel or the tensor path).
    pub path: String,
    pub bytes: u64,
    pub positions: u64,
    pub bytes_per_position: f64,
    pub bytes_per_round: f64,
}

/// `specscope check --json`: each check and whether all passed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckDoc {
    #[serde(flatten)]
    pub format: Format,
    pub model: String,
    pub device: String,
    pub dtype: String,
    pub prompts: usize,
    pub passed: bool,
    pub checks: Vec<CheckOutcome>,
    pub provenance: Option<Provenance>,
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckOutcome {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// `specscope ui-bench --json`: the screen's cost to decoding, its frame times and key
/// latencies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UiBenchDoc {
    #[serde(flatten)]
    pub format: Format,
    pub requests: usize,
    pub recording: bool,
    pub repeats: usize,
    pub tokens: usize,
    /// The screen's answers are the headless ones, text for text.
    pub identical_output: bool,
    /// Decode seconds of each pass, headless and with the screen.
    pub headless_secs: Vec<f64>,
    pub screen_secs: Vec<f64>,
    pub throughput_ratio_screen_vs_headless: f64,
    /// Enough decoding per side for the ratio to mean something.
    pub ratio_reliable: bool,
    pub ratio_per_pass: Vec<f64>,
    pub throughput_ratio_with_keys_pressed: f64,
    pub frames_live: usize,
    pub frame_ms_live: Spread,
    pub frame_ms_demo_full: Spread,
    pub key_to_frame_ms: KeyLatency,
    /// "WxH".
    pub size: String,
}

/// Mean, 99th percentile and maximum of some ms.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    pub p99: f64,
    pub max: f64,
}

/// Key presses timed to the frame that showed them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct KeyLatency {
    pub keys: usize,
    #[serde(flatten)]
    pub ms: Spread,
}

/// `specscope inspect`: a checkpoint's config, weights and its first predictions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InspectDoc {
    #[serde(flatten)]
    pub format: Format,
    pub model: String,
    pub commit: Option<String>,
    pub device: String,
    pub config: InspectConfig,
    pub weights: InspectWeights,
    pub prompt_tokens: Vec<u32>,
    /// The next token after the prompt (AR).
    pub causal: Predicted,
    /// A block of masks after the prompt (the draft).
    pub bidirectional: InspectBlock,
}

/// The config fields that decide the geometry and the special tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InspectConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rope: RopeParameters,
    pub mask_token_id: u32,
    pub eos_token_id: Vec<u32>,
}

/// What loading found in the weight files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InspectWeights {
    pub tensors: usize,
    pub file_dtypes: Vec<String>,
    pub unexpected: Vec<String>,
    pub lora: bool,
}

/// A drafted block's predictions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InspectBlock {
    pub block: usize,
    /// The draft adapter drafted it.
    pub lora: bool,
    pub positions: Vec<Predicted>,
}

/// The largest logits at one position.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Predicted {
    pub position: usize,
    pub top: Vec<TopLogit>,
}

/// One of the largest logits: the token, its logit and its text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopLogit {
    pub id: u32,
    /// `null` would mean a non-finite logit, which `inspect` refuses first.
    pub logit: f32,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a writer serializes, the reader reads back, field for field.
    #[test]
    fn bench_and_profile_documents_round_trip() {
        let bench = BenchDoc {
            format: BenchDoc::FORMAT.into(),
            format_version: Some(BENCH_VERSION),
            model: "m".into(),
            acceptance: "measured on this model".into(),
            prompts: 3,
            requests_per_slot: 2,
            max_new_tokens: 64,
            repeats: 1,
            cost_profile: Some(CostModel::zero("zero")),
            cost_profile_fixed: true,
            survival_tables: "t".into(),
            provenance: Some(Provenance::here()),
            results: vec![BenchResult::empty(
                &crate::bench::sweep::named_config("recguide"),
                4,
                8,
            )],
        };
        let v = serde_json::to_value(&bench).unwrap();
        for field in [
            "format",
            "format_version",
            "model",
            "acceptance",
            "prompts",
            "requests_per_slot",
            "max_new_tokens",
            "repeats",
            "cost_profile",
            "cost_profile_fixed",
            "survival_tables",
            "provenance",
            "results",
        ] {
            assert!(v.get(field).is_some(), "bench JSON lacks `{field}`");
        }
        // What `scripts/recguide-table.py` reads, by name.
        let r = &v["results"][0];
        for key in [
            "config",
            "concurrency",
            "requests",
            "modeled_tokens_per_sec",
            "tpf",
            "physical_forwards",
            "tally",
        ] {
            assert!(r.get(key).is_some(), "a bench result lacks `{key}`");
        }
        assert!(r["tally"].get("blocks").is_some() && v["cost_profile"].get("source").is_some());
        let back: BenchDoc = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);

        let profile = ProfileDoc {
            model: "m".into(),
            memory_bandwidth_gb_s: Some(21.5),
            points: vec![MeasuredPoint {
                point: ProfilePoint {
                    cache_len: 256,
                    rows: 1,
                    tokens: 8,
                    median_ms: 3.5,
                    min_ms: 3.0,
                },
                host_bytes_per_forward: 1024.0,
                bytes_read: 4e9,
                gb_per_s: 20.0,
                roofline_ms: None,
            }],
            provenance: None,
        };
        let v = serde_json::to_value(&profile).unwrap();
        let back: ProfileDoc = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
        // The cost model reads a profile document as its latencies.
        let p: Profile = serde_json::from_value(v).unwrap();
        assert_eq!(p.model, "m");
        let fitted = profile.profile();
        assert_eq!(
            (p.points[0].median_ms, p.points[0].min_ms),
            (fitted.points[0].median_ms, fitted.points[0].min_ms)
        );
    }
}
