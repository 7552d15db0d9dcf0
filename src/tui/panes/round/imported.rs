//! The round pane's view of an imported log's round: what NLD did, as far as its log
//! says — the block with the accepted positions and their confidences, the first
//! rejection with the draft's token, the verifier's and its rank in the draft (the
//! correction row that would have hit) — and, once, what the log does not carry.

use super::*;
use crate::trace::nld::ImportedRound;

/// The glyph of an accepted position whose token the log does not name.
pub const ACCEPTED_GLYPH: &str = "✓";

/// A confidence as the block's labels show it: `.97`.
fn conf(c: f64) -> String {
    format!("{c:.2}").trim_start_matches('0').to_string()
}

/// The rank in words: "2nd", "3rd", "11th".
fn ordinal(k: usize) -> String {
    let suffix = match (k % 10, k % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

/// The pane's sections for an imported round: the block and the verdict must show;
/// the verifier's token's rank, the confidences and what the log lacks as room allows.
pub(super) fn imported_sections(
    r: &ImportedRound,
    st: &State,
    t: &Theme,
    width: usize,
) -> Sections {
    let (lines, verdict, more) = imported_lines(r, st, t, width);
    let absent = absent_lines(st, t, width);
    (
        lines,
        verdict,
        vec![
            (lines_as_groups(more), true),
            (lines_as_groups(absent), true),
        ],
    )
}

/// Lines of an imported round, how many of their last are the verdict, and the lines
/// that may follow (rank, confidences).
fn imported_lines(
    r: &ImportedRound,
    st: &State,
    t: &Theme,
    width: usize,
) -> (Vec<Line<'static>>, usize, Vec<Line<'static>>) {
    let s = &st.session;
    let b = r.block();
    let emitted = r.emitted();
    let where_from = s
        .source
        .as_ref()
        .map(|src| {
            let file = std::path::Path::new(&src.rounds_file)
                .file_name()
                .map_or(src.rounds_file.clone(), |f| {
                    f.to_string_lossy().into_owned()
                });
            format!("{file}:{}", r.line)
        })
        .unwrap_or_else(|| format!("line {}", r.line));
    let mut out = wrap(
        &[
            (format!("block {b}"), t.title),
            (format!(" · LinearSpec, from its log ({where_from})"), t.dim),
        ],
        width,
    );
    let Some(c) = &r.row else {
        // SGLang's block stats: counts only.
        let f = r.forwards().unwrap_or(0);
        out.extend(wrap(
            &[(
                format!(
                    "{}{} (accepted drafts and the verifier's) {}",
                    if emitted >= b {
                        format!("{ACCEPTED_GLYPH} ")
                    } else {
                        String::new()
                    },
                    glue(&format!("{emitted} of {b} tokens emitted")),
                    glue(&format!("in {f} forwards"))
                ),
                if emitted >= b { t.accepted } else { t.text },
            )],
            width,
        ));
        return (out, 1, Vec::new());
    };
    let accepted = r.accepted().unwrap_or(emitted.saturating_sub(1));
    let confidences = c.accepted_draft_confidences.as_deref().unwrap_or(&[]);
    let ids = c.accepted_draft_token_ids.as_deref();
    let reject = c.rejected_position;
    let mut cells = Cells::new(width);
    cells.push("seed".into(), t.seed, String::new(), t.dim);
    for p in 1..b {
        let (tok, style, under, under_style) = if p <= accepted {
            let tok = ids
                .and_then(|ids| ids.get(p - 1))
                .map_or(ACCEPTED_GLYPH.to_string(), |id| {
                    visible_token(&s.token(*id), cell_max(width))
                });
            let under = confidences.get(p - 1).map_or(String::new(), |c| conf(*c));
            (tok, t.accepted, under, t.dim)
        } else if reject == Some(p) {
            let tok = c.rejected_draft_token_id.map_or(String::new(), |id| {
                visible_token(&s.token(id), cell_max(width))
            });
            let under = c.rejected_draft_confidence.map_or(String::new(), conf);
            (format!("{REJECT_GLYPH}{tok}"), t.rejected, under, t.risky)
        } else {
            ("·".to_string(), t.discarded, String::new(), t.dim)
        };
        cells.push(tok, style, under, under_style);
    }
    out.extend(cells.lines());
    let verdict = verdict_lines(r, c, accepted, s, t, width);
    let n = verdict.len();
    out.extend(verdict);
    (out, n, rank_lines(c, t, width))
}

/// The verdict in words: accepted, the first rejection and its rank, tokens emitted.
fn verdict_lines(
    r: &ImportedRound,
    c: &crate::trace::nld::ConfidenceRow,
    accepted: usize,
    s: &crate::tui::state::Session,
    t: &Theme,
    width: usize,
) -> Vec<Line<'static>> {
    let drafts = r.block().saturating_sub(1);
    let emitted = r.emitted();
    let mut pieces = vec![(
        glue(&format!("{HIT_GLYPH} accepted {accepted} of {drafts}")),
        t.accepted,
    )];
    match c.rejected_position {
        Some(q) => {
            let tok = |id: Option<u32>| id.map_or("?".to_string(), |id| quoted(&s.token(id)));
            pieces.push((
                format!(
                    "  {} {} {}",
                    glue(&format!("{REJECT_GLYPH} first reject at {q}:")),
                    glue(&format!("drafted {},", tok(c.rejected_draft_token_id))),
                    glue(&format!(
                        "verifier says {}",
                        tok(c.rejected_correct_token_id)
                    ))
                ),
                t.rejected,
            ));
        }
        None if c.eos_hit == Some(true) => {
            pieces.push(("  the answer ends here".into(), t.dim));
        }
        None => pieces.push(("  full block".into(), t.accepted)),
    }
    let unit = if emitted == 1 { "token" } else { "tokens" };
    pieces.push((format!("  {}", glue(&format!("→ {emitted} {unit}"))), t.dim));
    wrap(&pieces, width)
}

/// The verifier's token's rank in the draft (whether a correction row would have hit)
/// and the draft's confidences.
fn rank_lines(c: &crate::trace::nld::ConfidenceRow, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(k) = c.rejected_correct_token_rank {
        // A correction row re-drafts from the rejected position with the draft's
        // second choice: it hits exactly when the verifier's token ranks 2nd.
        let (words, style) = if k == 2 {
            (
                "verifier's token was the draft's 2nd choice: a correction row at this position would have hit"
                    .to_string(),
                t.bonus,
            )
        } else if k == 1 {
            // The log's rank is over the draft's distribution with the mask excluded;
            // its drafted token was another (the mask's, or one of a tie).
            (
                "verifier's token was the draft's top choice without the mask, yet another was drafted: no correction row (the 2nd choice) would have hit"
                    .to_string(),
                t.dim,
            )
        } else {
            (
                format!(
                    "verifier's token was the draft's {} choice: a correction row (the 2nd) would have missed",
                    ordinal(k)
                ),
                t.dim,
            )
        };
        out.extend(wrap(&[(words, style)], width));
    }
    if let (Some(m), Some(rc)) = (
        c.accepted_draft_confidence_mean,
        c.rejected_draft_confidence,
    ) {
        out.extend(wrap(
            &[(
                format!(
                    "confidence: accepted mean {} · {}",
                    conf(m),
                    glue(&format!("first rejected {}", conf(rc)))
                ),
                t.dim,
            )],
            width,
        ));
    }
    out
}

/// What the log does not carry, named once under the round.
fn absent_lines(st: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let Some(src) = &st.session.source else {
        return Vec::new();
    };
    if src.absent.is_empty() {
        return Vec::new();
    }
    wrap(
        &[(format!("not in this log: {}", src.absent.join("; ")), t.dim)],
        width,
    )
}
