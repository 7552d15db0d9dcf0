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

fn main() -> ExitCode {
    quiet_on_closed_pipes();
    if let Some(w) = specscope::settle_thread_count() {
        eprintln!("specscope: warning: {w}");
    }
    let cli = Cli::parse();
    if let Some(note) = cli::embedded::ensure_assets() {
        eprintln!("specscope: {note}");
    }
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
