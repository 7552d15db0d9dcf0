//! `specscope run`: decode one prompt headless, in any mode.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use specscope::files;

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

#[allow(clippy::too_many_lines)] // one request and its text and JSON reports
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
        return Ok(());
    }
    let per_forward =
        |x: usize| specscope::engine::events::ratio(x as f64, t.decode_forwards() as f64);
    let stats = files::RunStats {
        prompt_len: st.prompt_tokens,
        new_tokens: t.new_tokens,
        decode_tokens: t.decode_tokens,
        rounds: t.rounds,
        forwards: files::RunForwards {
            draft: t.draft_forwards,
            verify: t.verify_forwards,
            fused: t.fused_forwards,
            denoise: t.denoise_forwards,
            refresh: t.refresh_forwards,
            decode_total: t.decode_forwards(),
            saved_drafts: t.saved_drafts,
        },
        diffusion: (t.refresh_forwards > 0).then(|| files::DiffusionAgreement {
            ar_agreement: t.ar_agreement(),
            ar_agree: t.ar_agree,
            ar_judged: t.ar_judged,
            first_divergence: st.first_divergence,
        }),
        rows_per_forward: per_forward(t.rows),
        query_tokens_per_forward: per_forward(t.query_tokens),
        tpf: t.tpf(),
        mean_acceptance: t.mean_accept(),
        acceptance_histogram: t.accept_hist.clone(),
        blocks: t.blocks.clone(),
        branches: overlap.then(|| files::BranchCounts(t.branches.clone())),
        branch_hit_rate: overlap.then(|| t.hit_rate()),
        prefill_secs: st.prefill_secs,
        decode_secs: st.decode_secs,
        tokens_per_sec: st.tokens_per_sec(),
    };
    let out = files::RunDoc {
        format: files::Format::new("run", files::RUN_VERSION),
        model: loaded.files.label.clone(),
        acceptance: loaded.acceptance().to_string(),
        commit: loaded.files.commit.clone(),
        options,
        label,
        block_policy: policy,
        prompt_tokens: prompt,
        tokens: f.tokens.clone(),
        text: f.text.clone(),
        stop: f.stop,
        stats,
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
