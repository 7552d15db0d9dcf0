//! `specscope run`: decode one prompt headless, in any mode.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use specscope::engine::overlap::RowTable;
use specscope::engine::signals::Sampling;
use specscope::engine::{DecodeEvent, DecodeOptions, EventSink, Mode, Scheduler, Submit};

use super::{ModelArgs, PromptArgs};

/// Decoding flags shared by `run` and `bench`.
#[derive(Debug, Clone, Args)]
pub struct DecodeArgs {
    /// ar, linear (LinearSS) or recguide.
    #[arg(long, value_enum, default_value = "recguide")]
    pub mode: Mode,
    /// Block size B for linear, and for recguide with --no-adaptive (1 = AR).
    #[arg(long, default_value_t = 32)]
    pub block: usize,
    /// RecGuide without overlap branches.
    #[arg(long)]
    pub no_overlap: bool,
    /// RecGuide with a fixed block size (--block).
    #[arg(long)]
    pub no_adaptive: bool,
    /// Block sizes the adaptive policy chooses from (1 = an AR step; the reference's
    /// set is 8,16,32).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16,32")]
    pub adaptive_blocks: Vec<usize>,
    /// Add branch rows even where the cost profile says they do not pay.
    #[arg(long)]
    pub no_cost_aware: bool,
    /// Margin below which a draft position is risky.
    #[arg(long, default_value_t = 0.5)]
    pub risk_threshold: f32,
    /// Branch row table (reference §2.4).
    #[arg(long, value_enum, default_value = "conditional-rank")]
    pub row_table: RowTable,
    /// Sampling temperature (0 = greedy, lossless).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
}

impl DecodeArgs {
    pub fn options(&self) -> Result<DecodeOptions> {
        let o = DecodeOptions {
            mode: self.mode,
            block: if self.mode == Mode::Ar { 1 } else { self.block },
            overlap: !self.no_overlap,
            adaptive: !self.no_adaptive,
            adaptive_blocks: self.adaptive_blocks.clone(),
            cost_aware: !self.no_cost_aware,
            risk_threshold: self.risk_threshold,
            row_table: self.row_table,
            sampling: Sampling {
                temperature: self.temperature,
                seed: self.seed,
            },
            max_new_tokens: self.max_new_tokens,
        };
        o.validate()?;
        Ok(o)
    }
}

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
    let loaded = args.model.load()?;
    let prompt = args.prompt.encode(&loaded.tokenizer)?;
    let mut sched = Scheduler::new(loaded.model.clone(), Some(loaded.tokenizer.clone()));
    let policy = options.block_policy();
    let submit = Submit {
        prompt: prompt.clone(),
        options,
        family: None,
    };
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
            return Err(e.into());
        }
        sched.take_finished()
    };
    let f = finished
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the request did not finish"))?;
    let st = &f.stats;
    if !args.json {
        println!();
        eprintln!(
            "specscope: {} tokens ({:?}), {} rounds, {} decode forwards (draft {}, verify {}, fused {}), TPF {:.2}, mean acceptance {:.2}, branch hits {:.0}%, {:.1} tokens/s",
            st.new_tokens,
            f.stop,
            st.rounds,
            st.decode_forwards(),
            st.draft_forwards,
            st.verify_forwards,
            st.fused_forwards,
            st.tpf(),
            st.mean_accept(),
            100.0 * st.hit_rate(),
            st.tokens_per_sec()
        );
        return Ok(());
    }
    let out = json!({
        "model": loaded.files.label,
        "commit": loaded.files.commit,
        "mode": args.decode.mode,
        "block_policy": policy,
        "prompt_tokens": prompt,
        "tokens": f.tokens,
        "text": f.text,
        "stop": f.stop,
        "stats": {
            "prompt_len": st.prompt_tokens,
            "new_tokens": st.new_tokens,
            "decode_tokens": st.decode_tokens,
            "rounds": st.rounds,
            "forwards": {
                "draft": st.draft_forwards,
                "verify": st.verify_forwards,
                "fused": st.fused_forwards,
                "decode_total": st.decode_forwards(),
                "saved_drafts": st.saved_drafts,
            },
            "rows_per_forward": if st.decode_forwards() > 0 { st.rows as f64 / st.decode_forwards() as f64 } else { 0.0 },
            "query_tokens_per_forward": if st.decode_forwards() > 0 { st.query_tokens as f64 / st.decode_forwards() as f64 } else { 0.0 },
            "tpf": st.tpf(),
            "mean_acceptance": st.mean_accept(),
            "acceptance_histogram": st.accept_hist,
            "blocks": st.blocks,
            "branches": st.branches,
            "branch_hit_rate": st.hit_rate(),
            "prefill_secs": st.prefill_secs,
            "decode_secs": st.decode_secs,
            "tokens_per_sec": st.tokens_per_sec(),
        }
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
