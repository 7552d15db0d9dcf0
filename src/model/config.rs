//! `config.json` of a Nemotron-Labs-Diffusion checkpoint, field for field, validated.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

/// The only `model_type` this crate serves.
pub const MODEL_TYPE: &str = "nemotron_labs_diffusion";

/// One id or a list of ids (HF writes `eos_token_id` either way).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    pub fn to_vec(&self) -> Vec<u32> {
        match self {
            TokenIds::One(id) => vec![*id],
            TokenIds::Many(ids) => ids.clone(),
        }
    }
}

/// The nested `rope_parameters` dict (transformers v5), also accepted as the legacy
/// `rope_scaling`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeParameters {
    /// `default` (plain RoPE) or `yarn`.
    #[serde(default = "default_rope_type", alias = "type")]
    pub rope_type: String,
    pub rope_theta: Option<f64>,
    pub factor: Option<f64>,
    pub original_max_position_embeddings: Option<usize>,
    pub beta_fast: Option<f64>,
    pub beta_slow: Option<f64>,
    pub mscale: Option<f64>,
    pub mscale_all_dim: Option<f64>,
    pub attention_factor: Option<f64>,
    pub truncate: Option<bool>,
    /// Llama-4 query temperature; absent means no scaling.
    pub llama_4_scaling_beta: Option<f64>,
}

impl Default for RopeParameters {
    fn default() -> Self {
        Self {
            rope_type: default_rope_type(),
            rope_theta: None,
            factor: None,
            original_max_position_embeddings: None,
            beta_fast: None,
            beta_slow: None,
            mscale: None,
            mscale_all_dim: None,
            attention_factor: None,
            truncate: None,
            llama_4_scaling_beta: None,
        }
    }
}

fn default_rope_type() -> String {
    "default".to_string()
}

fn default_act() -> String {
    "silu".to_string()
}

fn default_eps() -> f64 {
    1e-5
}

/// `config.json` as the checkpoints write it; unknown (training-only) keys are ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    pub model_type: String,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    /// Explicit: the 14B has 128 ≠ hidden / heads.
    pub head_dim: Option<usize>,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub rope_parameters: Option<RopeParameters>,
    /// Legacy top-level theta, used when `rope_parameters` has none.
    pub rope_theta: Option<f64>,
    /// Legacy name of `rope_parameters`.
    pub rope_scaling: Option<RopeParameters>,
    pub mask_token_id: Option<u32>,
    pub bos_token_id: Option<u32>,
    pub eos_token_id: Option<TokenIds>,
    pub pad_token_id: Option<u32>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    pub sliding_window: Option<usize>,
    pub torch_dtype: Option<String>,
    /// Default draft block length of the checkpoint (inference hint only).
    pub block_size: Option<usize>,
}

impl Config {
    /// Reads and validates `config.json`; every error names the file and the field.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::read_bounded(path, 1 << 20)?;
        Self::from_json(&text).with_context(|| format!("invalid model config {}", path.display()))
    }

    pub fn from_json(text: &str) -> Result<Self> {
        let cfg: Config = serde_json::from_str(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    pub fn num_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// The effective RoPE parameters: `rope_parameters`, else legacy `rope_scaling`,
    /// else plain RoPE; `rope_theta` falls back to the top-level field.
    pub fn rope(&self) -> RopeParameters {
        let mut p = self
            .rope_parameters
            .clone()
            .or_else(|| self.rope_scaling.clone())
            .unwrap_or_default();
        if p.rope_theta.is_none() {
            p.rope_theta = self.rope_theta;
        }
        p
    }

    pub fn rope_theta(&self) -> f64 {
        self.rope().rope_theta.unwrap_or(10_000.0)
    }

    /// What a loader should tell the user about this config (it loads either way).
    pub fn warnings(&self) -> Vec<String> {
        let p = self.rope();
        let mut out = Vec::new();
        if p.rope_type == "yarn" {
            let original = p
                .original_max_position_embeddings
                .unwrap_or(self.max_position_embeddings);
            let implied = self.max_position_embeddings as f64 / original as f64;
            if let Some(factor) = p.factor.filter(|f| (f - implied).abs() > 1e-9) {
                out.push(format!(
                    "rope_parameters.factor = {factor} but max_position_embeddings / original_max_position_embeddings = {implied}; using the explicit factor (transformers v5)"
                ));
            }
        }
        out
    }

    /// Parameters the architecture has (embeddings, layers, norms, head), counted in
    /// u128 so absurd configs cannot overflow.
    pub fn param_count(&self) -> u128 {
        let (v, h, i) = (
            self.vocab_size as u128,
            self.hidden_size as u128,
            self.intermediate_size as u128,
        );
        let (nh, kv, hd) = (
            self.num_attention_heads as u128,
            self.num_kv_heads() as u128,
            self.head_dim() as u128,
        );
        let attn = h * nh * hd * 2 + h * kv * hd * 2;
        let layer = attn + 3 * h * i + 2 * h;
        let head = if self.tie_word_embeddings { 0 } else { v * h };
        v * h + self.num_hidden_layers as u128 * layer + h + head
    }

    /// Weights one forward reads whole: every layer's, the norms and the head (the
    /// embedding table is only gathered from, unless it is the tied head).
    pub fn weights_read_per_forward(&self) -> u128 {
        let untied_embedding = if self.tie_word_embeddings {
            0
        } else {
            self.vocab_size as u128 * self.hidden_size as u128
        };
        self.param_count() - untied_embedding
    }

    /// Applies `generation_config.json` as transformers does: its `eos_token_id` (and
    /// `bos_token_id`) replace config.json's when it has them.
    pub fn apply_generation_config(&mut self, path: &Path) -> Result<()> {
        let text = crate::read_bounded(path, 1 << 20)?;
        #[derive(Deserialize)]
        struct Gen {
            eos_token_id: Option<TokenIds>,
            bos_token_id: Option<u32>,
        }
        let g: Gen = serde_json::from_str(&text)
            .with_context(|| format!("invalid generation config {}", path.display()))?;
        if let Some(e) = g.eos_token_id {
            self.eos_token_id = Some(e);
        }
        if let Some(b) = g.bos_token_id {
            self.bos_token_id = Some(b);
        }
        self.validate()
            .with_context(|| format!("with {} applied", path.display()))
    }

    pub fn mask_token_id(&self) -> u32 {
        self.mask_token_id.unwrap_or(0)
    }

    pub fn eos_token_ids(&self) -> Vec<u32> {
        self.eos_token_id
            .as_ref()
            .map(TokenIds::to_vec)
            .unwrap_or_default()
    }

    #[allow(clippy::too_many_lines)] // one check per config field, each naming its field
    fn validate(&self) -> Result<()> {
        if self.model_type != MODEL_TYPE {
            bail!(
                "field `model_type`: expected \"{MODEL_TYPE}\", found \"{}\"",
                self.model_type
            );
        }
        // Sizes beyond any real checkpoint are errors here, before anything is
        // allocated in proportion to them.
        for (name, v, max) in [
            ("vocab_size", self.vocab_size, 1 << 21),
            ("hidden_size", self.hidden_size, 1 << 16),
            ("intermediate_size", self.intermediate_size, 1 << 18),
            ("num_hidden_layers", self.num_hidden_layers, 1024),
            ("num_attention_heads", self.num_attention_heads, 1024),
            (
                "max_position_embeddings",
                self.max_position_embeddings,
                1 << 24,
            ),
        ] {
            ensure!(v > 0, "field `{name}` must be positive");
            ensure!(
                v <= max,
                "field `{name}` is {v}: more than this architecture allows ({max})"
            );
        }
        if let Some(hd) = self.head_dim {
            ensure!(hd <= 1024, "field `head_dim` is {hd}: more than 1024");
        }
        let kv = self.num_kv_heads();
        ensure!(
            kv > 0 && self.num_attention_heads.is_multiple_of(kv),
            "field `num_key_value_heads` ({kv}) must divide `num_attention_heads` ({})",
            self.num_attention_heads
        );
        let hd = self.head_dim();
        ensure!(
            hd > 0 && hd.is_multiple_of(2),
            "field `head_dim` ({hd}) must be a positive even number"
        );
        ensure!(
            self.hidden_act == "silu",
            "field `hidden_act`: only \"silu\" is supported, found \"{}\"",
            self.hidden_act
        );
        ensure!(
            !self.attention_bias && !self.mlp_bias,
            "fields `attention_bias`/`mlp_bias`: biases are not part of this architecture"
        );
        match self.mask_token_id {
            None => bail!("field `mask_token_id` is missing: a diffusion-AR checkpoint needs it"),
            Some(id) => ensure!(
                (id as usize) < self.vocab_size,
                "field `mask_token_id` ({id}) is not below `vocab_size` ({})",
                self.vocab_size
            ),
        }
        ensure!(
            self.eos_token_ids().len() <= 64,
            "field `eos_token_id` lists {} ids: more than 64",
            self.eos_token_ids().len()
        );
        for id in self.eos_token_ids() {
            ensure!(
                (id as usize) < self.vocab_size,
                "field `eos_token_id` ({id}) is not below `vocab_size` ({})",
                self.vocab_size
            );
        }
        if let Some(id) = self.bos_token_id {
            ensure!(
                (id as usize) < self.vocab_size,
                "field `bos_token_id` ({id}) is not below `vocab_size` ({})",
                self.vocab_size
            );
        }
        // The mask is the draft's blank: shared with another special id, drafts would
        // end answers (eos), or never be told apart from the prompt's start or padding.
        let mask = self.mask_token_id();
        ensure!(
            !self.eos_token_ids().contains(&mask),
            "field `eos_token_id` includes {mask}, which is `mask_token_id`: every drafted blank would end the answer"
        );
        for (name, id) in [
            ("bos_token_id", self.bos_token_id),
            ("pad_token_id", self.pad_token_id),
        ] {
            ensure!(
                id != Some(mask),
                "field `{name}` is {mask}, which is `mask_token_id`: the draft's blank must be a token of its own"
            );
        }
        ensure!(
            self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0 && self.rms_norm_eps <= 0.1,
            "field `rms_norm_eps` is {}: expected a small positive number (about 1e-6 to 1e-5)",
            self.rms_norm_eps
        );
        if let Some(w) = self.sliding_window {
            ensure!(
                w >= self.max_position_embeddings,
                "field `sliding_window` is {w}: sliding-window attention is not implemented (only a window of at least max_position_embeddings, {}, which is plain attention)",
                self.max_position_embeddings
            );
        }
        let rope = self.rope();
        match rope.rope_type.as_str() {
            "default" => {}
            "yarn" => {
                if let Some(o) = rope.original_max_position_embeddings {
                    ensure!(
                        (1..=self.max_position_embeddings).contains(&o),
                        "field `rope_parameters.original_max_position_embeddings` is {o}: expected 1 to max_position_embeddings ({})",
                        self.max_position_embeddings
                    );
                }
                let factor = rope.factor.or_else(|| {
                    rope.original_max_position_embeddings
                        .map(|o| self.max_position_embeddings as f64 / o as f64)
                });
                ensure!(
                    factor.is_some_and(|f| f.is_finite() && f > 0.0 && f <= 1e4),
                    "field `rope_parameters.factor` is missing or not a positive number up to 10000 for YaRN"
                );
                for (name, v) in [
                    ("beta_fast", rope.beta_fast),
                    ("beta_slow", rope.beta_slow),
                    ("mscale", rope.mscale),
                    ("mscale_all_dim", rope.mscale_all_dim),
                    ("attention_factor", rope.attention_factor),
                    ("llama_4_scaling_beta", rope.llama_4_scaling_beta),
                ] {
                    if let Some(v) = v {
                        ensure!(
                            v.is_finite() && v.abs() <= 1e4,
                            "field `rope_parameters.{name}` is {v}: not a usable number"
                        );
                    }
                }
            }
            other => bail!(
                "field `rope_parameters.rope_type`: \"{other}\" is not supported (expected \"default\" or \"yarn\")"
            ),
        }
        let theta = self.rope_theta();
        ensure!(
            theta.is_finite() && theta > 1.0 && theta <= 1e12,
            "field `rope_parameters.rope_theta` is {theta}: expected a number above 1 (and finite)"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> serde_json::Value {
        serde_json::json!({
            "model_type": "nemotron_labs_diffusion",
            "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 8, "max_position_embeddings": 128, "mask_token_id": 3,
            "eos_token_id": [2, 5],
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            "dlm_loss_weight": null, "ar_loss_weight": 1.0
        })
    }

    #[test]
    fn parses_eos_as_int_or_list_and_ignores_training_keys() {
        let cfg = Config::from_json(&base().to_string()).unwrap();
        assert_eq!(cfg.eos_token_ids(), vec![2, 5]);
        let mut v = base();
        v["eos_token_id"] = serde_json::json!(7);
        assert_eq!(
            Config::from_json(&v.to_string()).unwrap().eos_token_ids(),
            vec![7]
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases: [(&str, serde_json::Value, &str); 5] = [
            ("model_type", serde_json::json!("llama"), "model_type"),
            ("mask_token_id", serde_json::json!(64), "mask_token_id"),
            (
                "num_key_value_heads",
                serde_json::json!(3),
                "num_key_value_heads",
            ),
            ("hidden_act", serde_json::json!("gelu"), "hidden_act"),
            (
                "rope_parameters",
                serde_json::json!({"rope_type": "dynamic", "rope_theta": 1e4}),
                "rope_type",
            ),
        ];
        for (field, value, needle) in cases {
            let mut v = base();
            v[field] = value;
            let err = format!("{:#}", Config::from_json(&v.to_string()).unwrap_err());
            assert!(err.contains(needle), "{field}: {err}");
        }
        let mut v = base();
        v.as_object_mut().unwrap().remove("vocab_size");
        let err = format!("{:#}", Config::from_json(&v.to_string()).unwrap_err());
        assert!(err.contains("vocab_size"), "{err}");
    }

    #[test]
    fn legacy_top_level_theta_is_used() {
        let mut v = base();
        v.as_object_mut().unwrap().remove("rope_parameters");
        v["rope_theta"] = serde_json::json!(5e5);
        let cfg = Config::from_json(&v.to_string()).unwrap();
        assert_eq!(cfg.rope().rope_type, "default");
        assert_eq!(cfg.rope_theta(), 5e5);
    }
}
