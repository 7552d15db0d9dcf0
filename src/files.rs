//! The JSON files specscope writes and reads back, one type each: the command that
//! writes a file serializes this type and `plot` and the tests deserialize the same
//! one, so a renamed field breaks the build or the test here, not a reader in another
//! module. (The cost model reads a profile's latencies as `engine::cost::Profile`,
//! which `ProfileDoc::profile` gives; the test below holds the two together.) Their
//! format versions live here too. A recording is `trace`'s: it is written event by
//! event.

use serde::{Deserialize, Serialize};

use crate::bench::sweep::BenchResult;
use crate::engine::cost::{CostModel, Profile, ProfilePoint};
use crate::Provenance;

/// Version of `bench --json`'s layout (a field added keeps it; one renamed or removed
/// moves it, and so does one `plot` needs). `plot` reads this version only.
/// 2: each result carries its configuration's `options` and `batching`.
pub const BENCH_VERSION: u32 = 2;

/// Version of `eval --json`'s layout (as `BENCH_VERSION`).
pub const EVAL_VERSION: u32 = 1;

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
