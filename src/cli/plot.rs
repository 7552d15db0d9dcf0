//! `specscope plot`: SVG figures from a bench JSON, a recording and a profile.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use specscope::plot::{self, Inputs, Palette};
use specscope::tui::theme::Theme;

#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// A `specscope bench --json` file: throughput and TPF against concurrency, block
    /// sizes chosen, and (without --recording) acceptance and branch figures.
    #[arg(long)]
    pub bench: Option<PathBuf>,
    /// A recording: acceptance per family, per-position acceptance, block sizes over
    /// the session, branch outcomes and the draft at the first rejection.
    #[arg(long)]
    pub recording: Option<PathBuf>,
    /// A `specscope profile --json` file: forward latency, measured and fitted.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// The bench configuration for the acceptance and branch figures (default: the
    /// largest fixed LinearSS block, and the first configuration with branch rows).
    #[arg(long)]
    pub config: Option<String>,
    /// Directory for the SVG files.
    #[arg(long, default_value = "figures")]
    pub out: PathBuf,
    /// Theme whose semantic colours the figures use (a light one suits white paper).
    #[arg(long, default_value = "light")]
    pub theme: String,
}

pub fn run(a: PlotArgs) -> Result<()> {
    if a.bench.is_none() && a.recording.is_none() && a.profile.is_none() {
        bail!("nothing to plot: give --bench, --recording and/or --profile");
    }
    let (theme, warnings) = Theme::load(&a.theme, specscope::tui::config::config_dir().as_deref());
    for w in warnings {
        eprintln!("specscope: warning: {w}");
    }
    let inputs = Inputs {
        bench: a.bench.as_deref().map(plot::read_bench).transpose()?,
        recording: a
            .recording
            .as_deref()
            .map(plot::read_recording)
            .transpose()?,
        profile: a.profile.as_deref().map(plot::read_profile).transpose()?,
        config: a.config.clone(),
    };
    let figures = plot::figures(&inputs, &Palette::from_theme(&theme))?;
    for p in plot::write(&figures, &a.out)? {
        outln!("{}", p.display());
    }
    Ok(())
}
