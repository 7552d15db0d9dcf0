//! The `specscope` command line.

mod cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

/// mimalloc's `mi_option_purge_delay` (its index in v3's `mi_option_e`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory in the process instead of returning it to the OS. Training
/// frees and reallocates the same hundreds of MB every step; returned to the OS, each
/// reallocation is zeroed page by page by the kernel, about a third of a step's time.
fn keep_freed_memory() {
    // SAFETY: sets a plain integer option of the linked allocator.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

use clap::{Parser, Subcommand};

/// Interactive diffusion-AR self-speculative decoding: draft, verify, see every round.
#[derive(Debug, Parser)]
#[command(
    name = "specscope",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: the chat screen (bundled model unless --model).
    #[command(flatten)]
    chat: cli::chat::ChatArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The full-screen chat: watch every draft/verify round live (the default).
    Chat(Box<cli::chat::ChatArgs>),
    /// Play a recording in the same screen (pause, step, seek, speed).
    Replay(cli::chat::ReplayArgs),
    /// Recordings without the screen: summary statistics, headless recording.
    Trace(Box<cli::trace::TraceArgs>),
    /// Measure the screen's cost: throughput with and without it, frame times, key latency.
    UiBench(Box<cli::uibench::UiBenchArgs>),
    /// Generate for one prompt without the screen and print the text (or JSON).
    Run(cli::run::RunArgs),
    /// Print causal next-token and bidirectional block top-k as JSON (port checks).
    Inspect(cli::inspect::InspectArgs),
    /// Measure forward latency for rows x tokens x cache lengths.
    Profile(cli::profile::ProfileArgs),
    /// Compare modes, block sizes and concurrency levels on a prompt set.
    Bench(cli::bench::BenchArgs),
    /// SVG figures from a bench JSON, a recording and a profile.
    Plot(cli::plot::PlotArgs),
    /// Measure answer quality and acceptance behaviour on held-out prompts.
    Eval(cli::eval::EvalArgs),
    /// Rebuild the adaptive block size's survival tables from counterfactual rounds.
    Survival(cli::survival::SurvivalArgs),
    /// Train the bundled model: corpus, tokenizer, joint AR + diffusion objective.
    Train(cli::train::TrainArgs),
    /// Write a random checkpoint with the real tensor names (NLD geometries, for timing).
    Synthetic(cli::synthetic::SyntheticArgs),
    /// Check a device against the CPU: the fused kernel, top-1 agreement, every mode = AR.
    Check(cli::check::CheckArgs),
    /// The simulated NLD-8B backbone (`--model sim:nld-8b`): its statistics beside the
    /// published ones.
    Sim(cli::sim::SimArgs),
}

/// Output to a closed pipe (`specscope trace summary FILE | head`) ends the process
/// quietly, as Unix tools do, instead of a "failed printing to stdout" panic: the
/// default action of SIGPIPE, which Rust's runtime ignores. Sockets are unaffected
/// (std writes them with MSG_NOSIGNAL).
fn quiet_on_closed_pipes() {
    #[cfg(unix)]
    // SAFETY: restores a signal's default disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether descriptor 1 was closed when the process started (`specscope … >&-`).
/// Rust's start-up quietly opens /dev/null on a closed standard descriptor before
/// `main`, so the output would vanish with exit 0: it is looked at earlier, from the
/// ELF initialisers the C runtime calls before Rust's start-up.
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

#[cfg(target_os = "linux")]
extern "C" fn note_closed_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
    STDOUT_CLOSED_AT_START.store(closed, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

/// Whether standard output can take what the command prints: a run that cannot print
/// fails before it starts, with one line on stderr.
fn stdout_open() -> bool {
    !STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed)
}

/// The command line, with `--help`, `--version` and `help …` written here so that a
/// full disk is an error (clap ignores its own write errors); a usage error goes to
/// stderr as clap writes it.
fn parse() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    use std::io::{IsTerminal, Write};
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let mut out = std::io::stdout().lock();
            // Colour as clap would choose it: a terminal, and no NO_COLOR or dumb TERM.
            let colour = out.is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var("TERM").map_or(true, |t| t != "dumb");
            let text = if colour {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => Err(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("specscope: error: cannot write to standard output: {e}");
                    Err(ExitCode::FAILURE)
                }
            }
        }
        Err(e) => {
            let _ = e.print();
            Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)))
        }
    }
}

fn main() -> ExitCode {
    quiet_on_closed_pipes();
    if !stdout_open() {
        eprintln!("specscope: error: standard output is closed: nothing could be printed (redirect it to /dev/null to discard it)");
        return ExitCode::FAILURE;
    }
    if let Some(w) = specscope::settle_thread_count() {
        eprintln!("specscope: warning: {w}");
    }
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    cli::embedded::ensure_assets_and_say();
    let command = cli
        .command
        .unwrap_or_else(|| Command::Chat(Box::new(cli.chat)));
    let ok = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    let result = match command {
        Command::Chat(a) => cli::chat::chat(*a),
        Command::Replay(a) => cli::chat::replay(a),
        Command::Trace(a) => ok(cli::trace::run(*a)),
        Command::UiBench(a) => ok(cli::uibench::run(*a)),
        Command::Run(a) => ok(cli::run::run(a)),
        Command::Inspect(a) => ok(cli::inspect::run(a)),
        Command::Profile(a) => ok(cli::profile::run(a)),
        Command::Train(a) => {
            keep_freed_memory();
            ok(cli::train::run(a))
        }
        Command::Bench(a) => ok(cli::bench::run(a)),
        Command::Survival(a) => ok(cli::survival::run(a)),
        Command::Eval(a) => ok(cli::eval::run(a)),
        Command::Plot(a) => ok(cli::plot::run(a)),
        Command::Synthetic(a) => ok(cli::synthetic::run(a)),
        Command::Check(a) => cli::check::run(a),
        Command::Sim(a) => cli::sim::run(a),
    };
    // The fused kernel turned itself off (its first check on a device failed): say so
    // once, after the screen is gone, whatever the command printed.
    if let Some(n) = specscope::model::kernels::notice() {
        eprintln!("specscope: {n}");
    }
    // What `print!` left in the buffer: a full disk says so here, not silently.
    let flushed = std::io::Write::flush(&mut std::io::stdout())
        .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"));
    match result.and_then(|code| flushed.map(|()| code)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("specscope: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// The option index is the purge delay's: its default (v3) is 1000 ms, and setting
    /// it reads back.
    #[test]
    fn purge_delay_option_index() {
        // SAFETY: reads and sets a plain integer option.
        unsafe {
            assert_eq!(
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                1000
            );
            super::keep_freed_memory();
            assert_eq!(
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                -1
            );
        }
    }
}
