//! The figures drawn with plotters into SVG strings. Colours come from the screen's
//! theme roles (accepted, rejected, risky, branch kinds); every series also has its own
//! marker or pattern, so a figure reads in black and white.

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::{
    Acceptance, BlockShares, Branches, ConcurrencySeries, FirstReject, Latency, PositionCurve,
};

pub const SIZE: (u32, u32) = (900, 560);
const FONT: &str = "sans-serif";

/// The colours of figures, by role (the command line derives them from a terminal
/// theme, so figures and screen agree).
#[derive(Debug, Clone)]
pub struct Palette {
    pub text: RGBColor,
    pub dim: RGBColor,
    pub accepted: RGBColor,
    pub rejected: RGBColor,
    pub risky: RGBColor,
    pub correction: RGBColor,
    pub continuation: RGBColor,
    pub hit: RGBColor,
    /// Colours for series with no role of their own, in order.
    pub series: Vec<RGBColor>,
}

impl Palette {
    fn series(&self, i: usize) -> RGBColor {
        self.series[i % self.series.len()]
    }
}

/// The series legend every figure draws: boxed on white, in the theme's dim ink.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
    pal: &Palette,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(pal.dim)
        .label_font((FONT, 12))
        .draw()
        .map_err(err)?;
    Ok(())
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the figure: {e}")
}

/// Marker glyphs, one per series in turn (shapes, not colour alone, tell series apart).
const GLYPHS: [&str; 6] = ["●", "▲", "■", "◆", "✕", "○"];

/// A marker for series `i` at `at`.
fn marker<C>(i: usize, at: C, color: RGBColor) -> Text<'static, C, &'static str> {
    glyph(GLYPHS[i % GLYPHS.len()], at, color)
}

fn glyph<C>(g: &'static str, at: C, color: RGBColor) -> Text<'static, C, &'static str> {
    let centre = Pos::new(HPos::Center, VPos::Center);
    Text::new(g, at, (FONT, 14).into_font().color(&color).pos(centre))
}

/// Splits `text` into lines of at most `width` characters at `sep` boundaries; a part
/// longer than a line (a long command) is split again at spaces.
fn wrap(text: &str, width: usize, sep: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for line in wrap_parts(text, width, sep) {
        if sep != " " && line.chars().count() > width {
            lines.extend(wrap_parts(&line, width, " "));
        } else {
            lines.push(line);
        }
    }
    lines
}

fn wrap_parts(text: &str, width: usize, sep: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    for (i, part) in text.split(sep).enumerate() {
        let last = lines.last_mut().expect("one line at least");
        let piece = if i == 0 {
            part.to_string()
        } else {
            format!("{sep}{part}")
        };
        if !last.is_empty() && last.chars().count() + piece.chars().count() > width {
            lines.push(piece.trim_start_matches(sep).to_string());
        } else {
            last.push_str(&piece);
        }
    }
    lines
}

/// The figure's frame: the title (and a subtitle) centred at the top, the caption (its
/// source) at the bottom, wrapped; returns the area between.
fn frame<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    caption: &str,
    pal: &Palette,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>> {
    root.fill(&WHITE).map_err(err)?;
    let (w, h) = root.dim_in_pixel();
    let titles: Vec<&str> = title.lines().collect();
    let head_h = 12 + 24 * titles.len() as u32;
    let (head, rest) = root.split_vertically(head_h);
    let centre = Pos::new(HPos::Center, VPos::Top);
    for (i, line) in titles.iter().enumerate() {
        let size = if i == 0 { 20 } else { 14 };
        head.draw(&Text::new(
            line.to_string(),
            (w as i32 / 2, 8 + 24 * i as i32),
            (FONT, size).into_font().color(&pal.text).pos(centre),
        ))
        .map_err(err)?;
    }
    let lines = wrap(caption, (w / 7) as usize, " · ");
    let foot_h = 10 + 16 * lines.len() as u32;
    let (body, foot) = rest.split_vertically(h.saturating_sub(head_h + foot_h));
    for (i, line) in lines.iter().enumerate() {
        foot.draw(&Text::new(
            line.clone(),
            (10, 4 + 16 * i as i32),
            (FONT, 12).into_font().color(&pal.dim),
        ))
        .map_err(err)?;
    }
    Ok(body)
}

fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// A line chart of several series with markers.
struct Lines<'a> {
    title: String,
    x_desc: &'a str,
    y_desc: &'a str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    log_x: bool,
    percent_y: bool,
}

/// One line of a line chart.
struct Series {
    label: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
    /// Thin (a baseline or a model), else heavy.
    thin: bool,
    /// Marker shape index, or none (a fitted curve).
    marker: Option<usize>,
}

impl Series {
    /// The `i`-th line of a chart: the palette's `i`-th colour and marker, heavy.
    fn nth(i: usize, label: String, points: Vec<(f64, f64)>, pal: &Palette) -> Self {
        Series {
            label,
            color: pal.series(i),
            points,
            thin: false,
            marker: Some(i),
        }
    }
}

fn lines(
    l: &Lines,
    series: &[Series],
    area: &DrawingArea<SVGBackend, Shift>,
    pal: &Palette,
) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    // The plot inside the margins, caption and label areas below.
    let plot = (w.saturating_sub(76), h.saturating_sub(80));
    let (at, y_top) = legend_place(series, l, plot);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .caption(&l.title, (FONT, 15).into_font().color(&pal.text))
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(l.x.clone(), l.y.start..y_top)
        .map_err(err)?;
    let log_x = l.log_x;
    let percent = l.percent_y;
    let fine_y = l.y.end - l.y.start < 20.0;
    chart
        .configure_mesh()
        .x_desc(l.x_desc)
        .y_desc(l.y_desc)
        .light_line_style(WHITE)
        .x_label_formatter(&|v| {
            // Whole values only (powers of two on a log axis).
            if (v - v.round()).abs() > 1e-6 {
                String::new()
            } else if log_x {
                format!("{:.0}", v.round().exp2())
            } else {
                format!("{v:.0}")
            }
        })
        .y_label_formatter(&|v| {
            if percent && *v > 1.0 + 1e-9 {
                // Room made for the legend, not a share.
                String::new()
            } else if percent {
                format!("{:.0}%", 100.0 * v)
            } else if fine_y {
                format!("{v:.2}")
            } else {
                format!("{v:.0}")
            }
        })
        .axis_desc_style((FONT, 13))
        .draw()
        .map_err(err)?;
    for s in series {
        let color = s.color;
        let style = if s.thin {
            color.stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        let xs: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (if log_x { x.max(1e-9).log2() } else { x }, y))
            .collect();
        let line = LineSeries::new(xs.clone(), style);
        // A series without a label stays out of the legend.
        if s.label.is_empty() {
            chart.draw_series(line).map_err(err)?;
        } else {
            chart
                .draw_series(line)
                .map_err(err)?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    // A fitted curve's legend has no marker: a blank one keeps one type.
                    let glyph = match s.marker {
                        Some(m) => marker(m, (0, 0), color),
                        None => glyph("", (0, 0), color),
                    };
                    EmptyElement::at((x + 10, y))
                        + PathElement::new(vec![(-10, 0), (10, 0)], style)
                        + glyph
                });
        }
        if let Some(m) = s.marker {
            chart
                .draw_series(xs.iter().map(|&p| marker(m, p, color)))
                .map_err(err)?;
        }
    }
    if series.iter().any(|s| !s.label.is_empty()) {
        legend(&mut chart, at, pal)?;
    }
    Ok(())
}

/// Where a line chart's legend covers least of the data: the corner whose legend box
/// (estimated from the labels in pixels of `plot`) holds the fewest points of the lines,
/// sampled along each segment. When every corner covers some, the y axis grows upward
/// until the data sits below an upper legend. Returns the corner and the y axis top.
fn legend_place(series: &[Series], l: &Lines, plot: (u32, u32)) -> (SeriesLabelPosition, f64) {
    let chars = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    let named = series.iter().filter(|s| !s.label.is_empty()).count();
    if named == 0 {
        return (SeriesLabelPosition::UpperRight, l.y.end);
    }
    let (pw, ph) = (plot.0.max(1) as f64, plot.1.max(1) as f64);
    let bw = ((44.0 + 6.2 * chars as f64) / pw).min(0.95);
    let bh = ((10.0 + 16.0 * named as f64) / ph).min(0.9);
    let (x, y) = (&l.x, &l.y);
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for s in series {
        let xy: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(px, py)| {
                let px = if l.log_x { px.max(1e-9).log2() } else { px };
                (
                    (px - x.start) / (x.end - x.start),
                    (py - y.start) / (y.end - y.start),
                )
            })
            .collect();
        pts.extend(xy.iter().copied());
        for w in xy.windows(2) {
            pts.extend((1..16).map(|k| {
                let t = k as f64 / 16.0;
                (
                    w[0].0 + t * (w[1].0 - w[0].0),
                    w[0].1 + t * (w[1].1 - w[0].1),
                )
            }));
        }
    }
    let covered = |left: bool, upper: bool| {
        pts.iter()
            .filter(|&&(fx, fy)| {
                let in_x = if left { fx <= bw } else { fx >= 1.0 - bw };
                let in_y = if upper { fy >= 1.0 - bh } else { fy <= bh };
                in_x && in_y
            })
            .count()
    };
    let corners = [
        (SeriesLabelPosition::UpperLeft, true, true),
        (SeriesLabelPosition::UpperRight, false, true),
        (SeriesLabelPosition::LowerRight, false, false),
        (SeriesLabelPosition::LowerLeft, true, false),
    ];
    let counts: Vec<usize> = corners.iter().map(|c| covered(c.1, c.2)).collect();
    let best = (0..4).min_by_key(|&i| counts[i]).unwrap_or(0);
    if counts[best] == 0 {
        return (corners[best].0.clone(), y.end);
    }
    // Every corner covers data: keep the upper corner covering less, and raise the top
    // so the highest point ends below the box.
    let upper = if counts[1] < counts[0] { 1 } else { 0 };
    let high = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let top = y.start + (y.end - y.start) * high / (1.0 - bh - 0.03).max(0.1);
    (corners[upper].0.clone(), top.max(y.end))
}

fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    let lo = if from_zero { 0.0f64.min(lo) } else { lo };
    let pad = ((hi - lo) * 0.08).max(1e-3);
    (lo - if from_zero { 0.0 } else { pad })..(hi + pad)
}

mod rounds;
mod speed;
pub use rounds::*;
pub use speed::*;

#[cfg(test)]
mod tests {
    use super::{legend_place, wrap, Lines, Series};
    use plotters::prelude::{SeriesLabelPosition, BLACK};

    fn line(points: &[(f64, f64)]) -> Series {
        Series {
            label: "a series".into(),
            color: BLACK,
            points: points.to_vec(),
            thin: false,
            marker: Some(0),
        }
    }

    #[test]
    fn the_legend_goes_where_the_lines_are_not() {
        let l = Lines {
            title: String::new(),
            x_desc: "",
            y_desc: "",
            x: 0.0..10.0,
            y: 0.0..1.0,
            log_x: false,
            percent_y: true,
        };
        // High on the left, low on the right: the upper right corner is free.
        let falling = [line(&[(0.0, 0.95), (10.0, 0.05)])];
        assert_eq!(
            legend_place(&falling, &l, (800, 400)),
            (SeriesLabelPosition::UpperRight, 1.0)
        );
        // Lines through all four corners: an upper corner, above a raised top.
        let cross = [
            line(&[(0.0, 0.95), (10.0, 0.05)]),
            line(&[(0.0, 0.05), (10.0, 0.95)]),
        ];
        let (at, top) = legend_place(&cross, &l, (800, 400));
        assert_eq!(at, SeriesLabelPosition::UpperLeft);
        let box_share = (10.0 + 16.0 * 2.0) / 400.0;
        assert!(
            0.95 / top <= 1.0 - box_share,
            "the highest point ends below the legend: top {top}"
        );
    }

    #[test]
    fn captions_wrap_at_separators_and_long_commands_at_spaces() {
        let cmd =
            "source: `specscope bench --configs ar,linear --blocks 8,16,32 --concurrency 1,2,4`";
        let lines = wrap(&format!("{cmd} · model: m · date: d"), 40, " · ");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        let words = |t: &str| {
            t.replace(" · ", " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            words(&lines.join(" ")),
            words(&format!("{cmd} · model: m · date: d"))
        );
        assert_eq!(wrap("a · b", 40, " · "), vec!["a · b".to_string()]);
    }
}
