//! `specscope run`: decode one prompt headless, in any mode.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use specscope::files;

use specscope::engine::ablation::ConfigOptions;
use specscope::engine::{DecodeEvent, EventSink, Submit};

use super::decode::DecodeArgs;
use super::{ModelArgs, PromptArgs};

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// Print one JSON object (text, token ids, stats) instead of streaming text.
    #[arg(long)]
    pub json: bool,
}

/// Streams committed text to stdout.
struct StreamSink<W: Write> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: Write> EventSink for StreamSink<W> {
    fn emit(&mut self, e: DecodeEvent) {
        if let DecodeEvent::Committed { text, .. } = e {
            if let Err(err) = self
                .out
                .write_all(text.as_bytes())
                .and_then(|_| self.out.flush())
            {
                self.error.get_or_insert(err);
            }
        }
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    let options = args.decode.options()?;
    let pricing = args.decode.cost.pricing()?;
    let loaded = args.model.load()?;
    let prompt = args.prompt.encode(&loaded.tokenizer)?;
    let mut sched = loaded.scheduler(&pricing);
    let label = options.label();
    let policy = options.block_policy();
    let overlap = options.overlap_on();
    let submit = Submit {
        prompt: prompt.clone(),
        options: options.clone(),
        family: None,
    };
    let reads = specscope::engine::signals::HostReads::now();
    let finished = if args.json {
        let mut sink = specscope::engine::NullSink;
        sched.submit(submit, &mut sink)?;
        sched.run_to_completion(&mut sink)?;
        sched.take_finished()
    } else {
        let mut sink = StreamSink {
            out: std::io::stdout().lock(),
            error: None,
        };
        sched.submit(submit, &mut sink)?;
        sched.run_to_completion(&mut sink)?;
        if let Some(e) = sink.error {
            anyhow::bail!("cannot write to standard output: {e}");
        }
        sched.take_finished()
    };
    let f = finished
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the request did not finish"))?;
    let st = &f.stats;
    let t = &st.tally;
    let reads = specscope::engine::signals::HostReads::since(reads);
    if !args.json {
        return report_text(&loaded, &label, &f, overlap);
    }
    let out = files::RunDoc {
        format: files::Format::new("run", files::RUN_VERSION),
        model: loaded.files.label.clone(),
        acceptance: loaded.acceptance().to_string(),
        commit: loaded.files.commit.clone(),
        options: ConfigOptions::shipped(options),
        label,
        block_policy: policy,
        prompt_tokens: prompt,
        tokens: f.tokens.clone(),
        text: f.text.clone(),
        stop: f.stop,
        stats: files::RunStats::of(st, overlap),
        host_reads: files::HostReadsDoc {
            path: specscope::engine::signals::path(&loaded.device).to_string(),
            bytes: reads.bytes,
            positions: reads.positions,
            bytes_per_position: reads.per_position(),
            bytes_per_round: specscope::engine::events::ratio(reads.bytes as f64, t.rounds as f64),
        },
        signals_kernel: specscope::model::kernels::describe(),
    };
    outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// The run's figures on standard error, after the streamed text.
fn report_text(
    loaded: &super::Loaded,
    label: &str,
    f: &specscope::engine::Finished,
    overlap: bool,
) -> Result<()> {
    let st = &f.stats;
    let t = &st.tally;
    outln!();
    if loaded.simulated() {
        eprintln!(
            "specscope: {}: the text is a stand-in; every figure below is {}",
            loaded.files.label,
            specscope::sim::LABEL
        );
    }
    let branches = if overlap {
        format!(", branch hits {:.0}%", 100.0 * t.hit_rate())
    } else {
        String::new()
    };
    if t.refresh_forwards > 0 {
        eprintln!(
            "specscope: {label}: {} tokens ({}), {} blocks, {} decode forwards (denoise {}, cache writes {}), TPF {:.2}, agreement with AR {:.0}%{}, {:.1} tokens/s (not lossless)",
            t.new_tokens,
            f.stop.describe(),
            t.rounds,
            t.decode_forwards(),
            t.denoise_forwards,
            t.refresh_forwards,
            t.tpf(),
            100.0 * t.ar_agreement(),
            st.first_divergence
                .map_or(String::new(), |k| format!(" (first difference at token {k})")),
            st.tokens_per_sec()
        );
        return Ok(());
    }
    eprintln!(
        "specscope: {label}: {} tokens ({}), {} rounds, {} decode forwards (draft {}, verify {}, fused {}), TPF {:.2}, mean acceptance {:.2}{branches}, {:.1} tokens/s",
        t.new_tokens,
        f.stop.describe(),
        t.rounds,
        t.decode_forwards(),
        t.draft_forwards,
        t.verify_forwards,
        t.fused_forwards,
        t.tpf(),
        t.mean_accept(),
        st.tokens_per_sec()
    );
    Ok(())
}
