//! Acceptance behaviour of a model on held-out prompts: answer quality under AR greedy,
//! LinearSS acceptance per family, and whether RecGuide's signals can find rejections.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::prompts::BenchPrompt;
use crate::engine::events::{count_in, round_records};
use crate::engine::SharedBackbone;
use crate::engine::{generate_ar, Blocks, DecodeOptions, Mode, Scheduler, Submit, VecSink};
use crate::model::TextTokenizer;

/// AR greedy answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ArReport {
    pub prompts: usize,
    pub mean_answer_tokens: f64,
    pub mean_answer_tokens_by_family: BTreeMap<String, f64>,
    /// Answers that end with EOS within the budget.
    pub ended_with_eos: usize,
    /// Math prompts whose last "Answer: N" line is right.
    pub math_exact: usize,
    pub math_total: usize,
    /// Answer quality per family and per `family/task`.
    pub quality: BTreeMap<String, Quality>,
}

/// How well answers follow their prompts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Quality {
    pub prompts: usize,
    /// Prompts with strings a faithful answer contains (`expect`).
    pub with_expect: usize,
    /// Of those, answers containing every one (the prompt's names, numbers, list…).
    pub faithful: usize,
    /// Prompts with a known answer.
    pub with_answer: usize,
    /// Of those, answers that are right.
    pub right: usize,
}

impl Quality {
    fn add(&mut self, faithful: Option<bool>, right: Option<bool>) {
        self.prompts += 1;
        if let Some(f) = faithful {
            self.with_expect += 1;
            self.faithful += f as usize;
        }
        if let Some(r) = right {
            self.with_answer += 1;
            self.right += r as usize;
        }
    }
}

/// Whether an answer is right: the `Answer:` line for math and arithmetic, else the
/// expected string anywhere in the text.
pub fn answer_right(p: &BenchPrompt, text: &str) -> Option<bool> {
    let want = p.answer.as_ref()?;
    let by_line = p.family == "math" || p.task.as_deref() == Some("arithmetic");
    Some(if by_line {
        final_answer(text).as_ref() == Some(want)
    } else {
        text.contains(want.as_str())
    })
}

/// Whether an answer contains every string of the prompt's `expect`.
pub fn answer_faithful(p: &BenchPrompt, text: &str) -> Option<bool> {
    (!p.expect.is_empty()).then(|| p.expect.iter().all(|x| text.contains(x.as_str())))
}

/// LinearSS rounds at one block size.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BlockReport {
    pub block: usize,
    pub rounds: usize,
    /// Mean tokens advanced per round (accepted drafts + bonus).
    pub mean_accept: f64,
    /// Rounds that accepted every draft.
    pub full_block_rate: f64,
    /// Rounds whose first rejection is at block positions 1..=7.
    pub fail_within_7: f64,
    /// At the first rejection, the verifier's token is the draft's second choice.
    pub second_choice_right: f64,
    /// At the first rejection, the draft margin is below the risk threshold.
    pub low_margin_at_reject: f64,
    /// First rejections whose drafted token is misplaced (`RoundRecord::misplaced`).
    pub misplaced_at_reject: f64,
    /// The margin-below-threshold share among the misplaced first rejections, and
    /// among the others.
    pub low_margin_misplaced: f64,
    pub low_margin_in_place: f64,
    /// Of positions flagged risky, the share that are the first rejection.
    pub risky_precision: f64,
    /// The draft's reliability: judged positions by the draft's top probability.
    pub reliability: Vec<ConfidenceBand>,
    /// Expected calibration error over ten equal-width bins: the mean gap between
    /// the draft's top probability and how often its top choice was right.
    pub calibration_error: f64,
    /// Histogram of tokens advanced per round, per family.
    pub hist_by_family: BTreeMap<String, Vec<usize>>,
    pub mean_accept_by_family: BTreeMap<String, f64>,
}

/// Draft positions the verifier judged whose top probability lies in `[from, to)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfidenceBand {
    pub from: f32,
    pub to: f32,
    pub positions: usize,
    pub mean_confidence: f64,
    /// Share where the draft's top choice was the verifier's token.
    pub right: f64,
    /// Share of all first rejections that were positions of this band.
    pub of_rejections: f64,
}

/// Band edges of the reliability table: a top probability of 0.75 is about where a
/// margin of 0.5 starts (p1 − p2 ≥ 2 p1 − 1), so the bands from 0.75 on hold the
/// first rejections the margin rule does not flag.
const BANDS: [f32; 6] = [0.0, 0.5, 0.75, 0.9, 0.99, 1.0];

/// The reliability table and the expected calibration error of `(confidence, right)`
/// pairs, in order, with whether each was a round's first rejection.
pub fn reliability(judged: &[(f32, bool, bool)]) -> (Vec<ConfidenceBand>, f64) {
    let rejections = judged.iter().filter(|j| j.2).count().max(1) as f64;
    let in_band = |c: f32, from: f32, to: f32| c >= from && (c < to || to >= 1.0);
    let bands = BANDS
        .windows(2)
        .map(|w| {
            let (from, to) = (w[0], w[1]);
            let band: Vec<_> = judged.iter().filter(|j| in_band(j.0, from, to)).collect();
            let n = band.len().max(1) as f64;
            ConfidenceBand {
                from,
                to,
                positions: band.len(),
                mean_confidence: band.iter().map(|j| f64::from(j.0)).sum::<f64>() / n,
                right: band.iter().filter(|j| j.1).count() as f64 / n,
                of_rejections: band.iter().filter(|j| j.2).count() as f64 / rejections,
            }
        })
        .collect();
    let mut bins = [(0.0f64, 0usize); 10];
    for &(c, right, _) in judged {
        let b = &mut bins[((c * 10.0) as usize).min(9)];
        *b = (b.0 + f64::from(c), b.1 + usize::from(right));
    }
    let total = judged.len().max(1) as f64;
    let ece = bins
        .iter()
        .map(|&(conf, right)| (conf - right as f64).abs() / total)
        .sum();
    (bands, ece)
}

/// Everything `specscope eval` reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AcceptanceReport {
    pub ar: ArReport,
    pub blocks: Vec<BlockReport>,
    /// LinearSS emitted AR's tokens for every prompt and block size.
    pub lossless: bool,
}

/// The value on the last `Answer:` line of a text.
pub fn final_answer(text: &str) -> Option<String> {
    text.lines().rev().find_map(|l| {
        l.trim()
            .strip_prefix("Answer:")
            .map(|a| a.trim().to_string())
    })
}

/// Runs AR and LinearSS at each block size on every prompt (one request at a time).
#[allow(clippy::too_many_lines)] // one pass over the held-out set's rounds, every statistic folded in place
pub fn evaluate(
    model: &SharedBackbone,
    tok: &TextTokenizer,
    prompts: &[BenchPrompt],
    blocks: &[usize],
    max_new_tokens: usize,
    risk_threshold: f32,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<AcceptanceReport> {
    let eos = model.config().eos_token_ids();
    let mut rep = AcceptanceReport {
        lossless: true,
        ..Default::default()
    };
    let mut ar_out = Vec::new();
    let mut total_len = 0;
    let mut len_by_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, p) in prompts.iter().enumerate() {
        let total = prompts.len() * (1 + blocks.len());
        progress(i, total, "AR");
        let g = generate_ar(model.as_ref(), &p.tokens, max_new_tokens, &eos, |_| Ok(()))?;
        total_len += g.tokens.len();
        let fam = len_by_family.entry(p.family.clone()).or_default();
        fam.0 += g.tokens.len();
        fam.1 += 1;
        if g.tokens.last().is_some_and(|t| eos.contains(t)) {
            rep.ar.ended_with_eos += 1;
        }
        let text = tok.decode(&g.tokens)?;
        let (faithful, right) = (answer_faithful(p, &text), answer_right(p, &text));
        if p.family == "math" {
            rep.ar.math_total += 1;
            rep.ar.math_exact += usize::from(right == Some(true));
        }
        let q = &mut rep.ar.quality;
        q.entry(p.family.clone()).or_default().add(faithful, right);
        if let Some(task) = &p.task {
            q.entry(format!("{}/{task}", p.family))
                .or_default()
                .add(faithful, right);
        }
        ar_out.push(g.tokens);
    }
    rep.ar.prompts = prompts.len();
    rep.ar.mean_answer_tokens = total_len as f64 / prompts.len().max(1) as f64;
    rep.ar.mean_answer_tokens_by_family = len_by_family
        .into_iter()
        .map(|(f, (len, n))| (f, len as f64 / n as f64))
        .collect();

    for &b in blocks {
        let mut br = BlockReport {
            block: b,
            ..Default::default()
        };
        let (mut advanced, mut full, mut within7, mut rejects, mut second, mut low) =
            (0, 0, 0, 0, 0, 0);
        let (mut risky, mut risky_hit) = (0, 0);
        // (first rejections, with a margin below the threshold), misplaced or not.
        let mut by_place = [(0, 0); 2];
        let mut judged = Vec::new();
        let mut per_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (i, p) in prompts.iter().enumerate() {
            let k = blocks.iter().position(|x| *x == b).unwrap_or(0) + 1;
            progress(
                k * prompts.len() + i,
                prompts.len() * (1 + blocks.len()),
                &format!("LinearSS B={b}"),
            );
            let mut sched = Scheduler::new(model.clone(), None);
            let mut sink = VecSink {
                detail: true,
                ..VecSink::default()
            };
            let o = DecodeOptions {
                mode: Mode::Linear,
                blocks: Blocks::Fixed(b),
                max_new_tokens,
                risk_threshold,
                ..DecodeOptions::default()
            };
            sched.submit(
                Submit {
                    prompt: p.tokens.clone(),
                    options: o,
                    family: Some(p.family.clone()),
                },
                &mut sink,
            )?;
            sched.run_to_completion(&mut sink)?;
            let f = sched.take_finished().remove(0);
            rep.lossless &= f.tokens == ar_out[i];
            let hist = br.hist_by_family.entry(p.family.clone()).or_default();
            let fam = per_family.entry(p.family.clone()).or_default();
            for r in round_records(&sink.events) {
                let a = r.advance;
                br.rounds += 1;
                advanced += a;
                fam.0 += a;
                fam.1 += 1;
                count_in(hist, a);
                risky += r.risky.len();
                let last = r.judged.len();
                judged.extend(
                    r.judged.iter().enumerate().map(|(i, &(c, right))| {
                        (c, right, r.first_reject.is_some() && i + 1 == last)
                    }),
                );
                match r.first_reject {
                    None if r.ended => {}
                    None => full += 1,
                    Some(q) => {
                        rejects += 1;
                        within7 += usize::from(q <= 7);
                        second += usize::from(r.second_choice_right == Some(true));
                        let is_low = r.margin_at_reject.is_some_and(|m| m < risk_threshold);
                        low += usize::from(is_low);
                        let place = &mut by_place[usize::from(r.misplaced == Some(true))];
                        place.0 += 1;
                        place.1 += usize::from(is_low);
                        risky_hit += usize::from(r.risky.contains(&q));
                    }
                }
            }
        }
        let r = br.rounds.max(1) as f64;
        br.mean_accept = advanced as f64 / r;
        br.full_block_rate = full as f64 / r;
        br.fail_within_7 = within7 as f64 / r;
        br.second_choice_right = second as f64 / rejects.max(1) as f64;
        br.low_margin_at_reject = low as f64 / rejects.max(1) as f64;
        let share = |a: usize, n: usize| a as f64 / n.max(1) as f64;
        br.misplaced_at_reject = share(by_place[1].0, rejects);
        br.low_margin_misplaced = share(by_place[1].1, by_place[1].0);
        br.low_margin_in_place = share(by_place[0].1, by_place[0].0);
        br.risky_precision = risky_hit as f64 / risky.max(1) as f64;
        (br.reliability, br.calibration_error) = reliability(&judged);
        br.mean_accept_by_family = per_family
            .into_iter()
            .map(|(k, (a, n))| (k, a as f64 / n.max(1) as f64))
            .collect();
        rep.blocks.push(br);
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_answer_reads_the_last_answer_line() {
        assert_eq!(
            final_answer("Step 1: 2 + 2 = 4.\nAnswer: 4"),
            Some("4".into())
        );
        assert_eq!(
            final_answer("Answer: 3\nmore\nAnswer:  12 "),
            Some("12".into())
        );
        assert_eq!(final_answer("no answer"), None);
    }

    #[test]
    fn reliability_bands_count_rights_and_rejections() {
        // Two confident rights, one confident miss (a first rejection), one unsure miss.
        let judged = [
            (0.995, true, false),
            (1.0, true, false),
            (0.95, false, true),
            (0.3, false, true),
        ];
        let (bands, ece) = reliability(&judged);
        assert_eq!(bands.len(), 5);
        let top = &bands[4];
        assert_eq!(
            (top.positions, top.right),
            (2, 1.0),
            "1.0 falls in the last band"
        );
        assert_eq!((bands[3].positions, bands[3].right), (1, 0.0));
        assert_eq!(bands[3].of_rejections, 0.5);
        assert_eq!(bands[0].of_rejections, 0.5);
        assert_eq!(bands[1].positions, 0);
        // Bin 9: conf 2.945 over 3, right 2: |2.945 − 2| / 4; bin 3: 0.3 / 4.
        assert!((ece - (0.945 + 0.3) / 4.0).abs() < 1e-6, "{ece}");
    }
}
