//! `specscope sim check`: the simulated backbone's observation statistics beside the
//! published ones, each with its relative error (the test holds them within ±5%).

use std::process::ExitCode;

use anyhow::{ensure, Result};
use clap::{Args, Subcommand};

use specscope::sim::check::{statistics, DEFAULT_REQUESTS, TOLERANCE};

#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SimCommand {
    /// Print the simulator's acceptance statistics beside the published NLD-8B ones
    /// (decoding.md §3.3, §5), from a same-state shadow: every round drafts and
    /// verifies B = 4, 8, 16 and 32 from one prefix and advances with B = 16.
    Check(CheckArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The simulated backbone.
    #[arg(long, default_value = "sim:nld-8b")]
    pub model: String,
    /// Answers in the shadow (each a fresh one, run to its EOS).
    #[arg(long, default_value_t = DEFAULT_REQUESTS, value_parser = super::count(1, 100_000))]
    pub requests: usize,
    /// At most this many rounds of each answer (every answer then weighs alike, unlike
    /// the reference's pooled whole answers) [default: to each answer's end].
    #[arg(long, value_parser = super::count(1, 100_000))]
    pub rounds: Option<usize>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SimArgs) -> Result<ExitCode> {
    let SimCommand::Check(a) = args.command;
    ensure!(
        a.model.starts_with(specscope::sim::PREFIX),
        "--model {}: `sim check` checks a simulated backbone (sim:nld-8b)",
        a.model
    );
    let loaded = super::ModelArgs {
        model: Some(a.model.clone()),
        revision: None,
        device: Default::default(),
        no_lora: false,
        dtype: Default::default(),
    }
    .load()?;
    let stats = statistics(loaded.model.as_ref(), a.requests, a.rounds)?;
    let outside = stats.iter().filter(|s| !s.within(TOLERANCE)).count();
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": a.model,
                "acceptance": specscope::sim::LABEL,
                "requests": a.requests,
                "rounds": a.rounds,
                "tolerance": TOLERANCE,
                "statistics": stats,
            }))?
        );
    } else {
        let rounds = a.rounds.map_or("whole answers".to_string(), |r| {
            format!("up to {r} rounds each")
        });
        outln!(
            "{} ({}): {} answers, {rounds}, same-state shadow, canonical B = 16",
            a.model,
            specscope::sim::LABEL,
            a.requests,
        );
        outln!(
            "{:<50} {:>9} {:>9} {:>7}  source",
            "statistic",
            "simulated",
            "published",
            "error"
        );
        for s in &stats {
            outln!(
                "{:<50} {:>9.3} {:>9.3} {:>+6.1}%{} {}",
                s.name,
                s.simulated,
                s.published,
                100.0 * s.error(),
                if s.within(TOLERANCE) { " " } else { "!" },
                s.source
            );
        }
        outln!(
            "{} of {} within ±{:.0}% of the published figure{}",
            stats.len() - outside,
            stats.len(),
            100.0 * TOLERANCE,
            if outside > 0 {
                " (! marks the others)"
            } else {
                ""
            }
        );
    }
    Ok(if outside == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
