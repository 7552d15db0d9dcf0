//! `specscope check`: what a device must get right before its timings mean anything,
//! measured against f32 forwards on the CPU. Three checks, each printed as one line
//! and written to `--json`:
//!
//! - **kernel**: the fused signals kernel passes its self-check on the device (CUDA
//!   only; the CPU has no kernel to check).
//! - **agreement**: teacher-forced over CPU f32 AR answers, the share of positions
//!   where the device's causal argmax is the CPU's (top-1 agreement).
//! - **lossless**: every mode decodes exactly AR greedy's tokens on the device, alone
//!   and with several requests in flight.
//!
//! Exit status 1 when a check fails, so a script can stop on it.

use std::process::ExitCode;

use anyhow::{Context, Result};
use candle_core::{Device, D};
use clap::Args;

use specscope::bench::prompts::BenchPrompt;
use specscope::bench::sweep::{configs, run_config, Config};
use specscope::engine::cost::{Pricing, DEFAULT_PROFILE};
use specscope::engine::options::DecodeOptions;
use specscope::engine::overlap::RowTable;
use specscope::engine::policy::SurvivalTables;
use specscope::engine::signals;
use specscope::files;
use specscope::model::{self, kernels, AttnRule, LogitSel, Model, Row, RowBatch};

use super::{ModelArgs, PromptFileArgs};

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: PromptFileArgs,
    /// Tokens of each CPU AR answer that agreement is measured over, and the budget
    /// of each decode of the lossless check (1 to 4096).
    #[arg(long, default_value_t = 48, value_parser = super::count(1, 4096))]
    pub max_new_tokens: usize,
    /// Requests in flight for the lossless check (comma-separated, each 1 to 256).
    #[arg(long, value_delimiter = ',', default_value = "1,8", value_parser = super::count(1, 256))]
    pub concurrency: Vec<usize>,
    /// Top-1 agreement below this share fails the check (0 to 1). bf16 rounding moves
    /// the argmax where the top two logits are close, so 1.0 is too strict for bf16.
    #[arg(long, default_value_t = 0.95, value_parser = share)]
    pub min_agreement: f64,
    /// Also write the results as JSON to this file (an existing one only with --force).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Replace the output file(s) if they exist (without it an existing file is kept
    /// and the command refuses).
    #[arg(long)]
    pub force: bool,
}

/// A share in 0..=1.
fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("{s} is not a share between 0 and 1")),
    }
}

/// One check's outcome.
type Outcome = files::CheckOutcome;

/// `(agreeing positions, positions, first disagreement as "prompt k, token i")`.
fn agreement(
    device: &Model,
    cpu: &Model,
    prompts: &[BenchPrompt],
    answers: &[Vec<u32>],
) -> Result<(usize, usize, Option<String>)> {
    let (mut same, mut total, mut first) = (0, 0, None);
    for (k, (p, answer)) in prompts.iter().zip(answers).enumerate() {
        if answer.is_empty() {
            continue;
        }
        // Logits at the last prompt position and every answer position but the last
        // predict the answer's tokens.
        let mut ids = p.tokens.clone();
        ids.extend_from_slice(&answer[..answer.len() - 1]);
        let from = p.tokens.len() - 1;
        let top = |m: &Model| -> Result<Vec<u32>> {
            let mut cache = m.new_cache();
            let row = Row::new(0, ids.clone(), AttnRule::Causal).logits(LogitSel::All);
            let logits = m
                .forward(&RowBatch::single(row), &mut [&mut cache])?
                .remove(0);
            Ok(logits.argmax(D::Minus1)?.to_vec1::<u32>()?[from..].to_vec())
        };
        let (d, c) = (top(device)?, top(cpu)?);
        for (i, (a, b)) in d.iter().zip(&c).enumerate() {
            total += 1;
            if a == b {
                same += 1;
            } else if first.is_none() {
                first = Some(format!("prompt {k}, answer token {i}"));
            }
        }
    }
    Ok((same, total, first))
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let records = args.prompts.records()?;
    let loaded = args.model.load()?;
    if let Some(out) = &args.json {
        let mut inputs = args.prompts.files_or(&super::DEFAULT_FAMILIES);
        inputs.extend(loaded.files.inputs());
        specscope::output::claim(out, "--json", args.force, &inputs)?;
    }
    let (checkpoint, _) = loaded.checkpoint("check")?;
    let prompts = args.prompts.encode(&records, &loaded)?;
    let cpu_args = ModelArgs {
        device: model::DeviceChoice::Cpu,
        dtype: model::DtypeChoice::F32,
        ..args.model.clone()
    };
    let cpu = cpu_args.load().context("loading the f32 CPU reference")?;
    let on = format!(
        "{} in {:?} on {}",
        loaded.files.label,
        checkpoint.dtype(),
        loaded.device_name()
    );
    outln!(
        "check: {on} against f32 on the CPU, {} prompts",
        prompts.len()
    );
    let mut outcomes = Vec::new();

    // The fused kernel: one signals call on the device runs its self-check.
    if matches!(loaded.device, Device::Cpu) {
        outcomes.push(Outcome {
            name: "kernel".into(),
            passed: true,
            detail: "not used on the CPU (nothing to check)".into(),
        });
    } else {
        let v = loaded.model.config().vocab_size;
        let probe = candle_core::Tensor::randn(0f32, 3.0, (8, v), &loaded.device)?;
        signals::signals(&probe, model::synthetic::MASK_ID)?;
        outcomes.push(Outcome {
            name: "kernel".into(),
            passed: kernels::state() == kernels::KernelState::Passed,
            detail: kernels::describe(),
        });
    }

    // The CPU's AR answers, then the device's argmax along them.
    let none = SurvivalTables::builtin();
    // Fixed prices: the decisions, and so the forwards' shapes, do not depend on timing.
    let pricing = Pricing::select(Some(DEFAULT_PROFILE))?;
    let base = DecodeOptions {
        max_new_tokens: args.max_new_tokens,
        ..DecodeOptions::default()
    };
    let ar = configs(&[Config::Ar], &[32], &[RowTable::default()], &[], &base)?;
    let (_, answers) =
        run_config(&cpu.model, &prompts, &ar[0], 1, &none, &pricing).context("CPU AR answers")?;
    let (same, total, first) =
        agreement(checkpoint, cpu.checkpoint("check")?.0, &prompts, &answers)?;
    let share = same as f64 / total.max(1) as f64;
    outcomes.push(Outcome {
        name: "agreement".into(),
        passed: total > 0 && share >= args.min_agreement,
        detail: format!(
            "top-1 {same}/{total} = {share:.4} (at least {} required){}",
            args.min_agreement,
            first.map_or(String::new(), |f| format!("; first difference at {f}"))
        ),
    });

    // Every mode against AR on the device.
    let kinds = [Config::Ar, Config::Linear, Config::Recguide];
    let cfgs = configs(&kinds, &[8, 16, 32], &[RowTable::default()], &[], &base)?;
    for &c in &args.concurrency {
        let mut ar_out = None;
        let mut wrong = Vec::new();
        for cfg in &cfgs {
            let (_, out) = run_config(&loaded.model, &prompts, cfg, c, &none, &pricing)
                .with_context(|| format!("{} at C={c}", cfg.name))?;
            match &ar_out {
                None => ar_out = Some(out),
                Some(want) if *want != out => wrong.push(cfg.name.clone()),
                Some(_) => {}
            }
        }
        let same_as_cpu = ar_out.as_ref() == Some(&answers);
        outcomes.push(Outcome {
            name: "lossless".into(),
            passed: wrong.is_empty(),
            detail: format!(
                "C={c}: {} of {} modes emit AR's tokens{}; AR's answers {} the CPU's",
                cfgs.len() - 1 - wrong.len(),
                cfgs.len() - 1,
                if wrong.is_empty() {
                    String::new()
                } else {
                    format!(" (not: {})", wrong.join(", "))
                },
                if same_as_cpu { "equal" } else { "differ from" }
            ),
        });
    }
    for o in &outcomes {
        outln!(
            "{:<10} {}  {}",
            o.name,
            if o.passed { "ok    " } else { "FAILED" },
            o.detail
        );
    }
    let doc = files::CheckDoc {
        format: files::Format::new("check", files::CHECK_VERSION),
        model: loaded.files.label.clone(),
        device: loaded.device_name().to_string(),
        dtype: format!("{:?}", checkpoint.dtype()),
        prompts: prompts.len(),
        passed: outcomes.iter().all(|o| o.passed),
        checks: outcomes,
        provenance: Some(specscope::Provenance::here()),
    };
    if let Some(path) = &args.json {
        specscope::output::write_whole(path, &serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(if doc.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
