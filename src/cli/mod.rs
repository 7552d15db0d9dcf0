//! Subcommands of the `specscope` binary.

/// `println!` that returns an error (a full disk, a closed descriptor) from the
/// function instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
            .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))?;
    }};
}

/// `print!` the same way.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
            .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))?;
    }};
}

pub mod bench;
pub mod chat;
pub mod check;
pub mod decode;
pub mod embedded;
pub mod eval;
pub mod inspect;
pub mod plot;
pub mod profile;
pub mod progress;
pub mod run;
pub mod sim;
pub mod survival;
pub mod synthetic;
pub mod trace;
pub mod train;
pub mod uibench;

use std::io::{IsTerminal, Read};
use std::sync::Arc;

/// A parser for a count flag in `lo..=hi`: clap names the range when a value is
/// outside it (the help text says why the range is what it is).
pub fn count(lo: u64, hi: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(lo..=hi)
}

/// Most tokens one request may be asked to decode (a context window of any model
/// there is).
pub const MAX_NEW_TOKENS: u64 = 1 << 20;

use anyhow::{bail, ensure, Context, Result};
use candle_core::Device;
use clap::Args;

use specscope::engine::cost::Pricing;
use specscope::engine::{Scheduler, SharedBackbone};
use specscope::model::{
    self, ChatMessage, LoadOptions, LoadReport, Model, ModelFiles, ModelSource, TextTokenizer,
};
use specscope::trace::{fnv1a_hex, TraceHeader};

/// Where the model comes from and where it runs (shared by every subcommand).
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A hub id (owner/name), a local model directory, `sim:nld-8b` (a simulated
    /// backbone that accepts like NLD-8B: no weights, stand-in text), or nothing for
    /// the bundled model.
    #[arg(long, env = "SPECSCOPE_MODEL")]
    pub model: Option<String>,
    /// Hub revision (branch, tag or commit) when --model is a hub id.
    #[arg(long)]
    pub revision: Option<String>,
    /// Where the model runs.
    #[arg(long, value_enum, default_value_t)]
    pub device: model::DeviceChoice,
    /// Do not attach the checkpoint's linear_spec_lora/ draft adapter.
    #[arg(long)]
    pub no_lora: bool,
    /// Compute dtype of the weights (norms, softmax and logits accumulate in f32).
    #[arg(long, value_enum, default_value_t)]
    pub dtype: model::DtypeChoice,
}

/// A loaded checkpoint (or a simulated backbone) with everything the subcommands print
/// about it.
pub struct Loaded {
    /// The checkpoint's files; a simulated backbone's are the bundled model's (its
    /// tokenizer and chat template), under the simulator's label.
    pub files: ModelFiles,
    /// What decodes.
    pub model: SharedBackbone,
    /// The checkpoint and its load report; `None` for a simulated backbone.
    pub checkpoint: Option<(Model, LoadReport)>,
    pub tokenizer: TextTokenizer,
    pub device: Device,
}

impl ModelArgs {
    pub fn load(&self) -> Result<Loaded> {
        self.load_with(false)
    }

    /// `allow_unexpected`: tensors the architecture does not use are listed, not an
    /// error (`inspect`).
    pub fn load_with(&self, allow_unexpected: bool) -> Result<Loaded> {
        if let Some(name) = self
            .model
            .as_deref()
            .and_then(|m| m.strip_prefix(specscope::sim::PREFIX))
        {
            return self.load_sim(name);
        }
        let source = ModelSource::parse(self.model.as_deref(), self.revision.as_deref())?;
        let files = source.resolve()?;
        for n in &files.notes {
            eprintln!("specscope: {n}");
        }
        let device = select_device(self.device)?;
        let dtype = model::compute_dtype(self.dtype, &device, model::file_dtype(&files));
        let opts = LoadOptions {
            lora: !self.no_lora,
            dtype,
            allow_unexpected,
        };
        let (model, report) = model::load(&files, &device, opts)?;
        for w in model.config().warnings() {
            eprintln!("specscope: warning: {}: {w}", files.config.display());
        }
        let tokenizer = model::load_tokenizer(&files, model.config())?;
        if let Some(w) = tokenizer.vocab_warning(model.config()) {
            eprintln!("specscope: warning: {}: {w}", files.tokenizer.display());
        }
        Ok(Loaded {
            files,
            model: Arc::new(model.clone()),
            checkpoint: Some((model, report)),
            tokenizer,
            device,
        })
    }

    /// A simulated backbone: the bundled model's tokenizer and chat template, no weights.
    fn load_sim(&self, name: &str) -> Result<Loaded> {
        let mut files = ModelSource::Bundled
            .resolve()
            .context("the simulator reads the bundled model's tokenizer")?;
        files.label = format!("{}{name}", specscope::sim::PREFIX);
        let cfg = model::load_config(&files)?;
        let tokenizer = model::load_tokenizer(&files, &cfg)?;
        let backbone = specscope::sim::SimBackbone::new(name, cfg, tokenizer.clone())?;
        Ok(Loaded {
            files,
            model: Arc::new(backbone),
            checkpoint: None,
            tokenizer,
            device: Device::Cpu,
        })
    }
}

impl Loaded {
    /// The checkpoint, for a command that reads weights (`what` names it in the error).
    pub fn checkpoint(&self, what: &str) -> Result<(&Model, &LoadReport)> {
        self.checkpoint
            .as_ref()
            .map(|(m, r)| (m, r))
            .with_context(|| {
                format!(
                    "{what} needs a checkpoint: {} is a simulated backbone with no weights",
                    self.files.label
                )
            })
    }

    /// A simulated backbone (its figures are simulated, never measured).
    pub fn simulated(&self) -> bool {
        self.checkpoint.is_none()
    }

    /// Where the acceptance figures come from, as outputs label them.
    pub fn acceptance(&self) -> &'static str {
        if self.simulated() {
            specscope::sim::LABEL
        } else {
            "measured on this model"
        }
    }

    /// `cpu` or `cuda`, as the status line and recordings say it; `sim` for the simulator.
    pub fn device_name(&self) -> &'static str {
        if self.simulated() {
            "sim"
        } else if self.device.is_cuda() {
            "cuda"
        } else {
            "cpu"
        }
    }

    /// A scheduler for this model, pricing its decisions as `--cost-profile` says.
    pub fn scheduler(&self, pricing: &Pricing) -> Scheduler {
        Scheduler::new(self.model.clone(), Some(self.tokenizer.clone()))
            .with_tables(self.survival_tables())
            .with_pricing(pricing.clone())
    }

    /// The adaptive rule's tables: the simulator's own for a simulated backbone, else
    /// the built-in ones (fitted on the bundled model).
    pub fn survival_tables(&self) -> specscope::engine::policy::SurvivalTables {
        if self.simulated() {
            specscope::sim::survival_tables()
        } else {
            specscope::engine::policy::SurvivalTables::builtin()
        }
    }

    /// A recording header naming this model, the options requests start with and the
    /// prices their decisions came from.
    pub fn trace_header(
        &self,
        options: &specscope::engine::DecodeOptions,
        pricing: &Pricing,
    ) -> TraceHeader {
        let mut h = TraceHeader::new(self.files.label.clone(), self.device_name().into());
        h.cost_profile = pricing.describe();
        let here = specscope::Provenance::here();
        h.command = here.command;
        h.machine = here.machine;
        h.revision = self.files.commit.clone();
        h.tokenizer_hash = std::fs::read(&self.files.tokenizer)
            .map(|b| fnv1a_hex(&b))
            .unwrap_or_default();
        h.set_options(options);
        h
    }
}

/// The device `--device` asks for; says so when `auto` falls back to the CPU.
pub fn select_device(want: model::DeviceChoice) -> Result<Device> {
    let (device, note) = model::select_device(want)?;
    if let Some(n) = note {
        eprintln!("specscope: {n}");
    }
    Ok(device)
}

/// Prompt files for `bench`, `eval` and `survival`.
#[derive(Debug, Clone, Args)]
pub struct PromptFileArgs {
    /// JSONL prompt files (`{"prompt", "family", "history", "answer"}` per line); default:
    /// the bundled held-out sets in assets/prompts/.
    #[arg(long, value_delimiter = ',')]
    pub prompts: Vec<std::path::PathBuf>,
    /// Prompts per family, at least 1 (default: all).
    #[arg(long, value_parser = count(1, u64::MAX))]
    pub limit: Option<usize>,
    /// Prompts per family to pass over first (e.g. to keep the bench's prompts out of
    /// the survival tables).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
}

/// The held-out prompt files bench, survival and ui-bench run by default; eval adds
/// `first` (what newcomers type, short answers that would skew speed figures).
pub const DEFAULT_FAMILIES: [&str; 3] = ["math", "code", "qa"];

impl PromptFileArgs {
    /// Reads every file (before the model loads, so a bad line fails fast).
    pub fn records(&self) -> Result<Vec<specscope::bench::prompts::PromptRecord>> {
        self.records_or(&DEFAULT_FAMILIES)
    }

    /// As `records`, with `families`' held-out files as the default set.
    pub fn records_or(
        &self,
        families: &[&str],
    ) -> Result<Vec<specscope::bench::prompts::PromptRecord>> {
        let mut records = Vec::new();
        for f in &self.files_or(families) {
            records.extend(specscope::bench::prompts::read_prompt_file(f)?);
        }
        Ok(records)
    }

    /// The prompt files read: `--prompts`, or `families`' held-out files.
    pub fn files_or(&self, families: &[&str]) -> Vec<std::path::PathBuf> {
        if self.prompts.is_empty() {
            let dir = model::source::bundled_dir()
                .parent()
                .map(|p| p.join("prompts"))
                .unwrap_or_default();
            families
                .iter()
                .map(|f| dir.join(format!("{f}.jsonl")))
                .collect()
        } else {
            self.prompts.clone()
        }
    }

    /// The records kept by `--skip` and `--limit`, encoded for `loaded`'s model.
    pub fn encode(
        &self,
        records: &[specscope::bench::prompts::PromptRecord],
        loaded: &Loaded,
    ) -> Result<Vec<specscope::bench::prompts::BenchPrompt>> {
        specscope::bench::prompts::encode(
            records,
            &loaded.tokenizer,
            self.skip,
            self.limit,
            loaded.model.config().max_position_embeddings,
        )
    }
}

/// How the prompt text becomes tokens.
#[derive(Debug, Clone, Args)]
pub struct PromptArgs {
    /// The prompt; read from standard input when absent.
    #[arg(long, short)]
    pub prompt: Option<String>,
    /// Feed the prompt as plain text instead of a chat turn.
    #[arg(long, conflicts_with = "chat")]
    pub raw: bool,
    /// Wrap the prompt in the model's chat template (the default).
    #[arg(long)]
    pub chat: bool,
    /// System message for chat prompts.
    #[arg(long)]
    pub system: Option<String>,
    /// Turn the template's thinking mode on (off by default).
    #[arg(long)]
    pub think: bool,
}

impl PromptArgs {
    pub fn text(&self) -> Result<String> {
        if let Some(p) = &self.prompt {
            ensure!(
                !p.trim().is_empty(),
                "--prompt is empty: there is nothing to answer"
            );
            return Ok(p.clone());
        }
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            bail!("no prompt: pass --prompt TEXT or pipe the prompt on standard input");
        }
        let mut s = String::new();
        // Bounded: `< /dev/zero` or an endless pipe is not a prompt.
        let max = 16 << 20;
        stdin
            .take(max + 1)
            .read_to_string(&mut s)
            .context("cannot read the prompt from standard input (is it UTF-8 text?)")?;
        ensure!(
            (s.len() as u64) <= max,
            "the prompt on standard input is longer than {} MiB",
            max >> 20
        );
        if s.trim().is_empty() {
            bail!("no prompt: standard input was empty; pass --prompt TEXT or pipe the prompt");
        }
        Ok(s)
    }

    pub fn encode(&self, tok: &TextTokenizer) -> Result<Vec<u32>> {
        let text = self.text()?;
        if self.raw {
            return tok.encode_raw(&text);
        }
        let mut messages = Vec::new();
        if let Some(sys) = &self.system {
            messages.push(ChatMessage::new("system", sys));
        }
        messages.push(ChatMessage::new("user", text.trim_end_matches('\n')));
        tok.encode_chat(&messages, self.think)
    }
}
