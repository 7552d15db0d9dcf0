//! The figures of speed, each a function from its data to an SVG string: forward
//! latency, throughput and TPF against concurrency, RecGuide over each fixed block,
//! and block diffusion's speed against its faithfulness.

use super::*;

/// Figure 3: forward latency against query tokens per row, one line per row count,
/// measured (markers, solid) and the fitted cost model (thin).
pub fn latency(l: &Latency, caption: &str, pal: &Palette) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            &format!(
                "Forward latency after {} cached positions: measured and the fitted cost model",
                l.cache_len
            ),
            caption,
            pal,
        )?;
        let mut series: Vec<Series> = Vec::new();
        for (i, (rows, pts)) in l.measured.iter().enumerate() {
            let color = pal.series(i);
            series.push(Series {
                label: format!("{rows} row(s), measured"),
                color,
                points: pts.iter().map(|&(t, ms)| (t as f64, ms)).collect(),
                thin: false,
                marker: Some(i),
            });
            series.push(Series {
                label: format!("{rows} row(s), fitted"),
                color,
                points: pts
                    .iter()
                    .map(|&(t, _)| (t as f64, l.fitted.forward_ms(*rows, t, l.cache_len)))
                    .collect(),
                thin: true,
                marker: None,
            });
        }
        let xs = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0.max(1.0).log2()));
        let x = range(xs, false);
        let y = range(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            true,
        );
        lines(
            &Lines {
                title: String::new(),
                x_desc: "query tokens per row (log scale)",
                y_desc: "ms per forward",
                x,
                y,
                log_x: true,
                percent_y: false,
            },
            &series,
            &body,
            pal,
        )
    })
}

/// Figure 4: tokens/s (measured, and modeled where the bench priced it) and TPF
/// against concurrency, one line per configuration; AR and the best LinearSS drawn
/// thin as baselines.
pub fn throughput(s: &[ConcurrencySeries], caption: &str, pal: &Palette) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            "Throughput and tokens per forward against concurrency",
            caption,
            pal,
        )?;
        let modeled = s.iter().any(|x| x.points.iter().any(|p| p.3 > 0.0));
        let panels = body.split_evenly((1, if modeled { 3 } else { 2 }));
        let color = |i: usize, name: &str| match name {
            "ar" => pal.dim,
            "best LinearSS" => pal.text,
            _ => pal.series(i),
        };
        let baseline = |name: &str| name == "ar" || name == "best LinearSS";
        let pick = |f: fn(&(usize, f64, f64, f64)) -> f64| -> Vec<Series> {
            s.iter()
                .enumerate()
                .map(|(i, x)| Series {
                    label: x.config.clone(),
                    color: color(i, &x.config),
                    points: x.points.iter().map(|p| (p.0 as f64, f(p))).collect(),
                    thin: baseline(&x.config),
                    marker: Some(i),
                })
                .collect()
        };
        let mut charts = vec![
            ("tokens/s (measured, this machine)", pick(|p| p.1)),
            ("tokens per forward (TPF)", pick(|p| p.2)),
        ];
        if modeled {
            charts.push(("tokens/s modeled by the cost profile", pick(|p| p.3)));
        }
        for ((y_desc, series), area) in charts.iter().zip(&panels) {
            against_concurrency(y_desc, y_desc, series, true, area, pal)?;
        }
        Ok(())
    })
}

/// A line chart of `series` against concurrency (log scale); `from_zero`: the y axis
/// starts at 0.
fn against_concurrency(
    title: &str,
    y_desc: &str,
    series: &[Series],
    from_zero: bool,
    area: &DrawingArea<SVGBackend, Shift>,
    pal: &Palette,
) -> Result<()> {
    let x = range(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0.max(1.0).log2())),
        false,
    );
    let y = range(
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        from_zero,
    );
    lines(
        &Lines {
            title: title.to_string(),
            x_desc: "concurrency C (log scale)",
            y_desc,
            x,
            y,
            log_x: true,
            percent_y: false,
        },
        series,
        area,
        pal,
    )
}

/// Figure 4b: RecGuide's modeled speed-up over each fixed block size against
/// concurrency, with the break-even line at 1.
pub fn speedup(s: &[(String, Vec<(usize, f64)>)], caption: &str, pal: &Palette) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            "RecGuide's modeled speed-up over fixed-B LinearSS against concurrency",
            caption,
            pal,
        )?;
        let mut series: Vec<Series> = s
            .iter()
            .enumerate()
            .map(|(i, (label, pts))| {
                let points = pts.iter().map(|p| (p.0 as f64, p.1)).collect();
                Series::nth(i, label.clone(), points, pal)
            })
            .collect();
        let xs: Vec<f64> = series
            .iter()
            .flat_map(|x| x.points.iter().map(|p| p.0))
            .collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        if lo <= hi {
            series.push(Series {
                label: "break-even (1.0)".into(),
                color: pal.dim,
                points: vec![(lo, 1.0), (hi, 1.0)],
                thin: true,
                marker: None,
            });
        }
        against_concurrency(
            "modeled tokens/s, RecGuide ÷ LinearSS B",
            "speed-up (modeled)",
            &series,
            false,
            &body,
            pal,
        )
    })
}

/// Figure 4c: what block diffusion trades for its speed. TPF against the share of
/// tokens AR would have emitted: self-speculation sits at 100%, diffusion below it.
pub fn faithfulness(
    s: &[(String, Vec<(f64, f64)>)],
    caption: &str,
    pal: &Palette,
) -> Result<String> {
    svg(|root| {
        let body = frame(
            root,
            "Tokens per forward against agreement with AR: block diffusion and self-speculation",
            caption,
            pal,
        )?;
        let series: Vec<Series> = s
            .iter()
            .enumerate()
            .map(|(i, (label, pts))| {
                let points = pts.iter().map(|&(tpf, share)| (tpf, 100.0 * share));
                Series::nth(i, label.clone(), points.collect(), pal)
            })
            .collect();
        let x = range(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            true,
        );
        let y = range(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            false,
        );
        lines(
            &Lines {
                title: String::new(),
                x_desc: "tokens per forward (TPF)",
                y_desc: "tokens AR would emit (%)",
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
