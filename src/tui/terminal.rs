//! Owning the terminal: raw mode and the alternate screen on entry, always restored on
//! exit, error or panic.

use std::io::{stdout, Write};
use std::sync::Once;

use anyhow::{Context, Result};
use crossterm::event::{DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// Puts the terminal back as the shell expects it (idempotent).
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = stdout().flush();
}

static HOOK: Once = Once::new();

/// Restores the terminal before the default panic message prints.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            default(info);
        }));
    });
}

/// Holds the terminal in full-screen raw mode; dropping it restores the screen.
pub struct TerminalGuard;

/// The crossterm terminal the app draws on.
pub type CrosstermTerminal = Terminal<CrosstermBackend<std::io::Stdout>>;

impl TerminalGuard {
    pub fn enter() -> Result<(Self, CrosstermTerminal)> {
        install_panic_hook();
        enable_raw_mode()
            .context("cannot switch the terminal to raw mode (is this a terminal?)")?;
        let r = execute!(stdout(), EnterAlternateScreen, EnableBracketedPaste);
        if let Err(e) = r {
            restore();
            return Err(e).context("cannot enter the alternate screen");
        }
        match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(terminal) => Ok((Self, terminal)),
            Err(e) => {
                restore();
                Err(e).context("cannot set up the terminal")
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}
