//! The round pane's block diffusion view: the canvas step by step, and a position's
//! steps in the inspector.

use super::*;

/// The glyph of a position still masked on a diffusion canvas.
pub const MASK_GLYPH: &str = "░";
/// The glyph in front of a diffused token AR would not have emitted.
pub const DIVERGE_GLYPH: &str = "≠";

/// A diffusion canvas as two-line cells (token; the step that committed it), then what
/// the last step did or, once written, where AR would have said something else.
/// Returns the lines and how many of the last are the outcome.
pub(super) fn diffusion_lines(
    r: &RoundView,
    d: &DiffusionView,
    st: &State,
    t: &Theme,
    width: usize,
) -> (Vec<Line<'static>>, usize) {
    let s = &st.session;
    // The canvas's own length (F3/F4 may have changed the request's since), with the
    // threshold the request runs with.
    let tau = s.requests.get(&r.req).and_then(|i| {
        i.label
            .split(' ')
            .find(|w| w.starts_with('τ'))
            .map(str::to_string)
    });
    let label = match tau {
        Some(tau) => format!("Diffusion L={} {tau}", d.denoise.canvas.len()),
        None => format!("Diffusion L={}", d.denoise.canvas.len()),
    };
    let masks = d.denoise.canvas.iter().filter(|c| c.is_none()).count();
    let kept = r.diffusion_kept();
    let mut out = wrap(
        &[
            (format!("{label}: "), t.title),
            (
                if d.ar.is_some() {
                    format!(
                        "{} steps + 1 cache write for {kept} tokens, no verifier",
                        d.denoise.steps
                    )
                } else {
                    // Kept on one row: it wraps whole where the label leaves no room.
                    glue(&format!(
                        "step {} · {masks} masked of {}",
                        d.denoise.steps,
                        d.denoise.canvas.len()
                    ))
                },
                t.dim,
            ),
        ],
        width,
    );
    let differ = d.disagreements(kept);
    let mut cells = Cells::new(width);
    for (p, c) in d.denoise.canvas.iter().enumerate() {
        let step = d.denoise.step_of.get(p).copied().unwrap_or(0);
        let (tok, mut style) = match c {
            None => (MASK_GLYPH.repeat(2), t.dim),
            Some(id) => {
                let tok = visible_token(&s.token(*id), cell_max(width));
                if d.ar.is_some() {
                    if p >= kept {
                        // Past the answer's end: never committed.
                        (tok, t.discarded)
                    } else if differ.contains(&p) {
                        (format!("{DIVERGE_GLYPH}{tok}"), t.risky)
                    } else {
                        (tok, t.accepted)
                    }
                } else if step == d.denoise.steps {
                    (tok, t.bonus)
                } else {
                    (tok, t.text)
                }
            }
        };
        let under = if step == 0 {
            String::new()
        } else {
            format!("s{step}")
        };
        let mut us = t.dim;
        if st.rounds.selected == Some(p) {
            style = style.patch(t.selected);
            us = us.patch(t.selected);
        }
        cells.push(tok, style, under, us);
    }
    out.extend(cells.lines());
    let outcome = match &d.ar {
        Some(ar) => {
            let n = kept;
            let mut parts = vec![(
                format!("AR agrees at {} of {n}", n - differ.len()),
                if differ.is_empty() {
                    t.accepted
                } else {
                    t.text
                },
            )];
            for &p in differ.iter().take(3) {
                parts.push((
                    format!("; at {p} AR would say {}", glue(&quoted(&s.token(ar[p])))),
                    t.risky,
                ));
            }
            if differ.len() > 3 {
                parts.push((format!("; {} more", differ.len() - 3), t.dim));
            }
            parts.push((" · not lossless".to_string(), t.dim));
            wrap(&parts, width)
        }
        None => {
            let now: Vec<f32> = (0..d.denoise.canvas.len())
                .filter(|&p| d.denoise.step_of.get(p) == Some(&d.denoise.steps))
                .map(|p| d.denoise.confidence.get(p).copied().unwrap_or(0.0))
                .collect();
            let low = now.iter().copied().fold(f32::INFINITY, f32::min);
            let text = match now.len() {
                0 => "nothing committed yet".to_string(),
                1 => format!("step {}: 1 position, p {low:.2}", d.denoise.steps),
                k => format!("step {}: {k} positions, p ≥ {low:.2}", d.denoise.steps),
            };
            wrap(&[(text, t.dim)], width)
        }
    };
    let n = outcome.len();
    out.extend(outcome);
    (out, n)
}

/// A selected canvas position: its token, the step and probability it was committed
/// with, and AR's choice there once the block is written.
pub(super) fn diffusion_inspector(
    d: &DiffusionView,
    st: &State,
    t: &Theme,
    p: usize,
    width: usize,
) -> Vec<Line<'static>> {
    let p = p.min(d.denoise.canvas.len().saturating_sub(1));
    let s = &st.session;
    let mut parts = vec![(format!("position {p}: "), t.title)];
    match d.denoise.canvas.get(p).copied().flatten() {
        None => parts.push(("still masked".into(), t.dim)),
        Some(id) => {
            parts.push((glue(&quoted(&s.token(id))), t.text));
            let step = d.denoise.step_of.get(p).copied().unwrap_or(0);
            match d.denoise.confidence.get(p).copied().filter(|c| *c > 0.0) {
                Some(c) => parts.push((format!(" at step {step}, p {c:.2}"), t.dim)),
                None => parts.push((format!(" at step {step}"), t.dim)),
            }
            if let Some(a) = d.ar.as_ref().and_then(|ar| ar.get(p)) {
                if *a == id {
                    parts.push(("; AR says the same".into(), t.accepted));
                } else {
                    parts.push((
                        format!("; AR would say {}", glue(&quoted(&s.token(*a)))),
                        t.risky,
                    ));
                }
            }
        }
    }
    wrap(&parts, width)
}
