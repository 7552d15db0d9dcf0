//! `specscope` / `specscope chat`: the full-screen live chat, and `specscope replay`.

use std::io::IsTerminal;
use std::io::Stdout;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use crossterm::event::{Event, KeyEventKind, MouseEventKind};
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use specscope::bench::prompts::read_prompt_file;
use specscope::engine::EngineHandle;
use specscope::model;
use specscope::trace::read_trace;
use specscope::tui::app::{
    run_live, run_replay, snapshot, Ended, Live, Player, Screen, TermInput, Ui,
};
use specscope::tui::config::config_dir;
use specscope::tui::keymap::Keymap;
use specscope::tui::state::{Level, State, Topic, DEFAULT_LIVE_PACE, LIVE_PACES_MS};
use specscope::tui::terminal::TerminalGuard;
use specscope::tui::theme::Theme;

use super::decode::DecodeArgs;
use super::{Loaded, ModelArgs};

/// Look and keys (shared by `chat` and `replay`).
#[derive(Debug, Clone, Args)]
pub struct UiArgs {
    /// Colour theme: dark, light, basic16, or a file name in <config dir>/themes/.
    #[arg(long, env = "SPECSCOPE_THEME", default_value = "dark")]
    pub theme: String,
    /// Keymap file merged over the built-in keys (default: <config dir>/keymap.toml).
    #[arg(long)]
    pub keymap: Option<PathBuf>,
}

impl UiArgs {
    pub fn load(&self) -> Ui {
        let dir = config_dir();
        let (theme, mut warnings) = Theme::load(&self.theme, dir.as_deref());
        let path = self
            .keymap
            .clone()
            .or_else(|| dir.map(|d| d.join("keymap.toml")));
        let keymap = match path {
            Some(p) => {
                if self.keymap.is_some() && !p.exists() {
                    warnings.push(format!(
                        "{}: no such keymap file; using the built-in keys",
                        p.display()
                    ));
                }
                let (k, w) = Keymap::load(&p);
                warnings.extend(w);
                k
            }
            None => Keymap::builtin(),
        };
        Ui {
            theme,
            keymap,
            warnings,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Record the session (JSONL) into this file from the start.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Pause between rounds to start with: 0 full speed, 1 100 ms, 2 300 ms, 3 1 s
    /// (the default: a round's verdict and branch rows can be read before the next),
    /// 4 2 s. Alt+= / Alt+- change it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..5))]
    pub pace: Option<u64>,
    /// Earlier exchanges sent with each message [default: none for the bundled model,
    /// which saw an earlier exchange only before its few follow-ups ("Now double that
    /// result."), and answers worse after an unrelated one; the whole chat for others].
    #[arg(long)]
    pub context_turns: Option<usize>,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// A recording made with --record, the record key, or `specscope trace record`.
    #[arg(required_unless_present = "demo", conflicts_with = "demo")]
    pub file: Option<PathBuf>,
    /// Replay the bundled demo recording, wherever it is (the tree's assets/, or the
    /// data directory an installed binary unpacks into).
    #[arg(long)]
    pub demo: bool,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Start paused (step with F6).
    #[arg(long)]
    pub paused: bool,
    /// Print the screen at this size (`80x24`) as text and exit, without a terminal:
    /// after --at-round rounds, or at the recording's end.
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    pub snapshot: Option<(u16, u16)>,
    /// With --snapshot: the rounds played first (paused there, as F6 leaves it).
    #[arg(long, value_name = "N", requires = "snapshot")]
    pub at_round: Option<usize>,
}

/// `80x24` → (80, 24), within what a terminal can be.
fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let bad = || {
        format!("`{s}`: a size is WIDTHxHEIGHT, e.g. 80x24 (width 20 to 1000, height 8 to 1000)")
    };
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u16 = w.trim().parse().map_err(|_| bad())?;
    let h: u16 = h.trim().parse().map_err(|_| bad())?;
    if !(20..=1000).contains(&w) || !(8..=1000).contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

fn require_terminal() -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("the screen needs a terminal; for pipes and scripts use `specscope run` (text) or `specscope trace summary`");
    }
    Ok(())
}

/// Reads terminal events on a thread of its own (crossterm's read blocks).
fn spawn_input() -> UnboundedReceiver<TermInput> {
    let (tx, rx) = unbounded_channel();
    let _ = std::thread::Builder::new()
        .name("specscope-input".into())
        .spawn(move || loop {
            if tx.is_closed() {
                return;
            }
            match crossterm::event::poll(Duration::from_millis(100)) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => return,
            }
            let msg = match crossterm::event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => TermInput::Key(k),
                Ok(Event::Paste(p)) => TermInput::Paste(p),
                Ok(Event::Mouse(m)) => match m.kind {
                    MouseEventKind::ScrollUp => TermInput::Wheel(-1),
                    MouseEventKind::ScrollDown => TermInput::Wheel(1),
                    _ => continue,
                },
                Ok(Event::Resize(..)) => TermInput::Resize,
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.send(msg).is_err() {
                return;
            }
        });
    rx
}

/// The terminal taken over for the app: a screen on it, the key reader, the runtime.
/// Fields drop in order, so the screen goes before the guard restores the terminal.
struct FullScreen {
    screen: Screen<CrosstermBackend<Stdout>>,
    input: UnboundedReceiver<TermInput>,
    _guard: TerminalGuard,
    rt: tokio::runtime::Runtime,
}

impl FullScreen {
    fn open() -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let (guard, terminal) = TerminalGuard::enter()?;
        Ok(Self {
            screen: Screen::new(terminal, true),
            input: spawn_input(),
            _guard: guard,
            rt,
        })
    }
}

/// The assets' start-up note (unpacked, repaired, or why not) on the messages page
/// too: stderr is hidden behind the screen.
fn say_startup_note(state: &mut State) {
    if let Some(n) = super::embedded::note() {
        let level = if n.starts_with("cannot") {
            Level::Warning
        } else {
            Level::Info
        };
        state.status.notice(n, level, Topic::General);
    }
}

fn bundled(loaded: &Loaded) -> bool {
    loaded.files.label.starts_with("bundled:")
}

/// What the empty chat says about the model, and the prompts it offers: the bundled
/// model introduces itself (size, training) and offers held-out prompts of the kinds
/// it was trained on; another model is named with its size.
fn intro(loaded: &Loaded) -> (Vec<String>, Vec<String>) {
    let cfg = loaded.model.config();
    let params = cfg.param_count() as f64;
    let size = if params >= 1e9 {
        format!("{:.1}B", params / 1e9)
    } else {
        format!("{:.1}M", params / 1e6)
    };
    if loaded.simulated() {
        return (
            vec![
                format!("{}: {}.", loaded.files.label, specscope::sim::LABEL),
                "No weights: each answer is stand-in text (practice-chat answers, unrelated to your message) whose drafts are accepted as NLD-8B's were observed to be. Every figure here is simulated.".into(),
            ],
            Vec::new(),
        );
    }
    if !bundled(loaded) {
        return (
            vec![format!(
                "{}: {size} parameters, {} layers, vocabulary {}.",
                loaded.files.label, cfg.num_hidden_layers, cfg.vocab_size
            )],
            Vec::new(),
        );
    }
    let dir = model::source::bundled_dir();
    let trained = std::fs::read_to_string(dir.join("train_state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|v| {
            let min = v["elapsed_secs"].as_f64().unwrap_or(0.0) / 60.0;
            let tokens = v["clean_tokens_seen"].as_f64().unwrap_or(0.0) / 1e6;
            format!(" ({min:.0} min, {tokens:.1}M tokens of generated chats)")
        })
        .unwrap_or_default();
    let about = vec![
        format!("Bundled drill model: {size} parameters, trained from scratch on a 2-core CPU{trained}."),
        "It does arithmetic, word problems, Python list functions, capitals, and reversing, counting or sorting words; it declines the rest.".into(),
        // Last: where the pane is short it gives way to an example.
        "Each message is answered on its own; --context-turns 1 sends the exchange before, for follow-ups.".into(),
    ];
    let prompts = dir.parent().map(|p| p.join("prompts")).unwrap_or_default();
    let mut examples = Vec::new();
    let mut tasks = std::collections::BTreeSet::new();
    for fam in ["first", "math", "code", "qa"] {
        let Ok(records) = read_prompt_file(&prompts.join(format!("{fam}.jsonl"))) else {
            continue;
        };
        // One prompt per task, plainly punctuated where the task has one (the
        // held-out set types some as newcomers do: "What is 12 plus 7?!").
        let plain = |p: &str| !(p.ends_with('!') || p.ends_with("??"));
        for want_plain in [true, false] {
            for r in records.iter().filter(|r| r.history.is_empty()) {
                let task = r.task.clone().unwrap_or_default();
                if task != "out_of_scope"
                    && (!want_plain || plain(&r.prompt))
                    && tasks.insert(format!("{fam}/{task}"))
                {
                    examples.push(r.prompt.clone());
                }
            }
        }
    }
    (about, examples)
}

/// The process's exit for how the screen ended: 128 + the signal's number when a
/// signal ended it, as shells report it.
fn exit_of(ended: Ended) -> Result<ExitCode> {
    Ok(match ended {
        Ended::Quit => ExitCode::SUCCESS,
        Ended::Signal(n) => ExitCode::from(128 + n as u8),
    })
}

pub fn chat(args: ChatArgs) -> Result<ExitCode> {
    require_terminal()?;
    let options = args.decode.options()?;
    let pricing = args.decode.cost.pricing()?;
    let ui = args.ui.load();
    // Load before taking the screen, so a bad model reports plainly.
    let loaded = args.model.load()?;
    let header = loaded.trace_header(&options, &pricing);
    let device = loaded.device_name();
    let context = loaded.model.config().max_position_embeddings;
    let (about, examples) = intro(&loaded);
    let sched = loaded.scheduler(&pricing);
    let (handle, events) = EngineHandle::spawn(sched);
    let mut state = State::new(&loaded.files.label, device, options)
        .with_intro(about, examples)
        .with_prices(&pricing.label)
        .with_keys(&ui.keymap);
    say_startup_note(&mut state);
    state.session.context_turns = args.context_turns.or(bundled(&loaded).then_some(0));
    state.status.pace = args
        .pace
        .map_or(DEFAULT_LIVE_PACE, |p| p as usize)
        .min(LIVE_PACES_MS.len() - 1);
    let live = Live {
        handle,
        events,
        tokenizer: loaded.tokenizer.clone(),
        context,
        header,
        record: args.record.clone(),
    };
    let mut fs = FullScreen::open()?;
    let r = fs.rt.block_on(run_live(
        &mut fs.screen,
        &mut fs.input,
        live,
        &ui,
        &mut state,
    ));
    drop(fs);
    // Where each recording went (a taken name gets a number: nothing is replaced).
    for (_, text) in &state.status.messages {
        if text.starts_with("recording saved to ") {
            eprintln!("specscope: {text}");
        }
    }
    report_messages(&state);
    exit_of(r?)
}

/// The session's warnings and errors, in full, once the screen is gone (plain notices
/// such as "mode: AR" stay on the help's messages page).
fn report_messages(s: &State) {
    for (level, text) in &s.status.messages {
        let label = match level {
            Level::Info => continue,
            Level::Warning => "warning",
            Level::Error => "error",
        };
        eprintln!("specscope: {label}: {text}");
    }
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let demo = specscope::model::source::assets_dir().join("demo.jsonl");
    let file = args.file.unwrap_or_else(|| demo.clone());
    if !file.exists() && file.file_name() == demo.file_name() && file != demo {
        bail!(
            "{} does not exist; the bundled demo is {} (`specscope replay --demo` opens it from anywhere)",
            file.display(),
            demo.display()
        );
    }
    let trace = read_trace(&file)?;
    if args.snapshot.is_none() {
        require_terminal()?;
    }
    let ui = args.ui.load();
    let h = &trace.header;
    let mut state = State::new(
        &format!("{} (replay)", h.model),
        &h.device,
        h.options.decode.clone(),
    )
    .with_ablation(h.options.ablation)
    .with_source(h.source.clone())
    .with_keys(&ui.keymap);
    say_startup_note(&mut state);
    let mut player = Player::new(trace, file.display().to_string());
    if let Some(size) = args.snapshot {
        let text = snapshot(player, &ui, &mut state, size, args.at_round)?;
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    player.playing = !args.paused;
    let mut fs = FullScreen::open()?;
    let r = fs.rt.block_on(run_replay(
        &mut fs.screen,
        &mut fs.input,
        player,
        &ui,
        &mut state,
    ));
    drop(fs);
    report_messages(&state);
    exit_of(r?)
}
