//! The figures of rounds, each a function from its data to an SVG string: tokens
//! advanced, per-position acceptance, block sizes and branch rows.

use super::*;

/// Figure 1: share of rounds by tokens advanced, one panel per family, full blocks
/// stacked on top in the accepted colour, the rest (a rejection) in the rejected one.
pub fn acceptance(a: &Acceptance, caption: &str, pal: &Palette) -> Result<String> {
    svg(|root| {
        let total = a.total();
        let title = format!(
            "Tokens advanced per round: {}\n{} rounds; advancing > 16 tokens: {:.1}%; first rejection within the first 8 positions: {:.1}%",
            a.what,
            total.rounds(),
            100.0 * total.share_above(16),
            100.0 * total.share_failing_within(8)
        );
        let body = frame(root, &title, caption, pal)?;
        let n = a.families.len().max(1);
        let panels = body.split_evenly((n, 1));
        let max_a = a
            .families
            .iter()
            .map(|h| h.full.len())
            .max()
            .unwrap_or(2)
            .max(2);
        for (k, (h, area)) in a.families.iter().zip(&panels).enumerate() {
            let rounds = h.rounds().max(1) as f64;
            let top = (0..h.full.len())
                .map(|i| (h.full[i] + h.partial[i]) as f64 / rounds)
                .fold(0.0, f64::max)
                .max(0.05);
            // The panels share the x axis: only the last one names it, below its own
            // tick labels, so no axis title runs into the next panel's ticks.
            let last = k + 1 == n;
            let mut chart = ChartBuilder::on(area)
                .margin(6)
                .x_label_area_size(if last { 40 } else { 22 })
                .y_label_area_size(56)
                .build_cartesian_2d(0.5f64..max_a as f64 - 0.5, 0f64..top * 1.15)
                .map_err(err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .light_line_style(WHITE)
                .x_label_formatter(&|v| {
                    if (v - v.round()).abs() > 1e-6 {
                        String::new()
                    } else {
                        format!("{v:.0}")
                    }
                })
                .x_desc(if last {
                    "tokens advanced (accepted drafts + 1)"
                } else {
                    ""
                })
                .y_desc(format!("{} rounds", h.label))
                .y_label_formatter(&|v| format!("{:.0}%", 100.0 * v))
                .axis_desc_style((FONT, 13))
                .draw()
                .map_err(err)?;
            for i in 1..h.full.len() {
                let (p, f) = (h.partial[i] as f64 / rounds, h.full[i] as f64 / rounds);
                let x = i as f64;
                if p > 0.0 {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(x - 0.4, 0.0), (x + 0.4, p)],
                            pal.rejected.mix(0.55).filled(),
                        )))
                        .map_err(err)?;
                }
                if f > 0.0 {
                    // Full blocks: solid fill and a heavy outline, told apart without colour.
                    chart
                        .draw_series([
                            Rectangle::new([(x - 0.4, p), (x + 0.4, p + f)], pal.accepted.filled()),
                            Rectangle::new([(x - 0.4, p), (x + 0.4, p + f)], BLACK.stroke_width(2)),
                        ])
                        .map_err(err)?;
                }
            }
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(err)?
                .label("full block (outlined)")
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], pal.accepted.filled())
                });
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(err)?
                .label("ended by a rejection")
                .legend(move |(x, y)| {
                    Rectangle::new(
                        [(x, y - 5), (x + 14, y + 5)],
                        pal.rejected.mix(0.55).filled(),
                    )
                });
            if k == 0 {
                // The side whose upper half holds less of the bars: the legend covers
                // none of the tall ones.
                let half = h.full.len() / 2;
                let tall = |r: std::ops::Range<usize>| {
                    r.filter(|&i| (h.full[i] + h.partial[i]) as f64 / rounds > top * 0.5)
                        .count()
                };
                let at = if tall(0..half) <= tall(half..h.full.len()) {
                    SeriesLabelPosition::UpperLeft
                } else {
                    SeriesLabelPosition::UpperRight
                };
                legend(&mut chart, at, pal)?;
            }
        }
        Ok(())
    })
}

/// Figure 2 draws a position only when this many rounds reached it: a rate from a
/// handful of rounds is noise drawn as a cliff.
const MIN_REACHED: usize = 10;

/// Figure 2: P(position i accepted | reached), one line per block size.
pub fn positions(
    curves: &[PositionCurve],
    what: &str,
    caption: &str,
    pal: &Palette,
) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            &format!(
                "Per-position acceptance: P(position i accepted | reached), {what}\n(positions reached by at least {MIN_REACHED} rounds)"
            ),
            caption,
            pal,
        )?;
        // Positions fewer than MIN_REACHED rounds reached are left out, and the legend
        // says how many rounds each block size had.
        let series: Vec<Series> = curves
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let rounds = c.points.first()?.2;
                let points: Vec<(f64, f64)> = c
                    .points
                    .iter()
                    .filter(|p| p.2 >= MIN_REACHED)
                    .map(|p| (p.0 as f64, p.1))
                    .collect();
                (!points.is_empty()).then(|| Series {
                    label: format!("B = {} ({rounds} rounds)", c.block),
                    color: pal.series(i),
                    points,
                    thin: false,
                    marker: Some(i),
                })
            })
            .collect();
        let max_pos = curves.iter().map(|c| c.block).max().unwrap_or(2) as f64;
        lines(
            &Lines {
                title: String::new(),
                x_desc: "block position i (1 = first drafted token)",
                y_desc: "accepted when reached",
                x: 0.5..max_pos - 0.5,
                y: 0.0..1.05,
                log_x: false,
                percent_y: true,
            },
            &series,
            &body,
            pal,
        )
    })
}

/// Figure 5: block sizes chosen, as stacked shares per concurrency (a bench), or per
/// round over a session (a recording).
pub fn block_shares(b: &BlockShares, caption: &str, pal: &Palette) -> Result<String> {
    svg(|root| {
        let body = frame(root, &shares_title(b), caption, pal)?;
        let mut blocks: Vec<usize> = b
            .by_c
            .iter()
            .chain(&b.paper)
            .flat_map(|(_, s)| s.iter().map(|x| x.0))
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let n = b.by_c.len();
        let mut chart = ChartBuilder::on(&body)
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(60)
            // A column right of the bars holds the legend, so it covers none of them.
            // (wider by the paper's bars' room where they are drawn)
            .build_cartesian_2d(
                -0.5f64..n as f64 + if b.paper.is_empty() { 0.4 } else { 1.0 },
                0f64..1.0,
            )
            .map_err(err)?;
        let labels: Vec<String> = b.by_c.iter().map(|(c, _)| format!("C = {c}")).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n + 1 + usize::from(!b.paper.is_empty()))
            .x_label_formatter(&|v| category(&labels, *v))
            .y_desc(if b.paper.is_empty() {
                "share of rounds (smallest B at the bottom)"
            } else {
                "ours: share of rounds; paper (narrow, pale): of requests"
            })
            .y_label_formatter(&|v| format!("{:.0}%", 100.0 * v))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(err)?;
        for (k, &block) in blocks.iter().enumerate() {
            let color = pal.series(k);
            let fill = color.mix(if k % 2 == 0 { 0.9 } else { 0.45 }).filled();
            let rects: Vec<Rectangle<(f64, f64)>> = b
                .by_c
                .iter()
                .enumerate()
                .filter_map(|(i, (_, shares))| {
                    let below: f64 = shares.iter().filter(|x| x.0 < block).map(|x| x.1).sum();
                    let own = shares.iter().find(|x| x.0 == block)?.1;
                    let x = i as f64;
                    let right = if b.paper.is_empty() { 0.35 } else { 0.15 };
                    let at = [(x - 0.35, below), (x + right, below + own)];
                    // An outline parts segments whose colours a grey print merges.
                    Some([
                        Rectangle::new(at, fill),
                        Rectangle::new(at, BLACK.stroke_width(1)),
                    ])
                })
                .flatten()
                .collect();
            // The size written on each segment that has room: readable without colour.
            let texts: Vec<Text<(f64, f64), String>> = b
                .by_c
                .iter()
                .enumerate()
                .filter_map(|(i, (_, shares))| {
                    let below: f64 = shares.iter().filter(|x| x.0 < block).map(|x| x.1).sum();
                    let own = shares.iter().find(|x| x.0 == block)?.1;
                    (own > 0.06).then(|| {
                        Text::new(
                            format!("B={block}"),
                            (i as f64 - 0.1, below + own / 2.0),
                            (FONT, 12).into_font().color(&pal.text),
                        )
                    })
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(if block == 1 {
                    "B = 1 (AR step)".to_string()
                } else {
                    format!("B = {block}")
                })
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], fill));
            chart.draw_series(texts).map_err(err)?;
            // The paper's share at the loads it gives: a narrow pale bar on the right.
            chart
                .draw_series(paper_bars(b, block, color))
                .map_err(err)?;
        }
        // Each paper bar named on it.
        let names = b.paper.iter().filter_map(|(c, _)| {
            let i = b.by_c.iter().position(|(bc, _)| bc == c)?;
            Some(Text::new(
                "paper".to_string(),
                (i as f64 + 0.21, 0.97),
                (FONT, 11).into_font().color(&pal.text),
            ))
        });
        chart.draw_series(names).map_err(err)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight, pal)?;
        Ok(())
    })
}

/// The block-share figure's title: beside the paper's where it has them.
fn shares_title(b: &BlockShares) -> String {
    if b.paper.is_empty() {
        format!("Block sizes chosen by {} against concurrency", b.config)
    } else {
        format!(
            "Block sizes chosen by {} ({}) beside the paper's",
            b.config,
            crate::sim::LABEL
        )
    }
}

/// The paper's segments of size `block`: fill and outline, right of our bar.
fn paper_bars(b: &BlockShares, block: usize, color: RGBColor) -> Vec<Rectangle<(f64, f64)>> {
    b.paper
        .iter()
        .filter_map(|(c, shares)| {
            let i = b.by_c.iter().position(|(bc, _)| bc == c)?;
            let below: f64 = shares.iter().filter(|x| x.0 < block).map(|x| x.1).sum();
            let own = shares.iter().find(|x| x.0 == block)?.1;
            let x = i as f64;
            let at = [(x + 0.2, below), (x + 0.4, below + own)];
            Some([
                Rectangle::new(at, color.mix(0.3).filled()),
                Rectangle::new(at, BLACK.stroke_width(1)),
            ])
        })
        .flatten()
        .collect()
}

/// Most requests the block timeline names in a legend.
const LEGEND_MOST: usize = 8;

/// Figure 5 from a recording: each round's block size in session order, by request.
pub fn block_timeline(
    t: &[(u64, Vec<(usize, usize)>)],
    caption: &str,
    pal: &Palette,
) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            "Block size of every round over the session",
            caption,
            pal,
        )?;
        // Requests take turns in colour and marker; a legend names them only while
        // it stays short (a session of 30 requests would cover the plot).
        let named = t.len() <= LEGEND_MOST;
        let series: Vec<Series> = t
            .iter()
            .enumerate()
            .map(|(i, (req, pts))| {
                let points = pts.iter().map(|&(r, b)| (r as f64, b as f64)).collect();
                let label = if named {
                    format!("request {req}")
                } else {
                    String::new()
                };
                Series {
                    thin: true,
                    ..Series::nth(i, label, points, pal)
                }
            })
            .collect();
        let x = range(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            true,
        );
        let top = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        let y = 0.0..top * 1.1;
        lines(
            &Lines {
                title: if named {
                    String::new()
                } else {
                    format!("{} requests, one colour and marker each in turn", t.len())
                },
                x_desc: "round (session order)",
                y_desc: "block size B",
                x,
                y,
                log_x: false,
                percent_y: false,
            },
            &series,
            &body,
            pal,
        )
    })
}

/// Figure 6: branch rows built and reused by kind (left), and the draft at its first
/// rejection (right: margin histogram, split by whether the verifier took the draft's
/// second choice).
#[allow(clippy::too_many_lines)] // two panels of one figure sharing their axes
pub fn branches(
    b: &Branches,
    reject: Option<&FirstReject>,
    risk_threshold: f32,
    caption: &str,
    pal: &Palette,
) -> Result<String> {
    svg(|root| {
        let mut title = match reject {
            Some(_) => format!("Branch rows and the first rejection: {}", b.what),
            // A bench records no draft margins: the second panel needs a recording.
            None => format!("Branch rows: {}", b.what),
        };
        if let Some(r) = reject {
            title.push_str(&format!(
                "\n{} rejections: the verifier took the draft's 2nd choice in {:.0}%; the draft's margin was below {risk_threshold} in {:.0}%",
                r.rejects(),
                100.0 * r.second_share(),
                100.0 * r.below(risk_threshold)
            ));
        }
        let body = frame(root, &title, caption, pal)?;
        let panels = body.split_evenly((1, if reject.is_some() { 2 } else { 1 }));
        let n = b.kinds.len();
        let mut chart = ChartBuilder::on(&panels[0])
            .margin(8)
            .caption(
                "hit rate by branch kind",
                (FONT, 15).into_font().color(&pal.text),
            )
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..n.max(1) as f64 - 0.5, 0f64..1.0)
            .map_err(err)?;
        let labels: Vec<String> = b.kinds.iter().map(|k| k.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n.max(1))
            .x_label_formatter(&|v| category(&labels, *v))
            .y_desc("rows reused / rows built")
            .y_label_formatter(&|v| format!("{:.0}%", 100.0 * v))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(err)?;
        for (i, (label, built, hits)) in b.kinds.iter().enumerate() {
            let rate = *hits as f64 / (*built).max(1) as f64;
            let color = if label.contains("continuation") {
                pal.continuation
            } else {
                pal.correction
            };
            let x = i as f64;
            chart
                .draw_series([
                    Rectangle::new([(x - 0.3, 0.0), (x + 0.3, rate)], color.filled()),
                    Rectangle::new([(x - 0.3, 0.0), (x + 0.3, rate)], BLACK.stroke_width(1)),
                ])
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{hits}/{built}"),
                    (x - 0.15, (rate + 0.04).min(0.95)),
                    (FONT, 12).into_font().color(&pal.text),
                )))
                .map_err(err)?;
        }
        if let Some(r) = reject {
            let bins = 10usize;
            let hist = |m: &[f32]| -> Vec<f64> {
                let mut h = vec![0f64; bins];
                for &x in m {
                    let k = ((x.clamp(0.0, 0.9999) * bins as f32) as usize).min(bins - 1);
                    h[k] += 1.0;
                }
                let n = r.rejects().max(1) as f64;
                h.iter().map(|c| c / n).collect()
            };
            let (right, wrong) = (hist(&r.second_right), hist(&r.second_wrong));
            let top = right
                .iter()
                .zip(&wrong)
                .map(|(a, b)| a + b)
                .fold(0.0, f64::max)
                .max(0.05);
            let mut chart = ChartBuilder::on(&panels[1])
                .margin(8)
                .caption(
                    "draft margin at the first rejection",
                    (FONT, 15).into_font().color(&pal.text),
                )
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(0f64..1.0, 0f64..top * 1.15)
                .map_err(err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .light_line_style(WHITE)
                .x_desc("draft margin p1 − p2 at the rejected position")
                .y_desc("share of rejections")
                .y_label_formatter(&|v| format!("{:.0}%", 100.0 * v))
                .axis_desc_style((FONT, 13))
                .draw()
                .map_err(err)?;
            let w = 1.0 / bins as f64;
            let bars =
                |lower: &[f64], own: &[f64], color: ShapeStyle| -> Vec<Rectangle<(f64, f64)>> {
                    own.iter()
                        .enumerate()
                        .filter(|(_, v)| **v > 0.0)
                        .map(|(k, v)| {
                            let x = k as f64 * w;
                            let base = lower.get(k).copied().unwrap_or(0.0);
                            Rectangle::new([(x + 0.1 * w, base), (x + 0.9 * w, base + v)], color)
                        })
                        .collect()
                };
            let risky = pal.risky;
            let rejected = pal.rejected;
            chart
                .draw_series(bars(&[], &right, risky.filled()))
                .map_err(err)?
                .label("verifier took the draft's 2nd choice (solid)")
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], risky.filled())
                });
            chart
                .draw_series(bars(&right, &wrong, rejected.stroke_width(2)))
                .map_err(err)?
                .label("something else (outlined)")
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], rejected.stroke_width(2))
                });
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (risk_threshold as f64, 0.0),
                        (risk_threshold as f64, top * 1.1),
                    ],
                    pal.dim.stroke_width(1),
                )))
                .map_err(err)?;
            legend(&mut chart, SeriesLabelPosition::UpperRight, pal)?;
        }
        Ok(())
    })
}

/// The label of the category bar at `v` on an axis of categories 0, 1, … (none
/// between them).
fn category(labels: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() < 1e-6 && i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}
