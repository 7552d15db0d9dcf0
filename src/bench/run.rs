//! A bench run: every configuration at every load, side by side. Passes are
//! interleaved, the configurations' order reversed every other pass, so a slow spell of
//! the machine is spread over all of them; every pass must decode the first one's
//! tokens, a repeated prompt its original's, and each configuration is compared with
//! AR's output.

use anyhow::{ensure, Context, Result};

use super::acceptance::answer_right;
use super::prompts::{fresh_requests_at, requests_at, BenchPrompt};
use super::sweep::{run_config, BenchConfig, BenchResult};
use crate::engine::cost::Pricing;
use crate::engine::policy::SurvivalTables;
use crate::engine::{Mode, SharedBackbone};
use crate::model::TextTokenizer;

/// What every configuration of a run shares.
pub struct Bench<'a> {
    pub model: &'a SharedBackbone,
    /// Decodes the answers for the checks `eval` makes (a math answer line, an expected
    /// string).
    pub tokenizer: &'a TextTokenizer,
    pub prompts: &'a [BenchPrompt],
    /// A simulated backbone: every request a fresh stand-in answer (the prompts again
    /// with a pass marker), whose text nothing checks.
    pub simulated: bool,
    pub tables: &'a SurvivalTables,
    pub pricing: &'a Pricing,
    /// Requests per slot at each load (`--requests-per-slot`).
    pub requests_per_slot: usize,
    /// Passes over every configuration (`--repeats`), at least 1.
    pub repeats: usize,
}

impl Bench<'_> {
    /// Every configuration at every concurrency in `loads`, in that order; `progress`
    /// hears of each run before it starts (runs done so far, what runs).
    pub fn run(
        &self,
        cfgs: &[BenchConfig],
        loads: &[usize],
        mut progress: impl FnMut(usize, &str),
    ) -> Result<Vec<BenchResult>> {
        ensure!(
            loads.iter().all(|&c| c > 0),
            "--concurrency values must be at least 1"
        );
        let mut results = Vec::new();
        let mut done = 0;
        for &c in loads {
            let at = if self.simulated {
                fresh_requests_at
            } else {
                requests_at
            };
            let requests = at(self.prompts, c, self.requests_per_slot)?;
            // Per configuration: its result and outputs from the first pass.
            let mut at_c: Vec<Option<(BenchResult, Vec<Vec<u32>>)>> = vec![None; cfgs.len()];
            for pass in 0..self.repeats.max(1) {
                let order: Vec<usize> = if pass % 2 == 0 {
                    (0..cfgs.len()).collect()
                } else {
                    (0..cfgs.len()).rev().collect()
                };
                for k in order {
                    let cfg = &cfgs[k];
                    progress(done, &format!("{} C={c}", cfg.name));
                    let (r, out) =
                        run_config(self.model, &requests, cfg, c, self.tables, self.pricing)
                            .with_context(|| format!("{} at C={c}", cfg.name))?;
                    if !self.simulated {
                        same_as_originals(&out, self.prompts.len(), cfg, c)?;
                    }
                    match &mut at_c[k] {
                        None => at_c[k] = Some((r, out)),
                        Some((first, first_out)) => {
                            ensure!(
                                *first_out == out,
                                "{} at C={c}: pass {} decoded different tokens than pass 1",
                                cfg.name,
                                pass + 1
                            );
                            first.add_repeat(&r, pass);
                        }
                    }
                    done += 1;
                }
            }
            for r in self.judged(cfgs, &requests, at_c)? {
                results.push(r);
            }
        }
        Ok(results)
    }

    /// One load's results: each compared with AR's output, its answers checked.
    fn judged(
        &self,
        cfgs: &[BenchConfig],
        requests: &[BenchPrompt],
        at_c: Vec<Option<(BenchResult, Vec<Vec<u32>>)>>,
    ) -> Result<Vec<BenchResult>> {
        let ar_out = cfgs
            .iter()
            .zip(&at_c)
            .find(|(cfg, _)| cfg.options.mode == Mode::Ar)
            .and_then(|(_, r)| r.as_ref().map(|(_, out)| out.clone()));
        let mut results = Vec::new();
        for (mut r, out) in at_c.into_iter().flatten() {
            r.identical_to_ar = ar_out.as_ref().map(|want| *want == out);
            // A simulated answer is stand-in text: nothing to check.
            if !self.simulated {
                for (p, tokens) in requests.iter().zip(&out) {
                    let text = self.tokenizer.decode(tokens)?;
                    if let Some(right) = answer_right(p, &text) {
                        r.answers_checked += 1;
                        r.answers_right += usize::from(right);
                    }
                }
            }
            results.push(r);
        }
        Ok(results)
    }
}

/// A repeated prompt (`--requests-per-slot`) is the same request again: greedy, it
/// decodes its original's tokens whatever the load, or the figures would count
/// something else.
fn same_as_originals(out: &[Vec<u32>], prompts: usize, cfg: &BenchConfig, c: usize) -> Result<()> {
    if cfg.options.sampling.temperature > 0.0 {
        return Ok(());
    }
    if let Some(i) = (prompts..out.len()).find(|&i| out[i] != out[i % prompts]) {
        anyhow::bail!(
            "{} at C={c}: request {} (prompt {} again) decoded other tokens than its first run",
            cfg.name,
            i + 1,
            i % prompts + 1
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::bench::sweep::{configs, Config};
    use crate::engine::cost::CostModel;
    use crate::engine::options::DecodeOptions;
    use crate::engine::overlap::RowTable;
    use crate::model::{self, ModelSource};
    use crate::sim::SimBackbone;

    /// The simulated backbone with the bundled model's tokenizer, and a few prompts.
    fn sim() -> (SharedBackbone, TextTokenizer, Vec<BenchPrompt>) {
        let files = ModelSource::Bundled.resolve().unwrap();
        let cfg = model::load_config(&files).unwrap();
        let tok = model::load_tokenizer(&files, &cfg).unwrap();
        let backbone: SharedBackbone =
            Arc::new(SimBackbone::new("nld-8b", cfg, tok.clone()).unwrap());
        let prompts = (0..3)
            .map(|i| BenchPrompt {
                family: ["math", "code", "qa"][i].into(),
                task: None,
                tokens: tok.encode_raw(&format!("question {i}")).unwrap(),
                answer: None,
                expect: Vec::new(),
            })
            .collect();
        (backbone, tok, prompts)
    }

    /// The configurations `kinds` (fixed blocks B = 8, the default row table) with
    /// answers of up to `max_new` tokens.
    fn at_b8(kinds: &[Config], max_new: usize) -> Vec<BenchConfig> {
        let base = DecodeOptions {
            max_new_tokens: max_new,
            ..DecodeOptions::default()
        };
        configs(kinds, &[8], &[RowTable::default()], &[], &base).unwrap()
    }

    /// Two passes of AR, LinearSS and RecGuide at two loads on the simulator: one
    /// result per configuration and load in order, every one AR's tokens, each with both
    /// passes' spread, and nothing checked against stand-in text.
    #[test]
    fn a_run_gives_each_configuration_at_each_load_compared_with_ar() {
        let (backbone, tok, prompts) = sim();
        let cfgs = at_b8(&[Config::Ar, Config::Linear, Config::Recguide], 24);
        let tables = crate::sim::survival_tables();
        let pricing = Pricing::fixed(CostModel::builtin());
        let bench = Bench {
            model: &backbone,
            tokenizer: &tok,
            prompts: &prompts,
            simulated: true,
            tables: &tables,
            pricing: &pricing,
            requests_per_slot: 1,
            repeats: 2,
        };
        let mut heard = Vec::new();
        let results = bench
            .run(&cfgs, &[1, 2], |done, what| {
                heard.push((done, what.to_string()))
            })
            .unwrap();
        assert_eq!(heard.len(), 2 * 2 * cfgs.len(), "{heard:?}");
        // The second pass runs the configurations in reverse.
        assert_eq!(
            heard[cfgs.len()].1,
            format!("{} C=1", cfgs[cfgs.len() - 1].name)
        );
        let got: Vec<(String, usize)> = results
            .iter()
            .map(|r| (r.config.clone(), r.concurrency))
            .collect();
        let want: Vec<(String, usize)> = [1, 2]
            .iter()
            .flat_map(|&c| cfgs.iter().map(move |cfg| (cfg.name.clone(), c)))
            .collect();
        assert_eq!(got, want);
        for r in &results {
            assert_eq!(r.identical_to_ar, Some(true), "{}", r.config);
            assert_eq!(r.pass_tokens_per_sec.len(), 2, "{}", r.config);
            assert_eq!(r.answers_checked, 0, "{}", r.config);
        }
        assert!(bench.run(&cfgs, &[0], |_, _| {}).is_err());
    }

    /// A configuration's ablation reaches the scheduler: `recguide all-rows` builds every
    /// row its table asks for, where the CPU's prices let few ride in `recguide`.
    #[test]
    fn a_configurations_ablation_reaches_the_scheduler() {
        let (backbone, _, prompts) = sim();
        let cfgs = at_b8(&[Config::Recguide, Config::RecguideAllRows], 48);
        let tables = crate::sim::survival_tables();
        let pricing = Pricing::fixed(CostModel::builtin());
        let built = |cfg: &BenchConfig| {
            let (r, _) = run_config(&backbone, &prompts, cfg, 1, &tables, &pricing).unwrap();
            r.tally.branches.values().map(|b| b.built).sum::<usize>()
        };
        let (priced, every) = (built(&cfgs[0]), built(&cfgs[1]));
        assert!(every > priced, "all rows {every}, priced {priced}");
    }
}
