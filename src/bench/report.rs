//! The bench's text tables: speed-ups per load, each configuration's block-size
//! shares, the loads that ran prompts again, and the spread of timed passes.

use super::sweep::BenchResult;
use crate::engine::events::ratio;
use crate::engine::Mode;

/// The loads that ran the prompts more than once (`bench --requests-per-slot`), and how
/// many requests each ran; empty when every load ran each prompt once.
pub fn repeated_prompts(results: &[BenchResult], prompts: usize, per_slot: usize) -> String {
    let mut loads: Vec<(usize, usize)> = results
        .iter()
        .filter(|r| r.requests > prompts)
        .map(|r| (r.concurrency, r.requests))
        .collect();
    loads.sort_unstable();
    loads.dedup();
    if loads.is_empty() {
        return String::new();
    }
    let loads: Vec<String> = loads
        .iter()
        .map(|(c, n)| {
            let p = prompts.max(1);
            match n % p {
                0 => format!("C = {c}: {n} ({} each)", n / p),
                r => format!("C = {c}: {n} ({} each, the first {r} once more)", n / p),
            }
        })
        .collect();
    format!(
        "requests: the {prompts} prompts, run again, in order, to hold each load (--requests-per-slot {per_slot}): {}\n",
        loads.join(", ")
    )
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
            .filter(|r| r.linear_block().is_some())
            .max_by(|a, b| a.tokens_per_sec.total_cmp(&b.tokens_per_sec))
        else {
            continue;
        };
        for r in at.iter().filter(|r| r.linear_block().is_none()) {
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

/// The summary table: per concurrency, physical forwards (`fwds`: decode forwards run,
/// however many requests shared each), speed-ups versus AR and versus the best fixed
/// LinearSS (by tokens/s) at that concurrency.
pub fn table(results: &[BenchResult]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<24} {:>3} {:>6} {:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6} {:>6} {:>10} {:>8} {:>6} {:>7} {:>5}\n",
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
        "=AR",
        "mod tok/s",
        "mod xAR",
        "agree",
        "right",
        "eos"
    ));
    let mut cs: Vec<usize> = results.iter().map(|r| r.concurrency).collect();
    cs.sort_unstable();
    cs.dedup();
    for c in cs {
        let at: Vec<&BenchResult> = results.iter().filter(|r| r.concurrency == c).collect();
        let ar = at.iter().find(|r| r.options.mode == Mode::Ar);
        let ar_modeled = ar.map(|r| r.modeled_tokens_per_sec);
        let ar = ar.map(|r| r.tokens_per_sec);
        let best_lin = at
            .iter()
            .filter(|r| r.linear_block().is_some())
            .map(|r| r.tokens_per_sec)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        let l32 = at
            .iter()
            .find(|r| r.linear_block() == Some(32))
            .map(|r| r.tpf);
        for r in at {
            let hits: (usize, usize) = r
                .tally
                .branches
                .values()
                .fold((0, 0), |(b, h), c| (b + c.built, h + c.hits));
            let fmt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
            s.push_str(&format!(
                "{:<24} {:>3} {:>6.2} {:>6.2} {:>6} {:>9.1} {:>9.1} {:>7} {:>9} {:>9} {:>6} {:>6} {:>10.1} {:>8} {:>6} {:>7} {:>5}\n",
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
                },
                r.modeled_tokens_per_sec,
                fmt(ar_modeled.map(|a| r.modeled_tokens_per_sec / a)),
                if r.tally.ar_judged > 0 {
                    format!("{:.1}%", 100.0 * r.tally.ar_agreement())
                } else {
                    "-".into()
                },
                if r.answers_checked > 0 {
                    format!("{}/{}", r.answers_right, r.answers_checked)
                } else {
                    "-".into()
                },
                r.ended_at_eos
            ));
        }
    }
    s
}

/// The block-size share per concurrency (the paper's table 4 shape): for every
/// configuration whose rounds ran more than one block size, the share of its rounds
/// at each size. Empty when no configuration chose sizes.
pub fn share_table(results: &[BenchResult]) -> String {
    let adaptive: Vec<&BenchResult> = results
        .iter()
        .filter(|r| r.tally.blocks.len() > 1)
        .collect();
    let mut sizes: Vec<usize> = adaptive
        .iter()
        .flat_map(|r| r.tally.blocks.keys().copied())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return String::new();
    }
    let mut s = format!("block-size share of rounds:\n{:<24} {:>3}", "config", "C");
    for b in &sizes {
        s.push_str(&format!(" {:>7}", format!("B={b}")));
    }
    s.push('\n');
    for r in adaptive {
        let total: usize = r.tally.blocks.values().sum();
        s.push_str(&format!("{:<24} {:>3}", r.config, r.concurrency));
        for b in &sizes {
            let n = r.tally.blocks.get(b).copied().unwrap_or(0);
            s.push_str(&format!(" {:>6.1}%", 100.0 * ratio(n as f64, total as f64)));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::named_config;

    #[test]
    fn share_table_lists_adaptive_configurations_only() {
        let mut a = BenchResult::empty(&named_config("recguide"), 4, 1);
        a.tally.blocks.insert(8, 1);
        a.tally.blocks.insert(32, 3);
        let mut f = BenchResult::empty(&named_config("linear B=8"), 4, 1);
        f.tally.blocks.insert(8, 9);
        let s = share_table(&[f.clone(), a]);
        assert!(
            s.contains("recguide                   4   25.0%   75.0%"),
            "{s}"
        );
        assert!(!s.contains("linear"), "{s}");
        assert_eq!(share_table(&[f]), "");
    }

    fn result(config: &str, passes: &[f64]) -> BenchResult {
        BenchResult {
            tokens_per_sec: passes.iter().sum::<f64>() / passes.len() as f64,
            pass_tokens_per_sec: passes.to_vec(),
            ..BenchResult::empty(&named_config(config), 1, 1)
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
