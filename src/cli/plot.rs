//! `specscope plot`: SVG figures from a bench JSON, a recording and a profile.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use plotters::style::RGBColor;
use ratatui::style::{Color as TermColor, Style};
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
    /// Directory for the SVG files (figures already there replaced only with --force).
    #[arg(long, default_value = "figures")]
    pub out: PathBuf,
    /// Replace figures already in --out.
    #[arg(long)]
    pub force: bool,
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
    let figures = plot::figures(&inputs, &palette_of(&theme))?;
    for p in plot::write(&figures, &a.out, a.force)? {
        outln!("{}", p.display());
    }
    Ok(())
}

/// The xterm colour of a terminal colour.
fn rgb(c: TermColor) -> Option<RGBColor> {
    const BASE: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let idx = |i: usize| BASE.get(i).map(|&(r, g, b)| RGBColor(r, g, b));
    match c {
        TermColor::Rgb(r, g, b) => Some(RGBColor(r, g, b)),
        TermColor::Black => idx(0),
        TermColor::Red => idx(1),
        TermColor::Green => idx(2),
        TermColor::Yellow => idx(3),
        TermColor::Blue => idx(4),
        TermColor::Magenta => idx(5),
        TermColor::Cyan => idx(6),
        TermColor::Gray => idx(7),
        TermColor::DarkGray => idx(8),
        TermColor::LightRed => idx(9),
        TermColor::LightGreen => idx(10),
        TermColor::LightYellow => idx(11),
        TermColor::LightBlue => idx(12),
        TermColor::LightMagenta => idx(13),
        TermColor::LightCyan => idx(14),
        TermColor::White => idx(15),
        TermColor::Indexed(i) if i < 16 => idx(i as usize),
        TermColor::Indexed(i) if i >= 232 => {
            let v = 8 + 10 * (i - 232);
            Some(RGBColor(v, v, v))
        }
        TermColor::Indexed(i) => {
            let i = i - 16;
            let level = |x: u8| if x == 0 { 0 } else { 55 + 40 * x };
            Some(RGBColor(level(i / 36), level((i / 6) % 6), level(i % 6)))
        }
        TermColor::Reset => None,
    }
}

/// The colour a role is seen in: its background where the text on it is white (a
/// badge such as `rejected` or `hit`), else its foreground.
fn ink(style: Style) -> Option<RGBColor> {
    let fg = style.fg.and_then(rgb);
    let bg = style.bg.and_then(rgb);
    match (fg, bg) {
        (Some(RGBColor(255, 255, 255)), Some(b)) | (None, Some(b)) => Some(b),
        (Some(f), _) => Some(f),
        (None, None) => None,
    }
}

/// The figures' colours from a terminal theme's roles.
pub(crate) fn palette_of(t: &Theme) -> Palette {
    let role = |s: Style, fallback: RGBColor| ink(s).unwrap_or(fallback);
    let accepted = role(t.accepted, RGBColor(17, 99, 41));
    let rejected = role(t.rejected, RGBColor(207, 34, 46));
    let risky = role(t.risky, RGBColor(188, 76, 0));
    let correction = role(t.correction, RGBColor(154, 103, 0));
    let continuation = role(t.continuation, RGBColor(9, 105, 218));
    let bonus = role(t.bonus, RGBColor(130, 80, 223));
    let reused = role(t.reused, RGBColor(27, 124, 131));
    Palette {
        text: role(t.text, RGBColor(0, 0, 0)),
        dim: role(t.dim, RGBColor(140, 149, 159)),
        accepted,
        rejected,
        risky,
        correction,
        continuation,
        hit: role(t.hit, accepted),
        series: vec![
            continuation,
            accepted,
            risky,
            bonus,
            correction,
            reused,
            rejected,
        ],
    }
}
