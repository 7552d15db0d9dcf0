//! Fitting a round into the pane: what must show, what shows as room allows, and how
//! a round that does not fit folds so that its branch rows still show.

use ratatui::text::Line;

use super::*;

/// Appends the optional sections while they fit in `h` lines. The first that does not
/// fit shows its whole groups that do (if cuttable), then a line saying the rest is cut;
/// a group (a branch row wrapped over two lines) is never cut in the middle.
pub(super) fn fit_optional(
    lines: &mut Vec<Line<'static>>,
    optional: Vec<(Vec<Group>, bool)>,
    h: usize,
    t: &Theme,
) {
    for (sec, cuttable) in optional {
        let n: usize = sec.iter().map(Vec::len).sum();
        if lines.len() + n <= h {
            lines.extend(sec.into_iter().flatten());
        } else if cuttable && lines.len() + 1 < h {
            let mut room = h - lines.len() - 1;
            for g in sec {
                if g.len() > room {
                    break;
                }
                room -= g.len();
                lines.extend(g);
            }
            lines.push(Line::styled("… (a larger pane shows the rest)", t.dim));
            break;
        }
    }
}

/// Lines that show whole or not at all (a branch row wrapped over two lines).
pub(super) type Group = Vec<Line<'static>>;

/// (what must show, how many of its last lines are the verdict, optional sections as
/// groups with whether their first groups alone are worth showing).
pub(super) type Sections = (Vec<Line<'static>>, usize, Vec<(Vec<Group>, bool)>);

/// Each line its own group.
pub(super) fn lines_as_groups(lines: Vec<Line<'static>>) -> Vec<Group> {
    lines.into_iter().map(|l| vec![l]).collect()
}

/// Sections of the round pane, most important first: what must show (the decision,
/// the draft, the verdict) and what shows as room allows, for a pane `h` lines tall.
/// Where the whole round does not fit, it is folded so that the branch rows still show
/// (docs/decisions.md, "The round folds before it drops a branch row"): the decision
/// takes one line, the rows come before what explains them, and the block strip gives
/// up its last cells to them.
pub(super) fn sections(r: &RoundView, s: &State, t: &Theme, width: usize, h: usize) -> Sections {
    if let Some(i) = &r.imported {
        return imported_sections(i, s, t, width);
    }
    if let Some(d) = &r.diffusion() {
        let (lines, outcome) = diffusion_lines(r, d, s, t, width);
        let inspected = s.rounds.selected.map(|p| {
            (
                lines_as_groups(diffusion_inspector(d, s, t, p, width)),
                true,
            )
        });
        return (lines, outcome, inspected.into_iter().collect());
    }
    let (head, candidates) = decision_lines(r, t, width);
    let mut block = Vec::new();
    let mut verdict = Vec::new();
    if r.block.is_empty() {
        if let Some(v) = &r.verdict {
            // The token wraps whole to the next row where the pane is narrow; the
            // step is this round's verdict, kept whole like one.
            verdict = wrap(
                &[
                    ("AR step: one token per forward → ".to_string(), t.dim),
                    (glue(&quoted(&s.session.token(v.bonus))), t.bonus),
                ],
                width,
            );
        }
    } else {
        block = block_lines(r, s, t, width);
        verdict = verdict_lines(r, s, t, width);
    }
    let inspected = s.rounds.selected.map(|p| {
        let p = p.min(r.block.len().saturating_sub(1));
        lines_as_groups(inspector(r, s, t, p, width))
    });
    let (explain, rows) = branch_lines(r, s, t, width);
    let n = |g: &[Group]| g.iter().map(Vec::len).sum::<usize>();
    let whole = head.len()
        + block.len()
        + verdict.len()
        + inspected.as_deref().map_or(0, n)
        + n(&explain)
        + n(&rows);
    let folded = whole > h;
    let mut head = head;
    if folded {
        // Of the ways to fold (the decision on one line or whole; the strip cut to
        // fewer rows of cells, at least one), the one that shows the most branch rows,
        // then leaves the fewest lines blank, then keeps the most of the strip.
        let others = verdict.len() + inspected.as_deref().map_or(0, n);
        let short = one_line(head.clone(), width, t);
        let bonus = r.verdict.is_some() && !r.ended();
        // (rows shown, fewest blank, strip lines), then the fold: one-line decision, keep.
        type Score = (usize, std::cmp::Reverse<usize>, usize);
        let mut best: Option<(Score, bool, usize)> = None;
        for one in [true, false] {
            let head_len = if one { short.len() } else { head.len() };
            for keep in (1..=block.len()).rev() {
                let strip = strip_lines(block.len(), keep);
                let used = head_len + strip + others;
                let (shown, blank) = rows_fitting(&rows, h.saturating_sub(used));
                let score = (shown, std::cmp::Reverse(blank), strip);
                if best.as_ref().is_none_or(|b| score > b.0) {
                    best = Some((score, one, keep));
                }
            }
        }
        if let Some((_, one, keep)) = best {
            if one {
                head = short;
            }
            block = cut_block(block, keep, bonus, width, t);
        }
    }
    let verdict_len = verdict.len();
    let mut must = head;
    must.extend(block);
    must.extend(verdict);
    // (lines, whether its first lines alone are worth showing): the candidates'
    // heading without their figures is not.
    let mut optional = Vec::new();
    if let Some(g) = inspected {
        optional.push((g, true));
    }
    if folded {
        optional.push((rows, true));
        optional.push((explain, true));
    } else {
        optional.push((explain.into_iter().chain(rows).collect(), true));
    }
    optional.push((vec![candidates], false));
    (must, verdict_len, optional)
}

/// How many of the branch rows `rows` show in `room` lines, whole, with a line for the
/// note where some do not; and the lines then left blank.
pub(super) fn rows_fitting(rows: &[Group], room: usize) -> (usize, usize) {
    let all: usize = rows.iter().map(Vec::len).sum();
    if all <= room {
        return (rows.len(), room - all);
    }
    let mut left = room.saturating_sub(1);
    let mut shown = 0;
    for g in rows {
        if g.len() > left {
            break;
        }
        left -= g.len();
        shown += 1;
    }
    (shown, left)
}

/// The first of `lines`, ending in "…" where more followed: the decision on one line.
pub(super) fn one_line(
    mut lines: Vec<Line<'static>>,
    width: usize,
    t: &Theme,
) -> Vec<Line<'static>> {
    if lines.len() <= 1 {
        return lines;
    }
    lines.truncate(1);
    let line = &mut lines[0];
    if line.width() + 2 > width {
        // Room for the ellipsis: the last span gives up its end.
        while line.width() + 2 > width {
            let Some(last) = line.spans.last_mut() else {
                break;
            };
            let mut text = last.content.to_string();
            if text.pop().is_none() {
                line.spans.pop();
                continue;
            }
            last.content = text.into();
        }
    }
    line.spans.push(Span::styled(" …", t.dim));
    lines
}

/// The strip's lines kept when cut to `room`: whole rows of cells, at least one (the
/// seed and the first drafts), with a line left for the note.
pub(super) fn kept_lines(room: usize) -> usize {
    (room.saturating_sub(1) / 2 * 2).max(2)
}

/// How many lines [`cut_block`] makes of a strip of `len` lines cut to `room`: what
/// the fold weighs without building the lines.
pub(super) fn strip_lines(len: usize, room: usize) -> usize {
    let keep = kept_lines(room);
    if len <= room || keep >= len {
        len
    } else {
        keep + 1
    }
}

/// The block strip cut to `room` lines: whole rows of cells (a token line and its
/// margin line), then a line saying how many positions a larger pane shows (the bonus,
/// the strip's last cell where `bonus`, is not a position). It keeps at least one row
/// of cells, so it takes three lines where `room` is smaller.
pub(super) fn cut_block(
    mut block: Vec<Line<'static>>,
    room: usize,
    bonus: bool,
    width: usize,
    t: &Theme,
) -> Vec<Line<'static>> {
    if strip_lines(block.len(), room) == block.len() {
        return block;
    }
    // A cell is its text and a space (the last one has no space).
    let cells = |lines: &[Line]| -> usize {
        lines
            .iter()
            .step_by(2)
            .map(|l| l.spans.len().div_ceil(2))
            .sum()
    };
    let keep = kept_lines(room);
    let hidden = cells(&block)
        .saturating_sub(cells(&block[..keep]))
        .saturating_sub(usize::from(bonus));
    block.truncate(keep);
    // The longest form that fits the pane: never cut at its border.
    let forms = match hidden {
        0 => [
            "… (a larger pane shows the bonus)".to_string(),
            "… the bonus: larger pane".to_string(),
        ],
        1 => [
            "… 1 more position (a larger pane shows it)".to_string(),
            "… 1 more position (larger pane)".to_string(),
        ],
        n => [
            format!("… {n} more positions (a larger pane shows them)"),
            format!("… {n} more positions (larger pane)"),
        ],
    };
    let [long, short] = forms;
    let text = if long.width() <= width { long } else { short };
    block.push(Line::styled(text, t.dim));
    block
}
