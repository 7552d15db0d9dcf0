//! Acceptance history: per-round bars coloured by outcome, the block-size timeline,
//! an acceptance histogram per prompt family, branch hit rates, TPF and tokens/s over
//! time.

use std::collections::VecDeque;

use ratatui::buffer::Buffer;
use ratatui::layout::{Margin, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::pane;
use super::text::Fit;
use crate::engine::Tally;
use crate::trace::summary::FamilyStats;
use crate::tui::state::{RoundView, Sample, State};
use crate::tui::theme::Theme;

/// Drafting against AR steps here, as the history pane says it in one line of
/// `width` columns: which is faster and by how much, whether the AR side was
/// measured or priced, and where the help says why (None until measured).
pub fn speed_line(s: &State, width: usize) -> Option<(String, bool)> {
    let (long, pays) = speed_words(s)?;
    let c = s.stats.speed.comparison()?;
    // Every form says whether the AR side was measured or priced: a priced ratio read
    // as a measured one would claim a measurement nobody made. "F1 →" is the help's
    // second page, whose first lines are the words below.
    let short = if c.ar_measured { "measured" } else { "priced" };
    let (by, dir) = direction(c.ratio);
    // The longest form that fits, else the shortest.
    let forms = if (by - 1.0).abs() < 0.005 {
        vec![
            long,
            format!("drafting as fast as {short} AR steps (F1 →: why)"),
            format!("drafting as fast as {short} AR (F1 →)"),
            format!("as fast as {short} AR"),
        ]
    } else {
        vec![
            long,
            format!("drafting {by:.2}× {dir} than {short} AR steps (F1 →: why)"),
            format!("drafting {by:.2}× {dir}, {short} AR (F1 →)"),
            format!("drafting {by:.2}× {dir}, {short} AR"),
            format!("{by:.1}× {dir}, {short} AR"),
        ]
    };
    let fits = forms.iter().position(|f| f.width() <= width);
    let text = forms[fits.unwrap_or(forms.len() - 1)].clone();
    Some((text, pays))
}

/// How many times faster or slower drafting is than AR steps, for a ratio of their
/// tokens per ms (a factor ≥ 1 either way: "0.19×" reads as neither).
fn direction(ratio: f64) -> (f64, &'static str) {
    if ratio > 1.0 {
        (ratio, "faster")
    } else {
        (1.0 / ratio.max(1e-9), "slower")
    }
}

fn how_measured(ar_measured: bool) -> &'static str {
    if ar_measured {
        "both measured"
    } else {
        "AR steps priced by the cost model"
    }
}

/// Drafting against AR steps here in a sentence, from the same figures as the
/// history pane's line (None until measured, and for a simulated backbone, whose
/// forwards take no model's time).
pub fn speed_words(s: &State) -> Option<(String, bool)> {
    if s.session.untimed() {
        return None;
    }
    let c = s.stats.speed.comparison()?;
    let how = how_measured(c.ar_measured);
    let (by, _) = direction(c.ratio);
    // Within rounding of 1: neither faster nor slower, and so no gain.
    let even = (by - 1.0).abs() < 0.005;
    let pays = c.ratio > 1.0 && !even;
    let text = if even {
        format!(
            "Drafting makes tokens as fast as AR steps on this machine ({how}): a forward here is compute-bound; speculation pays where it is memory-bound (a GPU, a large model)."
        )
    } else if pays {
        format!(
            "Drafting makes tokens {by:.2}× faster than AR steps on this machine ({how}): speculation pays here."
        )
    } else {
        format!(
            "Drafting makes tokens {by:.2}× slower than AR steps on this machine ({how}): a forward here is compute-bound; speculation pays where it is memory-bound (a GPU, a large model)."
        )
    };
    Some((text, pays))
}

const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Histogram buckets of acceptance length, each with its label.
const BUCKETS: [(usize, usize, &str); 7] = [
    (1, 1, "1"),
    (2, 2, "2"),
    (3, 4, "≤4"),
    (5, 8, "≤8"),
    (9, 16, "≤16"),
    (17, 32, "≤32"),
    (33, usize::MAX, ">32"),
];
/// Rounds a rate is averaged over in the timeline.
const WINDOW: usize = 8;

/// Bar style of a round: reused block, full block, or the rest (a reject, or the
/// answer's end inside the block).
pub fn bar_style(r: &RoundView, t: &Theme) -> Style {
    if let Some(share) = r.ar_agreement() {
        // Block diffusion: whole when AR would have said every token.
        return if share >= 1.0 {
            t.bar_full
        } else {
            t.bar_partial
        };
    }
    if let Some(i) = &r.imported {
        // The whole block emitted (drafts and the verifier's token).
        return if i.emitted() >= i.block() {
            t.bar_full
        } else {
            t.bar_partial
        };
    }
    if r.reused.is_some() {
        t.bar_reused
    } else if r.verdict.as_ref().is_some_and(|v| v.first_reject.is_none()) && !r.ended() {
        t.bar_full
    } else {
        t.bar_partial
    }
}

fn block_glyph(b: usize) -> char {
    match b {
        0 | 1 => '·',
        2..=4 => '▂',
        5..=8 => '▃',
        9..=16 => '▅',
        _ => '█',
    }
}

/// Sparkline of values scaled to their maximum.
pub fn sparkline(values: &[f64], width: usize) -> String {
    let vals = &values[values.len().saturating_sub(width)..];
    let max = vals.iter().copied().fold(0.0f64, f64::max);
    vals.iter()
        .map(|v| {
            if max <= 0.0 {
                EIGHTHS[0]
            } else {
                EIGHTHS[((v / max) * 8.0).round().clamp(1.0, 8.0) as usize]
            }
        })
        .collect()
}

/// Windowed TPF and tokens/s after each of the last `last` rounds (a frame draws only
/// those, so a long session costs no more per frame than a short one).
pub fn rates(samples: &VecDeque<Sample>, last: usize) -> (Vec<f64>, Vec<f64>) {
    let mut tpf = Vec::new();
    let mut tps = Vec::new();
    for i in samples.len().saturating_sub(last)..samples.len() {
        let j = i.saturating_sub(WINDOW);
        let (a, b) = (&samples[j], &samples[i]);
        let (a_tok, a_fwd, a_ms, a_all) = if i == j {
            (0, 0, 0.0, 0)
        } else {
            (a.decode_tokens, a.decode_forwards, a.forward_ms, a.tokens)
        };
        let fw = b.decode_forwards.saturating_sub(a_fwd);
        tpf.push(if fw > 0 {
            (b.decode_tokens.saturating_sub(a_tok)) as f64 / fw as f64
        } else {
            0.0
        });
        let ms = b.forward_ms - a_ms;
        tps.push(if ms > 0.0 {
            (b.tokens.saturating_sub(a_all)) as f64 / (ms / 1e3)
        } else {
            0.0
        });
    }
    (tpf, tps)
}

/// Per-round bars: height = tokens kept / block size (block diffusion: the share AR
/// agrees with), 4 rows of eighths.
struct Bars<'a> {
    rounds: &'a [RoundView<'a>],
    highlight: Option<usize>,
    theme: &'a Theme,
}

impl Widget for Bars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let h = usize::from(area.height);
        for (x, r) in self.rounds.iter().enumerate().take(usize::from(area.width)) {
            let frac = match (r.ar_agreement(), r.advance()) {
                (Some(share), _) => share,
                (None, Some(mut adv)) => {
                    // An answer's last round draws what it kept, as its verdict says.
                    if !r.committed.is_empty() {
                        adv = adv.min(r.committed.len());
                    }
                    let b = r.block_size.unwrap_or(r.block.len()).max(1);
                    (adv as f64 / b as f64).clamp(0.0, 1.0)
                }
                (None, None) => continue,
            };
            let mut eighths = (frac * (h * 8) as f64).round() as usize;
            eighths = eighths.max(1);
            let mut style = bar_style(r, self.theme);
            if self.highlight == Some(x) {
                style = style.patch(self.theme.selected);
            }
            for row in 0..h {
                let fill = eighths.saturating_sub(row * 8).min(8);
                let y = area.y + (h - 1 - row) as u16;
                if let Some(cell) = buf.cell_mut((area.x + x as u16, y)) {
                    cell.set_char(EIGHTHS[fill]).set_style(style);
                }
            }
        }
    }
}

/// The pane's title: rounds, tokens a round advanced and the session's TPF, as many
/// as the width holds.
fn title(s: &State, t: &Theme, width: u16) -> Line<'static> {
    let sm = &s.stats.current;
    let n = sm.tally.rounds;
    let (mean, tpf) = (sm.tally.mean_accept(), sm.tpf());
    // Before any round there are no rates to show (a 0.00 would read as measured).
    let measured = |forms: [String; 3]| {
        if n == 0 {
            vec![String::new()]
        } else {
            forms.to_vec()
        }
    };
    Fit::default()
        .part([" history "], t.title)
        .part(
            [format!("· {n} round{} ", if n == 1 { "" } else { "s" })],
            t.title,
        )
        .part(
            measured(if n > 0 && sm.tally.refresh_forwards == n {
                // Every round a diffusion block: nothing was accepted.
                [
                    format!("· {mean:.1} tokens per block "),
                    format!("· {mean:.1} tok/block "),
                    String::new(),
                ]
            } else {
                // Tokens a round advanced, not a rate: said as such at every width.
                [
                    format!("· {mean:.2} tokens per round "),
                    format!("· {mean:.2} tok/round "),
                    format!("· {mean:.1} tok/rd "),
                ]
            }),
            t.title,
        )
        .part(
            measured([
                format!("· TPF {tpf:.2} (session) "),
                String::new(),
                String::new(),
            ]),
            t.title,
        )
        .title(width)
}

/// The colour key and the block-size glyphs, compact where the pane is narrow.
fn legend(diffusing: bool, width: u16, t: &Theme) -> Line<'static> {
    if diffusing && width >= 58 {
        Line::from(vec![
            Span::styled("█ every token =AR  ", t.bar_full),
            Span::styled("█ some ≠AR  ", t.bar_partial),
            Span::styled("block: ·1 ▂4 ▃8 ▅16 █32", t.dim),
        ])
    } else if diffusing {
        Line::from(vec![
            Span::styled("█all =AR ", t.bar_full),
            Span::styled("█some ≠AR ", t.bar_partial),
            Span::styled("B ·1▂4▃8▅16█32", t.dim),
        ])
    } else if width >= 58 {
        Line::from(vec![
            Span::styled("█ full  ", t.bar_full),
            Span::styled("█ reject  ", t.bar_partial),
            Span::styled("█ reused branch  ", t.bar_reused),
            Span::styled("block: ·1 ▂4 ▃8 ▅16 █32", t.dim),
        ])
    } else {
        Line::from(vec![
            Span::styled("█full ", t.bar_full),
            Span::styled("█reject ", t.bar_partial),
            Span::styled("█reused ", t.bar_reused),
            Span::styled("B ·1▂4▃8▅16█32", t.dim),
        ])
    }
}

/// What the branch rows did (built, hit, drafts saved), or for block diffusion what a
/// forward bought and its agreement with AR.
fn branch_line(tally: &Tally, diffusing: bool, width: usize, t: &Theme) -> Line<'static> {
    if tally.ar_judged > 0 && (diffusing || tally.branches.is_empty()) {
        // Block diffusion: what a forward bought, and what it cost in faithfulness.
        let per_forward = crate::engine::events::ratio(
            tally.ar_judged as f64,
            (tally.denoise_forwards + tally.refresh_forwards) as f64,
        );
        Fit::default()
            .ranked(["diffusion ", "diff "], t.dim, 2)
            .ranked([format!("{per_forward:.2} tok/forward ")], t.text, 0)
            .ranked(
                [
                    format!("· AR agrees {:.1}% ", 100.0 * tally.ar_agreement()),
                    format!("· =AR {:.0}% ", 100.0 * tally.ar_agreement()),
                ],
                t.warning,
                1,
            )
            .ranked(["· not lossless", ""], t.dim, 3)
            .line(width)
    } else if tally.branches.is_empty() {
        Line::from(vec![
            Span::styled("branches ", t.dim),
            Span::styled("none built yet", t.dim),
        ])
    } else {
        // The hit rate matters most, then the per-kind counts (the label shortens
        // first for them; they go whole when they still do not fit).
        let kinds: String = tally
            .branches
            .iter()
            .map(|(kind, c)| format!("{kind} {}/{} ", c.hits, c.built))
            .collect();
        let saved = tally.saved_drafts;
        Fit::default()
            .ranked(["branches ", "branch ", "br "], t.dim, 2)
            .ranked([kinds, String::new()], t.text, 1)
            .ranked(
                [format!("· hit {:.0}% ", 100.0 * tally.hit_rate())],
                t.dim,
                0,
            )
            .ranked(
                [
                    format!("· {saved} drafts saved"),
                    format!("· {saved} saved"),
                    String::new(),
                ],
                t.dim,
                3,
            )
            .line(width)
    }
}

/// TPF and tokens per second over the recent rounds, as sparklines.
fn rate_line(s: &State, width: u16, t: &Theme) -> Line<'static> {
    let w = usize::from(width / 2).saturating_sub(22).max(4);
    let (tpf, tps) = rates(&s.stats.samples, w);
    let mut rate = Line::from(vec![
        Span::styled("TPF ", t.dim),
        Span::styled(sparkline(&tpf, w), t.accepted),
        Span::styled(
            tpf.last()
                .map_or(" —  ".to_string(), |v| format!(" {v:.2}  ")),
            t.text,
        ),
    ]);
    // A simulator's tokens per second time the simulator, not a model; an imported
    // log's forwards ran elsewhere.
    if !s.session.untimed() {
        rate.push_span(Span::styled("tok/s ", t.dim));
        rate.push_span(Span::styled(sparkline(&tps, w), t.continuation));
        rate.push_span(Span::styled(
            tps.last().map_or(" —".to_string(), |v| format!(" {v:.0}")),
            t.text,
        ));
    }
    // Said in every form that fits: the status line's TPF is the session's.
    let means = [
        format!(" ({WINDOW}-round means)"),
        format!(" (last {WINDOW})"),
    ];
    if let Some(m) = means
        .into_iter()
        .find(|m| rate.width() + m.width() <= usize::from(width))
    {
        rate.push_span(Span::styled(m, t.dim));
    }
    rate
}

/// One family's acceptance histogram by bucket and its mean.
fn family_line(fam: &str, fs: &FamilyStats, width: usize, t: &Theme) -> Line<'static> {
    let mut spans = vec![Span::styled(format!("{fam:<6} "), t.text)];
    let counts: Vec<usize> = BUCKETS
        .iter()
        .map(|(lo, hi, _)| {
            fs.hist
                .iter()
                .enumerate()
                .filter(|(a, _)| a >= lo && a <= hi)
                .map(|(_, n)| n)
                .sum()
        })
        .collect();
    let max = counts.iter().copied().max().unwrap_or(0).max(1);
    for ((_, _, label), c) in BUCKETS.iter().zip(&counts) {
        let bar = if *c == 0 {
            '·'
        } else {
            EIGHTHS[(c * 8).div_ceil(max).clamp(1, 8)]
        };
        spans.push(Span::styled(label.to_string(), t.dim));
        spans.push(Span::styled(format!("{bar} "), t.accepted));
    }
    // The longest tail that fits: a cut one would misread ("over 4" for 47 rounds).
    let used: usize = spans.iter().map(|x| x.content.width()).sum();
    let room = width.saturating_sub(used);
    let (mean, n) = (fs.mean(), fs.rounds);
    let tail = [
        format!(" mean {mean:.2} over {n} rounds"),
        format!(" mean {mean:.2} ({n})"),
        format!(" mean {mean:.2}"),
    ]
    .into_iter()
    .find(|x| x.width() <= room)
    .unwrap_or_default();
    spans.push(Span::styled(tail, t.dim));
    Line::from(spans)
}

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme) {
    let sm = &s.stats.current;
    let title = title(s, t, area.width);
    f.render_widget(pane(title, t), area);
    let inner = area.inner(Margin::new(1, 1));
    if inner.height < 3 || inner.width < 20 {
        return;
    }
    let label_w = 7u16;
    let plot_w = usize::from(inner.width - label_w);
    // The newest `plot_w` verified rounds, oldest first; borrowed, not cloned (rounds
    // carry top-k detail and this runs every frame).
    let list = &s.rounds.list;
    let mut verified: Vec<(usize, RoundView)> = (0..list.len())
        .rev()
        .map(|i| (i, list[i].view(&s.stats.summary)))
        .filter(|(_, v)| v.settled())
        .take(plot_w)
        .collect();
    verified.reverse();
    let (verified, shown): (Vec<usize>, Vec<RoundView>) = verified.into_iter().unzip();
    let highlight = s
        .rounds
        .view
        .and_then(|v| verified.iter().position(|i| *i == v));

    // Bars (2–4 rows, as height allows), then the block sizes.
    let bar_rows: u16 = match inner.height {
        0..=6 => 1,
        7..=9 => 2,
        _ => 4,
    };
    let label = |f: &mut Frame, y: u16, text: &str| {
        f.render_widget(
            Paragraph::new(Line::styled(text.to_string(), t.dim)),
            Rect::new(inner.x, inner.y + y, label_w, 1),
        );
    };
    // Bar height is tokens advanced ÷ block size (F1's "history bars"); for block
    // diffusion, the share of the block AR would have emitted.
    let diffusing = shown.last().is_some_and(RoundView::diffusing);
    label(f, 0, if diffusing { "=AR" } else { "adv/B" });
    f.render_widget(
        Bars {
            rounds: &shown,
            highlight,
            theme: t,
        },
        Rect::new(inner.x + label_w, inner.y, plot_w as u16, bar_rows),
    );
    label(f, bar_rows, "block");
    let blocks: String = shown.iter().map(|r| block_glyph(r.size())).collect();
    f.render_widget(
        Paragraph::new(Line::styled(blocks, t.dim)),
        Rect::new(inner.x + label_w, inner.y + bar_rows, plot_w as u16, 1),
    );

    let mut lines: Vec<Line> = Vec::new();
    if let Some((words, pays)) = speed_line(s, usize::from(inner.width)) {
        lines.push(Line::styled(
            words,
            if pays { t.accepted } else { t.warning },
        ));
    }
    lines.push(legend(diffusing, inner.width, t));

    lines.push(branch_line(
        &sm.tally,
        diffusing,
        usize::from(inner.width),
        t,
    ));

    lines.push(rate_line(s, inner.width, t));

    for (fam, fs) in &sm.families {
        lines.push(family_line(fam, fs, usize::from(inner.width), t));
    }
    let top = bar_rows + 1;
    if inner.height > top {
        let rest = Rect::new(inner.x, inner.y + top, inner.width, inner.height - top);
        f.render_widget(Paragraph::new(lines), rest);
    }
}
