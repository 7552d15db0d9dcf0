//! `specscope eval`: the model card's figures (answer quality and acceptance behaviour).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use specscope::bench::acceptance::evaluate;

use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: super::PromptFileArgs,
    /// LinearSS block sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "8,32")]
    pub blocks: Vec<usize>,
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Also write the report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(a: EvalArgs) -> Result<()> {
    let records = a.prompts.records()?;
    let loaded = a.model.load()?;
    let prompts = a.prompts.encode(&records, &loaded.tokenizer)?;
    let rep = evaluate(
        &loaded.model,
        &loaded.tokenizer,
        &prompts,
        &a.blocks,
        a.max_new_tokens,
        |s| {
            eprint!("\r{s:<40}");
            let _ = std::io::stderr().flush();
        },
    )?;
    eprintln!();
    let ar = &rep.ar;
    println!("model: {}  prompts: {}", loaded.files.label, ar.prompts);
    println!(
        "AR greedy: mean answer {:.1} tokens, {}/{} end with eos, math exact answers {}/{}",
        ar.mean_answer_tokens, ar.ended_with_eos, ar.prompts, ar.math_exact, ar.math_total
    );
    let by_family: Vec<String> = ar
        .mean_answer_tokens_by_family
        .iter()
        .map(|(f, m)| format!("{f} {m:.1}"))
        .collect();
    println!("   mean answer tokens by family: {}", by_family.join(", "));
    println!(
        "LinearSS output identical to AR: {}",
        if rep.lossless { "yes" } else { "NO" }
    );
    for b in &rep.blocks {
        println!(
            "B={:<2} rounds {:>5}  mean acceptance {:.2}  full blocks {:.1}%  fail within 7 {:.1}%  2nd choice right at 1st reject {:.1}%  margin<0.5 at 1st reject {:.1}%  risky precision {:.1}%",
            b.block,
            b.rounds,
            b.mean_accept,
            100.0 * b.full_block_rate,
            100.0 * b.fail_within_7,
            100.0 * b.second_choice_right,
            100.0 * b.low_margin_at_reject,
            100.0 * b.risky_precision
        );
        for (fam, m) in &b.mean_accept_by_family {
            let hist = &b.hist_by_family[fam];
            println!(
                "   {fam:<5} mean {m:.2}  histogram[a=1..]: {:?}",
                &hist[1.min(hist.len())..]
            );
        }
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rep)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}
