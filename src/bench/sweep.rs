//! Modes × block sizes × concurrency levels over one prompt set, in one process.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;

use super::prompts::BenchPrompt;
use crate::engine::adaptive::{SurvivalTables, REFERENCE_BLOCKS};
use crate::engine::cost::CostModel;
use crate::engine::events::BranchCount;
use crate::engine::overlap::RowTable;
use crate::engine::{Batching, DecodeOptions, Mode, NullSink, Scheduler, Submit};
use crate::model::Model;

/// A named decoding configuration.
#[derive(Debug, Clone, Serialize)]
pub struct BenchConfig {
    pub name: String,
    pub options: DecodeOptions,
    /// How the scheduler shares forwards between requests.
    pub batching: Batching,
}

/// Expands mode names into configurations. Modes: `ar`, `linear` (one per block size),
/// `recguide` (adaptive + overlap, cost-aware), `recguide-buckets` (the same with the
/// reference's one-forward-per-block-size buckets), `recguide-nocost` (adaptive +
/// overlap, every branch row), `recguide-fixed` (overlap at each fixed block size,
/// every branch row), `recguide-adaptive` (adaptive block size only),
/// `recguide-reference` (as `recguide`, with the reference's action space {8, 16, 32}
/// instead of `adaptive_blocks`, by default {1, 4, 8, 16, 32}). Each RecGuide
/// configuration with branch rows runs once per row table in `tables` (named with the
/// table when it is not the default).
pub fn configs(
    modes: &[String],
    blocks: &[usize],
    tables: &[RowTable],
    adaptive_blocks: &[usize],
    max_new_tokens: usize,
) -> Result<Vec<BenchConfig>> {
    let base = DecodeOptions {
        max_new_tokens,
        adaptive_blocks: adaptive_blocks.to_vec(),
        ..DecodeOptions::default()
    };
    base.validate()?;
    let packed = |name: String, options: DecodeOptions| BenchConfig {
        name,
        options,
        batching: Batching::Packed,
    };
    let per_table = |name: &str, options: DecodeOptions, batching: Batching| {
        let name = name.to_string();
        tables.iter().map(move |&row_table| BenchConfig {
            name: if row_table == RowTable::default() {
                name.clone()
            } else {
                format!("{name} {}", row_table.name())
            },
            options: DecodeOptions {
                row_table,
                ..options.clone()
            },
            batching,
        })
    };
    let mut out = Vec::new();
    for m in modes {
        match m.as_str() {
            "ar" => out.push(packed(
                "ar".into(),
                DecodeOptions { mode: Mode::Ar, block: 1, ..base.clone() },
            )),
            "linear" => {
                for &b in blocks {
                    if b == 0 {
                        bail!("block size must be at least 1 (got 0)");
                    }
                    out.push(packed(
                        format!("linear B={b}"),
                        DecodeOptions { mode: Mode::Linear, block: b, ..base.clone() },
                    ));
                }
            }
            "recguide" => out.extend(per_table("recguide", base.clone(), Batching::Packed)),
            "recguide-reference" => out.extend(per_table(
                "recguide reference-B",
                DecodeOptions { adaptive_blocks: REFERENCE_BLOCKS.to_vec(), ..base.clone() },
                Batching::Packed,
            )),
            "recguide-buckets" => {
                out.extend(per_table("recguide buckets", base.clone(), Batching::ByBlock))
            }
            "recguide-nocost" => out.extend(per_table(
                "recguide no-cost",
                DecodeOptions { cost_aware: false, ..base.clone() },
                Batching::Packed,
            )),
            "recguide-adaptive" => out.push(packed(
                "recguide adaptive-only".into(),
                DecodeOptions { overlap: false, ..base.clone() },
            )),
            "recguide-fixed" => {
                for &b in blocks {
                    out.extend(per_table(
                        &format!("recguide overlap B={b}"),
                        DecodeOptions { adaptive: false, cost_aware: false, block: b, ..base.clone() },
                        Batching::Packed,
                    ));
                }
            }
            other => bail!(
                "unknown mode '{other}' (expected ar, linear, recguide, recguide-buckets, recguide-nocost, recguide-fixed, recguide-adaptive, recguide-reference)"
            ),
        }
    }
    Ok(out)
}

/// Results of one configuration at one concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub config: String,
    pub concurrency: usize,
    pub requests: usize,
    pub new_tokens: usize,
    pub decode_tokens: usize,
    /// Σ over requests of the decode forwards each took part in.
    pub decode_forwards: usize,
    /// Physical forwards (one shared by many requests counts once).
    pub physical_forwards: usize,
    pub wall_secs: f64,
    pub tpf: f64,
    pub mean_accept: f64,
    /// All new tokens / wall time.
    pub tokens_per_sec: f64,
    /// Mean over requests of new tokens / that request's time.
    pub tokens_per_sec_per_request: f64,
    pub accept_hist_by_family: BTreeMap<String, Vec<usize>>,
    pub branches: BTreeMap<String, BranchCount>,
    pub saved_drafts: usize,
    pub blocks: BTreeMap<String, usize>,
    /// Tokens/s of each timed pass (`--repeats`), in pass order.
    pub pass_tokens_per_sec: Vec<f64>,
    /// Same tokens as AR for every prompt (when AR ran in the sweep).
    pub identical_to_ar: Option<bool>,
}

/// Runs every prompt with `concurrency` requests in flight; returns results and outputs.
pub fn run_config(
    model: &Model,
    prompts: &[BenchPrompt],
    cfg: &BenchConfig,
    concurrency: usize,
    tables: &SurvivalTables,
    cost: &CostModel,
) -> Result<(BenchResult, Vec<Vec<u32>>)> {
    let mut sched = Scheduler::new(model.clone(), None)
        .with_tables(tables.clone())
        .with_cost(cost.clone())
        .with_batching(cfg.batching);
    let mut outputs = vec![Vec::new(); prompts.len()];
    let mut ids: Vec<u64> = Vec::new();
    let mut r = BenchResult::empty(&cfg.name, concurrency, prompts.len());
    let (mut rounds, mut advanced, mut per_req_tps) = (0usize, 0usize, 0f64);
    let start = Instant::now();
    let mut next = 0;
    while next < prompts.len() || sched.active() > 0 {
        while sched.active() < concurrency.max(1) && next < prompts.len() {
            let p = &prompts[next];
            let s = Submit {
                prompt: p.tokens.clone(),
                options: cfg.options.clone(),
                family: Some(p.family.clone()),
            };
            ids.push(sched.submit(s, &mut NullSink)?);
            next += 1;
        }
        sched.step(&mut NullSink)?;
        for f in sched.take_finished() {
            let k = ids.iter().position(|&id| id == f.id).unwrap_or(0);
            let st = &f.stats;
            r.new_tokens += st.new_tokens;
            r.decode_tokens += st.decode_tokens;
            r.decode_forwards += st.decode_forwards();
            r.saved_drafts += st.saved_drafts;
            rounds += st.rounds;
            advanced += st
                .accept_hist
                .iter()
                .enumerate()
                .map(|(a, n)| a * n)
                .sum::<usize>();
            per_req_tps += st.tokens_per_sec();
            let hist = r
                .accept_hist_by_family
                .entry(prompts[k].family.clone())
                .or_default();
            if hist.len() < st.accept_hist.len() {
                hist.resize(st.accept_hist.len(), 0);
            }
            for (a, n) in st.accept_hist.iter().enumerate() {
                hist[a] += n;
            }
            for (kind, c) in &st.branches {
                let e = r.branches.entry(kind.clone()).or_default();
                e.built += c.built;
                e.hits += c.hits;
            }
            for (b, n) in &st.blocks {
                *r.blocks.entry(b.clone()).or_default() += n;
            }
            outputs[k] = f.tokens;
        }
    }
    r.wall_secs = start.elapsed().as_secs_f64();
    let c = sched.counts();
    r.physical_forwards = c.draft + c.verify + c.fused;
    r.tpf = ratio(r.decode_tokens as f64, r.decode_forwards as f64);
    r.mean_accept = ratio(advanced as f64, rounds as f64);
    r.tokens_per_sec = ratio(r.new_tokens as f64, r.wall_secs);
    r.tokens_per_sec_per_request = ratio(per_req_tps, prompts.len() as f64);
    r.pass_tokens_per_sec = vec![r.tokens_per_sec];
    Ok((r, outputs))
}

impl BenchResult {
    /// Nothing run yet.
    pub fn empty(config: &str, concurrency: usize, requests: usize) -> Self {
        Self {
            config: config.to_string(),
            concurrency,
            requests,
            new_tokens: 0,
            decode_tokens: 0,
            decode_forwards: 0,
            physical_forwards: 0,
            wall_secs: 0.0,
            tpf: 0.0,
            mean_accept: 0.0,
            tokens_per_sec: 0.0,
            tokens_per_sec_per_request: 0.0,
            accept_hist_by_family: BTreeMap::new(),
            branches: BTreeMap::new(),
            saved_drafts: 0,
            blocks: BTreeMap::new(),
            pass_tokens_per_sec: Vec::new(),
            identical_to_ar: None,
        }
    }

    /// Adds another timed run of the same configuration (a repeat): times add up, the
    /// rates are recomputed over all runs; the counts are the first run's (decoding is
    /// deterministic, and `run` checks the outputs agree).
    pub fn add_repeat(&mut self, other: &BenchResult, runs_before: usize) {
        let n = runs_before as f64;
        self.wall_secs += other.wall_secs;
        self.tokens_per_sec = ratio((n + 1.0) * self.new_tokens as f64, self.wall_secs);
        self.tokens_per_sec_per_request =
            (self.tokens_per_sec_per_request * n + other.tokens_per_sec_per_request) / (n + 1.0);
        self.pass_tokens_per_sec
            .extend_from_slice(&other.pass_tokens_per_sec);
    }
}

/// How much one pass tells: per concurrency, each configuration that is not LinearSS
/// against the best LinearSS (by all passes' tokens/s), pass by pass (min / median /
/// max of the per-pass ratios). Empty with fewer than two passes.
pub fn pass_spread(results: &[BenchResult]) -> String {
    let mut s = String::new();
    let mut cs: Vec<usize> = results.iter().map(|r| r.concurrency).collect();
    cs.sort_unstable();
    cs.dedup();
    for c in cs {
        let at: Vec<&BenchResult> = results.iter().filter(|r| r.concurrency == c).collect();
        let Some(best) = at
            .iter()
            .filter(|r| r.config.starts_with("linear"))
            .max_by(|a, b| a.tokens_per_sec.total_cmp(&b.tokens_per_sec))
        else {
            continue;
        };
        for r in at.iter().filter(|r| !r.config.starts_with("linear")) {
            let mut per_pass: Vec<f64> = r
                .pass_tokens_per_sec
                .iter()
                .zip(&best.pass_tokens_per_sec)
                .map(|(x, b)| ratio(*x, *b))
                .collect();
            if per_pass.len() < 2 {
                continue;
            }
            if s.is_empty() {
                s.push_str("per pass, x best LinearSS (min / median / max):\n");
            }
            per_pass.sort_by(f64::total_cmp);
            let n = per_pass.len();
            let median = (per_pass[(n - 1) / 2] + per_pass[n / 2]) / 2.0;
            s.push_str(&format!(
                "  {:<24} C={c:<3} {:.2} / {:.2} / {:.2}  ({n} passes, against {})\n",
                r.config,
                per_pass[0],
                median,
                per_pass[n - 1],
                best.config
            ));
        }
    }
    s
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The summary table: per concurrency, physical forwards (`fwds`: decode forwards run,
/// however many requests shared each), speed-ups versus AR and versus the best fixed
/// LinearSS (by tokens/s) at that concurrency.
pub fn table(results: &[BenchResult]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<24} {:>3} {:>6} {:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6} {:>6}\n",
        "config",
        "C",
        "TPF",
        "acc",
        "fwds",
        "tok/s",
        "tok/s/req",
        "xAR",
        "xLinBest",
        "TPFxL32",
        "hits",
        "=AR"
    ));
    let mut cs: Vec<usize> = results.iter().map(|r| r.concurrency).collect();
    cs.sort_unstable();
    cs.dedup();
    for c in cs {
        let at: Vec<&BenchResult> = results.iter().filter(|r| r.concurrency == c).collect();
        let ar = at
            .iter()
            .find(|r| r.config == "ar")
            .map(|r| r.tokens_per_sec);
        let best_lin = at
            .iter()
            .filter(|r| r.config.starts_with("linear"))
            .map(|r| r.tokens_per_sec)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        let l32 = at.iter().find(|r| r.config == "linear B=32").map(|r| r.tpf);
        for r in at {
            let hits: (usize, usize) = r
                .branches
                .values()
                .fold((0, 0), |(b, h), c| (b + c.built, h + c.hits));
            let fmt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
            s.push_str(&format!(
                "{:<24} {:>3} {:>6.2} {:>6.2} {:>6} {:>9.1} {:>9.1} {:>7} {:>9} {:>9} {:>6} {:>6}\n",
                r.config,
                c,
                r.tpf,
                r.mean_accept,
                r.physical_forwards,
                r.tokens_per_sec,
                r.tokens_per_sec_per_request,
                fmt(ar.map(|a| r.tokens_per_sec / a)),
                fmt(best_lin.map(|b| r.tokens_per_sec / b)),
                fmt(l32.map(|t| r.tpf / t)),
                if hits.0 > 0 {
                    format!("{:.0}%", 100.0 * hits.1 as f64 / hits.0 as f64)
                } else {
                    "-".into()
                },
                match r.identical_to_ar {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                }
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_space_reaches_recguide_but_not_the_reference() {
        let modes = ["ar", "recguide", "recguide-reference"].map(String::from);
        let cfgs = configs(&modes, &[8], &[RowTable::default()], &[1, 4], 64).unwrap();
        let blocks: Vec<(&str, &[usize])> = cfgs
            .iter()
            .map(|c| (c.name.as_str(), c.options.adaptive_blocks.as_slice()))
            .collect();
        assert_eq!(
            blocks,
            [
                ("ar", &[1, 4][..]),
                ("recguide", &[1, 4][..]),
                ("recguide reference-B", &REFERENCE_BLOCKS[..]),
            ]
        );
        let err = configs(&modes, &[8], &[RowTable::default()], &[], 64).unwrap_err();
        assert!(err.to_string().contains("adaptive block sizes"), "{err}");
    }

    fn result(config: &str, passes: &[f64]) -> BenchResult {
        BenchResult {
            tokens_per_sec: passes.iter().sum::<f64>() / passes.len() as f64,
            pass_tokens_per_sec: passes.to_vec(),
            ..BenchResult::empty(config, 1, 1)
        }
    }

    #[test]
    fn pass_spread_pairs_each_pass_with_the_best_linear_one() {
        let mut first = result("recguide", &[90.0]);
        first.add_repeat(&result("recguide", &[110.0]), 1);
        first.add_repeat(&result("recguide", &[100.0]), 2);
        assert_eq!(first.pass_tokens_per_sec, [90.0, 110.0, 100.0]);
        let results = [
            result("linear B=8", &[50.0, 50.0, 50.0]),
            // The best LinearSS overall, though not in every pass.
            result("linear B=4", &[100.0, 100.0, 80.0]),
            first,
        ];
        let s = pass_spread(&results);
        assert!(
            s.contains(
                "recguide                 C=1   0.90 / 1.10 / 1.25  (3 passes, against linear B=4)"
            ),
            "{s}"
        );
        assert!(!s.contains("linear B=8 "), "{s}");
        // An even number of passes: the median is between the middle two.
        let two = [
            result("linear B=4", &[100.0, 100.0]),
            result("ar", &[90.0, 110.0]),
        ];
        assert!(pass_spread(&two).contains("0.90 / 1.00 / 1.10  (2 passes"));
        // One pass: nothing to spread.
        assert_eq!(
            pass_spread(&[result("linear B=4", &[1.0]), result("ar", &[1.0])]),
            ""
        );
    }
}
