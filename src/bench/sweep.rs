//! Modes × block sizes × concurrency levels over one prompt set, in one process.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use super::prompts::BenchPrompt;
use crate::engine::ablation::ConfigOptions;
use crate::engine::cost::Pricing;
use crate::engine::events::{add_hist, ratio, Tally};
use crate::engine::options::{Blocks, DecodeOptions, Preset};
use crate::engine::overlap::RowTable;
use crate::engine::policy::SurvivalTables;
use crate::engine::{Ablation, Batching, Mode, NullSink, Scheduler, SharedBackbone, Submit};

/// The configurations a sweep can run. The command line's names (`--configs`) and its
/// help come from the variants (clap's kebab-case), the JSON's from serde's, the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Config {
    /// AR greedy: the reference output and speed.
    Ar,
    /// LinearSS at each --blocks.
    Linear,
    /// RecGuide, the paper preset: adaptive {8, 16, 32} and branch rows chosen
    /// together, priced at the round's load.
    Recguide,
    /// The paper preset building every row the row table asks for at every load (the
    /// ablation of pricing the rows).
    RecguideAllRows,
    /// RecGuide, the throughput preset (AR steps and 4-token drafts allowed, measured
    /// regime).
    RecguideThroughput,
    /// The paper preset with the reference's buckets: one forward per block size.
    RecguideBuckets,
    /// The paper preset in lockstep: a fresh draft takes the round's draft forward even
    /// while others verify held blocks (the ablation of drafts riding the shared forward).
    RecguideLockstep,
    /// Overlap at each --blocks (adaptive off).
    RecguideFixed,
    /// Adaptive block size only (overlap off), from the entropy and the previous
    /// round's outcome.
    RecguideAdaptive,
    /// Adaptive block size only, from the entropy alone (the ablation).
    RecguideAdaptiveEntropy,
    /// Adaptive block size only, one forward per block size (the reference's buckets).
    RecguideAdaptiveBuckets,
    /// Block diffusion at each --blocks and --thresholds (fast, not lossless).
    Diffusion,
}

/// A named decoding configuration.
#[derive(Debug, Clone, Serialize)]
pub struct BenchConfig {
    pub name: String,
    pub options: ConfigOptions,
    /// How the scheduler shares forwards between requests.
    pub batching: Batching,
}

/// The configurations of a sweep: `kinds` expanded over the fixed block sizes
/// `blocks` (LinearSS, RecGuide fixed) and, for RecGuide with branch rows, the row
/// `tables` (named with the table when it is not the default), and block diffusion
/// over the block sizes and its `thresholds`. `base` gives what every configuration
/// shares (token budget, risk threshold, sampling).
#[allow(clippy::too_many_lines)] // the table of bench configurations, one arm per name
pub fn configs(
    kinds: &[Config],
    blocks: &[usize],
    tables: &[RowTable],
    thresholds: &[f32],
    base: &DecodeOptions,
) -> Result<Vec<BenchConfig>> {
    let with = |preset: Preset| DecodeOptions {
        max_new_tokens: base.max_new_tokens,
        risk_threshold: base.risk_threshold,
        sampling: base.sampling,
        ..preset.options()
    };
    let packed = |name: String, options: DecodeOptions| BenchConfig {
        name,
        options: ConfigOptions::shipped(options),
        batching: Batching::Packed,
    };
    // A RecGuide configuration with branch rows, once per row table.
    let per_table = |name: &str, options: DecodeOptions, ablation: Ablation, batching| {
        let name = name.to_string();
        tables.iter().map(move |&row_table| BenchConfig {
            name: if row_table == RowTable::default() {
                name.clone()
            } else {
                format!("{name} {}", row_table.name())
            },
            options: ConfigOptions {
                decode: options.clone(),
                ablation: Ablation {
                    row_table,
                    ..ablation
                },
            },
            batching,
        })
    };
    let shipped = Ablation::SHIPPED;
    let paper = with(Preset::Paper);
    let mut out = Vec::new();
    for k in kinds {
        match k {
            Config::Ar => out.push(packed(
                "ar".into(),
                DecodeOptions {
                    mode: Mode::Ar,
                    ..paper.clone()
                },
            )),
            Config::Linear => {
                for &b in blocks {
                    out.push(packed(
                        format!("linear B={b}"),
                        DecodeOptions {
                            mode: Mode::Linear,
                            blocks: Blocks::Fixed(b),
                            ..paper.clone()
                        },
                    ));
                }
            }
            Config::Recguide => out.extend(per_table(
                "recguide",
                paper.clone(),
                shipped,
                Batching::Packed,
            )),
            Config::RecguideAllRows => out.extend(per_table(
                "recguide all-rows",
                paper.clone(),
                Ablation::EVERY_ROW,
                Batching::Packed,
            )),
            Config::RecguideThroughput => out.extend(per_table(
                "recguide throughput",
                with(Preset::Throughput),
                shipped,
                Batching::Packed,
            )),
            Config::RecguideBuckets => out.extend(per_table(
                "recguide buckets",
                paper.clone(),
                shipped,
                Batching::ByBlock,
            )),
            Config::RecguideLockstep => out.extend(per_table(
                "recguide lockstep",
                paper.clone(),
                shipped,
                Batching::Lockstep,
            )),
            Config::RecguideAdaptive => out.push(packed(
                "recguide adaptive-only".into(),
                DecodeOptions {
                    overlap: false,
                    ..paper.clone()
                },
            )),
            Config::RecguideAdaptiveEntropy => out.push(BenchConfig {
                name: "recguide adaptive entropy".into(),
                options: ConfigOptions {
                    decode: DecodeOptions {
                        overlap: false,
                        ..paper.clone()
                    },
                    ablation: Ablation {
                        outcome_signal: false,
                        ..shipped
                    },
                },
                batching: Batching::Packed,
            }),
            Config::RecguideAdaptiveBuckets => out.push(BenchConfig {
                name: "recguide adaptive buckets".into(),
                options: ConfigOptions::shipped(DecodeOptions {
                    overlap: false,
                    ..paper.clone()
                }),
                batching: Batching::ByBlock,
            }),
            Config::Diffusion => {
                for &b in blocks {
                    for &tau in thresholds {
                        out.push(packed(
                            format!("diffusion L={b} τ={tau}"),
                            DecodeOptions {
                                mode: Mode::Diffusion,
                                blocks: Blocks::Fixed(b),
                                threshold: tau,
                                ..paper.clone()
                            },
                        ));
                    }
                }
            }
            Config::RecguideFixed => {
                for &b in blocks {
                    out.extend(per_table(
                        &format!("recguide overlap B={b}"),
                        DecodeOptions {
                            blocks: Blocks::Fixed(b),
                            ..paper.clone()
                        },
                        shipped,
                        Batching::Packed,
                    ));
                }
            }
        }
    }
    for c in &out {
        c.options
            .validate()
            .map_err(|e| anyhow!("configuration {}: {e}", c.name))?;
    }
    Ok(out)
}

/// Results of one configuration at one concurrency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchResult {
    /// The configuration's name (`linear B=32`): a label; what it ran is `options`.
    pub config: String,
    /// What the configuration decodes with: `plot` reads the mode and block size here.
    pub options: ConfigOptions,
    /// How its requests shared forwards.
    pub batching: Batching,
    pub concurrency: usize,
    pub requests: usize,
    /// Every request's rounds, forwards and tokens added up (decode forwards counted
    /// per request: a forward shared by many counts for each).
    pub tally: Tally,
    /// Physical forwards (one shared by many requests counts once).
    pub physical_forwards: usize,
    /// The decode forwards priced by the cost profile (`--cost-profile`): modeled, not
    /// measured; on a GPU profile, the time they would take there.
    #[serde(default)]
    pub modeled_secs: f64,
    /// All new tokens / modeled time.
    #[serde(default)]
    pub modeled_tokens_per_sec: f64,
    pub wall_secs: f64,
    pub tpf: f64,
    pub mean_accept: f64,
    /// All new tokens / wall time.
    pub tokens_per_sec: f64,
    /// Mean over requests of new tokens / that request's time.
    pub tokens_per_sec_per_request: f64,
    pub accept_hist_by_family: BTreeMap<String, Vec<usize>>,
    /// Tokens/s of each timed pass (`--repeats`), in pass order.
    pub pass_tokens_per_sec: Vec<f64>,
    /// Same tokens as AR for every prompt (when AR ran in the sweep).
    pub identical_to_ar: Option<bool>,
    /// Answer-level figures (`bench` fills them from the decoded text): prompts with a
    /// checkable answer, and of those the right ones; answers that ended at eos.
    #[serde(default)]
    pub answers_checked: usize,
    #[serde(default)]
    pub answers_right: usize,
    #[serde(default)]
    pub ended_at_eos: usize,
    /// Block diffusion: the mean answer position of the first token AR would not have
    /// emitted, over the answers that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence_mean: Option<f64>,
}

/// Runs every prompt with `concurrency` requests in flight; returns results and outputs.
pub fn run_config(
    model: &SharedBackbone,
    prompts: &[BenchPrompt],
    cfg: &BenchConfig,
    concurrency: usize,
    tables: &SurvivalTables,
    pricing: &Pricing,
) -> Result<(BenchResult, Vec<Vec<u32>>)> {
    let mut sched = Scheduler::new(model.clone(), None)
        .with_tables(tables.clone())
        .with_pricing(pricing.clone())
        .with_batching(cfg.batching)
        .with_ablation(cfg.options.ablation);
    let mut outputs = vec![Vec::new(); prompts.len()];
    let mut ids: Vec<u64> = Vec::new();
    let mut r = BenchResult::empty(cfg, concurrency, prompts.len());
    let mut per_req_tps = 0f64;
    let mut divergences = Vec::new();
    let start = Instant::now();
    let mut next = 0;
    while next < prompts.len() || sched.active() > 0 {
        while sched.active() < concurrency.max(1) && next < prompts.len() {
            let p = &prompts[next];
            let s = Submit {
                prompt: p.tokens.clone(),
                options: cfg.options.decode.clone(),
                family: Some(p.family.clone()),
            };
            ids.push(sched.submit(s, &mut NullSink)?);
            next += 1;
        }
        sched.step(&mut NullSink)?;
        for f in sched.take_finished() {
            let k = ids.iter().position(|&id| id == f.id).unwrap_or(0);
            r.tally += &f.stats.tally;
            per_req_tps += f.stats.tokens_per_sec();
            divergences.extend(f.stats.first_divergence);
            r.ended_at_eos += usize::from(f.stop == crate::engine::StopReason::Eos);
            add_hist(
                r.accept_hist_by_family
                    .entry(prompts[k].family.clone())
                    .or_default(),
                &f.stats.tally.accept_hist,
            );
            outputs[k] = f.tokens;
        }
    }
    r.wall_secs = start.elapsed().as_secs_f64();
    let c = sched.counts();
    r.physical_forwards = c.draft + c.verify + c.fused + c.denoise + c.refresh;
    r.first_divergence_mean = (!divergences.is_empty())
        .then(|| divergences.iter().sum::<usize>() as f64 / divergences.len() as f64);
    r.modeled_secs = c.modeled_ms / 1e3;
    r.modeled_tokens_per_sec = ratio(r.tally.new_tokens as f64, r.modeled_secs);
    r.tpf = r.tally.tpf();
    r.mean_accept = r.tally.mean_accept();
    r.tokens_per_sec = ratio(r.tally.new_tokens as f64, r.wall_secs);
    r.tokens_per_sec_per_request = ratio(per_req_tps, prompts.len() as f64);
    r.pass_tokens_per_sec = vec![r.tokens_per_sec];
    Ok((r, outputs))
}

/// The configuration of a sweep's table named `name` (blocks 4 to 32; the default
/// row table; τ = 0.9), for tests that make results by hand.
#[cfg(test)]
pub(crate) fn named_config(name: &str) -> BenchConfig {
    use clap::ValueEnum;
    let all = configs(
        Config::value_variants(),
        &[4, 8, 16, 32],
        &[RowTable::default()],
        &[0.9],
        &DecodeOptions::default(),
    )
    .unwrap();
    all.into_iter().find(|c| c.name == name).unwrap()
}

impl BenchResult {
    /// Nothing run yet.
    pub fn empty(config: &BenchConfig, concurrency: usize, requests: usize) -> Self {
        Self {
            config: config.name.clone(),
            options: config.options.clone(),
            batching: config.batching,
            concurrency,
            requests,
            tally: Tally::default(),
            physical_forwards: 0,
            modeled_secs: 0.0,
            modeled_tokens_per_sec: 0.0,
            wall_secs: 0.0,
            tpf: 0.0,
            mean_accept: 0.0,
            tokens_per_sec: 0.0,
            tokens_per_sec_per_request: 0.0,
            answers_checked: 0,
            answers_right: 0,
            ended_at_eos: 0,
            first_divergence_mean: None,
            accept_hist_by_family: BTreeMap::new(),
            pass_tokens_per_sec: Vec::new(),
            identical_to_ar: None,
        }
    }

    /// The configuration this result's name denotes, rebuilt from the name with the
    /// result's own block size, row table, threshold and shared options: `None` for a
    /// name no sweep makes. Equal options and batching mean the name tells the truth.
    pub fn named_config(&self) -> Option<BenchConfig> {
        use clap::ValueEnum;
        let blocks: Vec<usize> = match self.options.blocks {
            Blocks::Fixed(b) => vec![b],
            Blocks::Adaptive(_) => Vec::new(),
        };
        configs(
            Config::value_variants(),
            &blocks,
            &[self.options.ablation.row_table],
            &[self.options.threshold],
            &self.options,
        )
        .ok()?
        .into_iter()
        .find(|c| c.name == self.config)
    }

    /// The fixed block size of a LinearSS or fixed-B RecGuide configuration.
    pub fn fixed_block(&self) -> Option<usize> {
        match (self.options.mode, &self.options.blocks) {
            (Mode::Linear | Mode::Recguide, Blocks::Fixed(b)) => Some(*b),
            _ => None,
        }
    }

    /// The fixed block size of a LinearSS configuration.
    pub fn linear_block(&self) -> Option<usize> {
        self.fixed_block()
            .filter(|_| self.options.mode == Mode::Linear)
    }

    /// The canvas length of a block diffusion configuration.
    pub fn diffusion_canvas(&self) -> Option<usize> {
        match (self.options.mode, &self.options.blocks) {
            (Mode::Diffusion, Blocks::Fixed(b)) => Some(*b),
            _ => None,
        }
    }

    /// The paper preset as `bench --configs recguide` runs it (packed forwards).
    pub fn is_paper_recguide(&self) -> bool {
        self.options.preset() == Some(Preset::Paper) && self.batching == Batching::Packed
    }

    /// Adds another timed run of the same configuration (a repeat): times add up, the
    /// rates are recomputed over all runs; the counts are the first run's (decoding is
    /// deterministic, and `run` checks the outputs agree).
    pub fn add_repeat(&mut self, other: &BenchResult, runs_before: usize) {
        let n = runs_before as f64;
        self.wall_secs += other.wall_secs;
        self.tokens_per_sec = ratio((n + 1.0) * self.tally.new_tokens as f64, self.wall_secs);
        self.tokens_per_sec_per_request =
            (self.tokens_per_sec_per_request * n + other.tokens_per_sec_per_request) / (n + 1.0);
        self.pass_tokens_per_sec
            .extend_from_slice(&other.pass_tokens_per_sec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_typed_and_named() {
        let kinds: Vec<Config> = ["ar", "linear", "recguide", "recguide-throughput"]
            .iter()
            .map(|k| <Config as clap::ValueEnum>::from_str(k, false).unwrap())
            .collect();
        let base = DecodeOptions::default();
        let cfgs = configs(&kinds, &[8, 16], &[RowTable::default()], &[0.9], &base).unwrap();
        let names: Vec<&str> = cfgs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ar",
                "linear B=8",
                "linear B=16",
                "recguide",
                "recguide throughput"
            ]
        );
        assert_eq!(cfgs[3].options.preset(), Some(Preset::Paper));
        assert_eq!(cfgs[4].options.preset(), Some(Preset::Throughput));
        let err = configs(
            &[Config::Linear],
            &[0],
            &[RowTable::default()],
            &[0.9],
            &base,
        )
        .unwrap_err();
        assert!(err.to_string().contains("linear B=0"), "{err}");
    }
}
