//! `specscope trace summary FILE` (statistics, headless) and `specscope trace record`
//! (a recording of prompt-file requests, made without a screen).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use specscope::bench::prompts::per_family;
use specscope::engine::{DecodeEvent, EventSink, Submit};
use specscope::model::TextTokenizer;
use specscope::trace::{read_trace, Recorder, SessionEvent, Summary, TokenTexts, TraceEvent};

use super::decode::DecodeArgs;
use super::{ModelArgs, PromptFileArgs};

#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum TraceCommand {
    /// Print a recording's statistics (TPF, acceptance per family, branches).
    Summary {
        file: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record requests from prompt files without the screen (how the demo was made).
    Record(Box<RecordArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: PromptFileArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// The recording to write.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: TraceArgs) -> Result<()> {
    match args.command {
        TraceCommand::Summary { file, json } => summary(file, json),
        TraceCommand::Record(a) => record(*a),
    }
}

fn summary(file: PathBuf, json: bool) -> Result<()> {
    let trace = read_trace(&file)?;
    for w in &trace.warnings {
        eprintln!("specscope: warning: {w}");
    }
    let s = Summary::of(trace.events.iter().map(|e| &e.event));
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        let h = &trace.header;
        outln!(
            "{}: {} on {}, {}, risk margin < {}",
            file.display(),
            h.model,
            h.device,
            h.options.label(),
            h.risk.threshold
        );
        out!("{}", s.report());
        if trace.recorded_summary().is_none() {
            outln!(
                "(no session_end line: the recording was cut off; statistics cover what it holds)"
            );
        }
    }
    Ok(())
}

/// Writes every event (with token texts first) to the recording.
struct RecordSink<'a> {
    rec: Recorder,
    tok: &'a TextTokenizer,
    texts: TokenTexts,
    error: Option<anyhow::Error>,
}

impl RecordSink<'_> {
    fn write(&mut self, e: TraceEvent) {
        if self.error.is_none() {
            if let Err(err) = self.rec.write(&e) {
                self.error = Some(err);
            }
        }
    }
}

impl EventSink for RecordSink<'_> {
    fn detail(&self) -> bool {
        true
    }
    fn emit(&mut self, e: DecodeEvent) {
        let tok = self.tok;
        if let Some(texts) = self.texts.before(&e, |id| tok.token_text(id)) {
            self.write(texts.into());
        }
        self.write(e.into());
    }
}

fn record(args: RecordArgs) -> Result<()> {
    let options = args.decode.options()?;
    let pricing = args.decode.cost.pricing()?;
    let records = args.prompts.records()?;
    let loaded = args.model.load()?;
    let mut inputs = args.prompts.files_or(&super::DEFAULT_FAMILIES);
    inputs.extend(loaded.files.inputs());
    inputs.extend(
        args.decode
            .cost
            .cost_profile
            .iter()
            .map(std::path::PathBuf::from),
    );
    specscope::output::refuse_inputs(&args.out, "--out", &inputs)?;
    // Encoded first: a prompt that does not fit fails naming its line, before the file.
    let prompts = args.prompts.encode(&records, &loaded)?;
    let header = loaded.trace_header(&options, &pricing);
    let rec = Recorder::create(&args.out, &header)?;
    let mut sink = RecordSink {
        rec,
        tok: &loaded.tokenizer,
        texts: TokenTexts::default(),
        error: None,
    };
    let mut sched = loaded.scheduler(&pricing);
    let mut id = 1;
    let kept = per_family(&records, args.prompts.skip, args.prompts.limit);
    for (r, p) in kept.into_iter().zip(prompts) {
        sink.write(
            SessionEvent::UserMessage {
                req: id,
                text: r.prompt.clone(),
                regenerate: false,
            }
            .into(),
        );
        sched.submit_with_id(
            id,
            Submit {
                prompt: p.tokens,
                options: options.clone(),
                family: Some(p.family),
            },
            &mut sink,
        )?;
        sched.run_to_completion(&mut sink)?;
        id += 1;
    }
    if let Some(e) = sink.error.take() {
        return Err(e);
    }
    let path = sink.rec.finish().context("cannot finish the recording")?;
    eprintln!("specscope: wrote {} ({} requests)", path.display(), id - 1);
    Ok(())
}
