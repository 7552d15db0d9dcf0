//! `specscope eval`: the model card's figures (answer quality and acceptance behaviour).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use specscope::bench::acceptance::evaluate;
use specscope::files;

use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: super::PromptFileArgs,
    /// LinearSS block sizes to measure (2 to 256).
    #[arg(long, value_delimiter = ',', default_value = "8,32", value_parser = super::count(2, 256))]
    pub blocks: Vec<usize>,
    /// Tokens to decode per prompt.
    #[arg(long, default_value_t = 256, value_parser = super::count(1, super::MAX_NEW_TOKENS))]
    pub max_new_tokens: usize,
    /// Margin below which a draft position is risky (the low-margin figure uses it).
    #[arg(long, default_value_t = specscope::engine::options::DEFAULT_RISK_THRESHOLD, allow_negative_numbers = true)]
    pub risk_threshold: f32,
    /// Also write the report as JSON (an existing file only with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Replace the output file(s) if they exist (without it an existing file is kept
    /// and the command refuses).
    #[arg(long)]
    pub force: bool,
}

#[allow(clippy::too_many_lines)] // the eval report's sections in print order
pub fn run(a: EvalArgs) -> Result<()> {
    let families = ["math", "code", "qa", "first"];
    let records = a.prompts.records_or(&families)?;
    let loaded = a.model.load()?;
    if let Some(out) = &a.json {
        let mut inputs = a.prompts.files_or(&families);
        inputs.extend(loaded.files.inputs());
        specscope::output::claim(out, "--json", a.force, &inputs)?;
    }
    let prompts = a.prompts.encode(&records, &loaded)?;
    let mut progress = super::progress::Progress::new("eval", 1);
    let rep = evaluate(
        &loaded.model,
        &loaded.tokenizer,
        &prompts,
        &a.blocks,
        a.max_new_tokens,
        a.risk_threshold,
        |done, total, what| {
            progress.set_total(total as u64);
            progress.set(done as u64, what)
        },
    )?;
    progress.finish("done");
    let ar = &rep.ar;
    outln!("model: {}  prompts: {}", loaded.files.label, ar.prompts);
    outln!(
        "AR greedy: mean answer {:.1} tokens, {}/{} end with eos, math exact answers {}/{}",
        ar.mean_answer_tokens,
        ar.ended_with_eos,
        ar.prompts,
        ar.math_exact,
        ar.math_total
    );
    let by_family: Vec<String> = ar
        .mean_answer_tokens_by_family
        .iter()
        .map(|(f, m)| format!("{f} {m:.1}"))
        .collect();
    outln!("   mean answer tokens by family: {}", by_family.join(", "));
    let pct = |a: usize, n: usize| 100.0 * a as f64 / n.max(1) as f64;
    outln!("answer quality (AR greedy): faithful = contains the prompt's names, numbers, list or words; right = the expected answer");
    for (key, q) in &ar.quality {
        let faithful = if q.with_expect > 0 {
            format!(
                "faithful {}/{} ({:.0}%)",
                q.faithful,
                q.with_expect,
                pct(q.faithful, q.with_expect)
            )
        } else {
            "faithful —".to_string()
        };
        let right = if q.with_answer > 0 {
            format!(
                "right {}/{} ({:.0}%)",
                q.right,
                q.with_answer,
                pct(q.right, q.with_answer)
            )
        } else {
            "right —".to_string()
        };
        let indent = if key.contains('/') { "     " } else { "   " };
        outln!("{indent}{key:<22} {faithful:<24} {right}");
    }
    outln!(
        "LinearSS output identical to AR: {}",
        if rep.lossless { "yes" } else { "NO" }
    );
    for b in &rep.blocks {
        outln!(
            "B={:<2} rounds {:>5}  mean acceptance {:.2}  full blocks {:.1}%  fail within 7 {:.1}%  2nd choice right at 1st reject {:.1}%  margin<{:.2} at 1st reject {:.1}%  risky precision {:.1}%",
            b.block,
            b.rounds,
            b.mean_accept,
            100.0 * b.full_block_rate,
            100.0 * b.fail_within_7,
            100.0 * b.second_choice_right,
            a.risk_threshold,
            100.0 * b.low_margin_at_reject,
            100.0 * b.risky_precision
        );
        outln!(
            "   1st rejections with the drafted token misplaced (a repeat of the one before, or due 1–2 places on): {:.1}%; margin<{:.2} at {:.1}% of those, {:.1}% of the rest",
            100.0 * b.misplaced_at_reject,
            a.risk_threshold,
            100.0 * b.low_margin_misplaced,
            100.0 * b.low_margin_in_place
        );
        outln!(
            "   draft reliability over the positions the verifier judged (calibration error {:.3}):",
            b.calibration_error
        );
        for band in &b.reliability {
            outln!(
                "     top probability {:.2}–{:.2}: {:>6} positions, mean {:.3}, top choice right {:>5.1}%, {:>5.1}% of 1st rejections",
                band.from,
                band.to,
                band.positions,
                band.mean_confidence,
                100.0 * band.right,
                100.0 * band.of_rejections
            );
        }
        for (fam, m) in &b.mean_accept_by_family {
            let hist = &b.hist_by_family[fam];
            outln!(
                "   {fam:<5} mean {m:.2}  histogram[a=1..]: {:?}",
                &hist[1.min(hist.len())..]
            );
        }
    }
    if let Some(p) = &a.json {
        let out = files::EvalDoc {
            format: files::Format::new("eval", files::EVAL_VERSION),
            report: rep,
        };
        specscope::output::write_whole(p, &serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}
