//! `specscope` / `specscope chat`: the full-screen live chat, and `specscope replay`.

use std::io::IsTerminal;
use std::io::Stdout;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use crossterm::event::{Event, KeyEventKind};
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use specscope::engine::{EngineHandle, Scheduler};
use specscope::trace::read_trace;
use specscope::tui::app::{run_live, run_replay, Live, Player, Screen, TermInput, Ui};
use specscope::tui::config::config_dir;
use specscope::tui::keymap::Keymap;
use specscope::tui::state::{State, UiOptions};
use specscope::tui::terminal::TerminalGuard;
use specscope::tui::theme::Theme;

use super::run::DecodeArgs;
use super::ModelArgs;

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
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// A recording made with --record, the record key, or `specscope trace record`.
    pub file: PathBuf,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Start paused (step with F6).
    #[arg(long)]
    pub paused: bool,
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

pub fn chat(args: ChatArgs) -> Result<()> {
    require_terminal()?;
    let options = args.decode.options()?;
    let ui = args.ui.load();
    // Load before taking the screen, so a bad model reports plainly.
    let loaded = args.model.load()?;
    let header = loaded.trace_header(&options);
    let device = loaded.device_name();
    let context = loaded.model.config().max_position_embeddings;
    let sched = Scheduler::new(loaded.model.clone(), Some(loaded.tokenizer.clone()));
    let (handle, events) = EngineHandle::spawn(sched);
    let mut state = State::new(&loaded.files.label, device, UiOptions::from(&options));
    let live = Live {
        handle,
        events,
        tokenizer: loaded.tokenizer.clone(),
        base: options,
        context,
        header,
        record: args.record.clone(),
        request_log: None,
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
    if let Some(p) = &args.record {
        eprintln!("specscope: recording saved to {}", p.display());
    }
    r
}

pub fn replay(args: ReplayArgs) -> Result<()> {
    let trace = read_trace(&args.file)?;
    require_terminal()?;
    let ui = args.ui.load();
    let h = &trace.header;
    let block = h
        .block_policy
        .strip_prefix("fixed:")
        .and_then(|b| b.parse().ok())
        .unwrap_or(16);
    let mut state = State::new(
        &format!("{} (replay)", h.model),
        &h.device,
        UiOptions {
            mode: h.decode_mode(),
            block,
            overlap: h.overlap,
            adaptive: h.block_policy == "adaptive",
        },
    );
    let mut player = Player::new(trace, args.file.display().to_string());
    player.playing = !args.paused;
    state.paused = args.paused;
    let mut fs = FullScreen::open()?;
    fs.rt.block_on(run_replay(
        &mut fs.screen,
        &mut fs.input,
        player,
        &ui,
        &mut state,
    ))
}
