//! `specscope trace summary FILE` (statistics, headless) and `specscope trace record`
//! (a recording of prompt-file requests, made without a screen).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use specscope::bench::prompts::per_family;
use specscope::engine::{DecodeEvent, EventSink, Submit};
use specscope::model::TextTokenizer;
use specscope::output::printable;
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
    /// Rebuild what the block policy learned from a recording's rounds and print it
    /// (prices, block sizes' calibration, branch rows' hit rates, regimes).
    Beliefs {
        file: PathBuf,
        /// What they were after the engine's N-th step (a speculation round of every
        /// request in flight, or a diffusion step); default: the last.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        at_step: Option<u64>,
    },
    /// Record requests from prompt files without the screen (how the demo was made).
    Record(Box<RecordArgs>),
    /// Read a log NLD's tooling wrote (the RecGuide confidence trace, SGLang
    /// LinearSpec's block stats, joined with per-request records) into a recording.
    Import(ImportArgs),
    /// Write a recording as the RecGuide confidence trace (schema version 2).
    Export(ExportArgs),
    /// Acceptance figures of recordings side by side (imported NLD logs, the bundled
    /// model's, the simulator's), each labelled with its source: a markdown table.
    Compare {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Also draw tokens per round, a panel per recording, to this SVG file.
        #[arg(long)]
        figure: Option<PathBuf>,
        /// Replace `--figure` if it exists.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// One log of rounds (`raw_trace_*.jsonl`, `sglang_decode_stats.jsonl`) and any
    /// per-request files to join (`sglang_timing.jsonl`, `pytorch_request_stats.jsonl`).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The recording to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace `--out` if it exists.
    #[arg(long)]
    pub force: bool,
    /// The rounds file's format (detected from its lines when not given).
    #[arg(long, value_enum)]
    pub format: Option<specscope::trace::nld::import::Format>,
    /// What ran, for the status line ("SGLang LinearSpec, NLD-8B"); default: what the
    /// log says.
    #[arg(long)]
    pub label: Option<String>,
    /// A tokenizer.json, a directory holding one, or a hub id: the token ids the log
    /// holds (rejected draft, verifier's token, version 2's accepted ids) get text.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Drop the requests no per-request record names (a server's warm-up request).
    #[arg(long)]
    pub joined_only: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The recording to write out.
    pub file: PathBuf,
    /// The schema to write.
    #[arg(long, value_enum, default_value = "linearspec-confidence")]
    pub format: ExportFormat,
    /// Where to write (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace `--out` if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Schemas `trace export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The RecGuide confidence trace, schema version 2 (`linearspec_confidence_round`).
    LinearspecConfidence,
}

#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: PromptFileArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// The recording to write (an existing file only with --force).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: TraceArgs) -> Result<()> {
    match args.command {
        TraceCommand::Summary { file, json } => summary(file, json),
        TraceCommand::Beliefs { file, at_step } => beliefs(&file, at_step),
        TraceCommand::Record(a) => record(*a),
        TraceCommand::Import(a) => import(a),
        TraceCommand::Export(a) => export(a),
        TraceCommand::Compare {
            files,
            json,
            figure,
            force,
        } => compare(&files, json, figure.as_deref(), force),
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
        if let Some(src) = &h.source {
            outln!("{}: {}", file.display(), printable(&src.describe()));
            outln!(
                "format {} · rounds from {}",
                printable(&src.format),
                printable(&src.rounds_file)
            );
            for j in &src.joined {
                outln!("joined {}", printable(j));
            }
            if src.unjoined_dropped > 0 {
                outln!(
                    "requests no record names, dropped (--joined-only): {}",
                    src.unjoined_dropped
                );
            }
            if src.health_checks_dropped > 0 {
                outln!(
                    "health checks dropped: {} requests, {} rounds",
                    src.health_checks_dropped,
                    src.health_check_rounds_dropped
                );
            }
            for a in &src.absent {
                outln!("not in the log: {}", printable(a));
            }
            let assumed = specscope::trace::nld::forwards_assumed(&trace);
            out!("{}", s.report_imported(assumed));
            return Ok(());
        }
        outln!(
            "{}: {} on {}, {}, risk margin < {}",
            file.display(),
            printable(&h.model),
            printable(&h.device),
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

fn beliefs(file: &std::path::Path, at_step: Option<u64>) -> Result<()> {
    let trace = read_trace(file)?;
    for w in &trace.warnings {
        eprintln!("specscope: warning: {w}");
    }
    let events = trace.events.iter().filter_map(|e| match &e.event {
        TraceEvent::Decode(d) => Some(d),
        _ => None,
    });
    let rebuilt = specscope::trace::beliefs::rebuild_until(events, at_step)
        .with_context(|| format!("cannot rebuild the beliefs of {}", file.display()))?;
    let Some(r) = rebuilt else {
        let why = if trace.header.source.is_some() {
            "an imported log holds its rounds, not what a policy learned from them"
        } else if trace.header.event_version < 6 {
            "it was recorded before event version 6"
        } else {
            "no decoding step ran while it recorded"
        };
        anyhow::bail!("{} holds no `learned` event: {why}", file.display());
    };
    outln!("{}: {}", file.display(), printable(&trace.header.model));
    out!("{}", r.report());
    if trace.recorded_summary().is_none() {
        outln!("(no session_end line: the recording was cut off; these are the beliefs after its last step)");
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
    specscope::output::claim(&args.out, "--out", args.force, &inputs)?;
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

/// The tokenizer `--tokenizer` names: a file, a directory holding `tokenizer.json`, or
/// a hub id.
fn import_tokenizer(spec: &str) -> Result<tokenizers::Tokenizer> {
    let p = std::path::Path::new(spec);
    let path = if p.is_dir() {
        p.join("tokenizer.json")
    } else if p.exists() || spec.starts_with('.') || spec.starts_with('/') {
        p.to_path_buf()
    } else {
        specscope::model::source::hub_tokenizer(spec, "main").with_context(|| {
            format!("--tokenizer {spec}: not a file, a directory or a hub id it could fetch")
        })?
    };
    let text = specscope::read_bounded(&path, 256 << 20).context("--tokenizer")?;
    tokenizers::Tokenizer::from_bytes(text.as_bytes())
        .map_err(|e| anyhow::anyhow!("--tokenizer {}: {e}", path.display()))
}

fn import(args: ImportArgs) -> Result<()> {
    specscope::output::claim(&args.out, "--out", args.force, &args.files)?;
    let opts = specscope::trace::nld::import::ImportOptions {
        format: args.format,
        label: args.label.clone(),
        joined_only: args.joined_only,
    };
    let mut trace = specscope::trace::nld::import::import(&args.files, &opts)?;
    for w in &trace.warnings {
        eprintln!("specscope: warning: {w}");
    }
    if let Some(spec) = &args.tokenizer {
        let tok = import_tokenizer(spec)?;
        trace.header.tokenizer_hash = String::new();
        // Only ids the tokenizer has: another model's ids past its vocabulary stay
        // numbers rather than take an empty text.
        specscope::trace::nld::import::add_token_texts(&mut trace, |id| {
            tok.id_to_token(id)?;
            tok.decode(&[id], false).ok()
        });
    }
    let text = specscope::trace::writer::encode_trace(&trace)?;
    specscope::output::write_whole(&args.out, &text)?;
    let s = Summary::of(trace.events.iter().map(|e| &e.event));
    let src = trace.header.source.as_ref();
    eprintln!(
        "specscope: wrote {} ({} requests, {} rounds, {} tokens; {})",
        args.out.display(),
        s.requests,
        s.tally.rounds,
        s.tally.new_tokens,
        src.map_or(String::new(), |s| s.format.clone())
    );
    Ok(())
}

fn export(args: ExportArgs) -> Result<()> {
    let ExportFormat::LinearspecConfidence = args.format;
    if let Some(out) = &args.out {
        specscope::output::claim(out, "--out", args.force, std::slice::from_ref(&args.file))?;
    }
    let trace = read_trace(&args.file)?;
    for w in &trace.warnings {
        eprintln!("specscope: warning: {w}");
    }
    let lines = specscope::trace::nld::export::confidence_lines(&trace)?;
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    match &args.out {
        Some(out) => {
            specscope::output::write_whole(out, &text)?;
            eprintln!(
                "specscope: wrote {} ({} rounds)",
                out.display(),
                lines.len()
            );
        }
        None => out!("{text}"),
    }
    Ok(())
}

/// Where a recording's rounds came from, in words: imported, simulated or decoded; and
/// in a word, for a figure's panel.
fn source_label(file: &std::path::Path, h: &specscope::trace::TraceHeader) -> (String, String) {
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    let (what, short) = match &h.source {
        Some(src) => (format!("{} (imported log)", src.label), "NLD log"),
        None if h.model.starts_with(specscope::sim::PREFIX) => (
            format!("{} (simulated)", specscope::sim::LABEL),
            "simulated",
        ),
        None if h.model.starts_with("bundled:") => {
            ("bundled drill model (decoded here)".into(), "drill model")
        }
        None => (format!("{} (decoded here)", h.model), "decoded"),
    };
    (printable(&format!("{what}: {name}")), short.to_string())
}

fn compare(
    files: &[PathBuf],
    json: bool,
    figure: Option<&std::path::Path>,
    force: bool,
) -> Result<()> {
    if let Some(f) = figure {
        specscope::output::claim(f, "--figure", force, files)?;
    }
    let mut all = Vec::new();
    for f in files {
        let trace = read_trace(f)?;
        for w in &trace.warnings {
            eprintln!("specscope: warning: {w}");
        }
        let (label, short) = source_label(f, &trace.header);
        all.push(specscope::trace::nld::compare::acceptance(
            &trace, label, short,
        )?);
    }
    if let Some(f) = figure {
        let a = specscope::plot::data::Acceptance {
            what: "imported logs, decoded and simulated recordings side by side".into(),
            families: all.iter().map(|a| a.hist.clone()).collect(),
        };
        let names: Vec<String> = all.iter().map(|a| a.source.clone()).collect();
        let caption = format!("source: `specscope trace compare` of {}", names.join(" · "));
        let (theme, _) = specscope::tui::theme::Theme::load("light", None);
        let svg =
            specscope::plot::acceptance_figure(&a, &caption, &super::plot::palette_of(&theme))?;
        specscope::output::write_whole(f, &svg)?;
        eprintln!("specscope: wrote {}", f.display());
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        out!("{}", specscope::trace::nld::compare::table(&all));
    }
    Ok(())
}
