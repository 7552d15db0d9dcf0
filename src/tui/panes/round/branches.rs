//! The round pane's branch rows: each row with its verdict, and why rows rode or were
//! dropped at this load.

use super::*;

/// The round's branch rows: (what explains them — why rows rode or were dropped at
/// this load, and the branch this block was reused from — and the rows themselves,
/// each with its verdict). A tall pane shows them in that order; a short one shows the
/// rows first.
pub(super) fn branch_lines(
    r: &RoundView,
    s: &State,
    t: &Theme,
    width: usize,
) -> (Vec<Group>, Vec<Group>) {
    let mut explain: Vec<Group> = vec![rows_lines(r, t, width)];
    explain.retain(|g| !g.is_empty());
    if let Some(k) = r.reused {
        explain.push(wrap(
            &[(
                format!("block reused from branch {k} (no draft forward this round)"),
                t.reused,
            )],
            width,
        ));
    }
    let mut out: Vec<Group> = Vec::new();
    for (i, b) in r.branches.iter().enumerate() {
        let style = match b.kind {
            BranchKind::Correction { .. } => t.correction,
            BranchKind::Continuation => t.continuation,
        };
        let head = match (b.kind, b.alt) {
            (BranchKind::Correction { .. }, Some(alt)) => {
                format!(
                    "{:<3} @{:<2} alt {} ",
                    b.kind,
                    b.at,
                    quoted(&s.session.token(alt))
                )
            }
            _ => format!("{:<3} @{:<2} ", b.kind, b.at),
        };
        let (badge, bstyle) = match r.outcome {
            Some(BranchOutcome::Hit { index, .. }) if index == i && last_of_answer(r, s) => {
                let why = if stopped(r, s) {
                    "the answer was stopped"
                } else {
                    "the answer ended"
                };
                (format!("{HIT_GLYPH} HIT, unused: {why}"), t.miss)
            }
            Some(BranchOutcome::Hit { index, .. }) if index == i => {
                (format!("{HIT_GLYPH} HIT"), t.hit)
            }
            Some(BranchOutcome::Hit { .. }) => ("not needed".to_string(), t.miss),
            // The round's one reason is about corrections when the block was
            // rejected and about the continuation when it was accepted whole; the
            // other kind of row was not needed.
            Some(BranchOutcome::Miss {
                reason: MissReason::Ended,
            }) => ("unused: the answer ended".to_string(), t.miss),
            Some(BranchOutcome::Miss { reason }) => {
                let full = matches!(
                    reason,
                    MissReason::ContinuationMiss | MissReason::ContinuationAbsent
                );
                if full == matches!(b.kind, BranchKind::Continuation) {
                    (format!("miss: {}", reason.describe()), t.miss)
                } else {
                    ("not needed".to_string(), t.miss)
                }
            }
            None => ("…".to_string(), t.dim),
        };
        // The preview gives way first (its first token always shows); a long miss
        // reason then wraps.
        let room = width.saturating_sub(head.width() + badge.width().min(12) + 4);
        let mut preview = String::new();
        for id in &b.block {
            let tok = visible_token(&s.session.token(*id), CELL_MAX);
            if !preview.is_empty() && preview.width() + tok.width() + 1 > room {
                preview.push('…');
                break;
            }
            preview.push_str(&tok);
            preview.push(' ');
        }
        out.push(wrap(
            &[
                (head, style),
                (format!("[{}] ", preview.trim_end()), t.text),
                (badge, bstyle),
            ],
            width,
        ));
    }
    // Rows the policy decided on (kept or dropped) are explained by the lines above.
    let decided = r.rows.is_some_and(|d| d.kept.rows + d.dropped.rows > 0);
    if r.branches.is_empty() && r.block.len() > 1 && !decided {
        let why = match s.session.requests.get(&r.req) {
            Some(i) if i.label.starts_with("LinearSS") => {
                "no branch rows: LinearSS has none (F8: RecGuide's branches)"
            }
            Some(i) if !i.label.contains("+overlap") => "no branch rows: overlap is off (F8)",
            _ if r.risky.is_empty() && r.reused.is_none() => {
                "no branch rows this round (none the table builds here)"
            }
            _ => "no branch rows this round",
        };
        out.push(wrap(&[(why.to_string(), t.dim)], width));
    }
    (explain, out)
}

/// Which branch rows ride with verification at this load and why, in the policy's
/// prices: "rows dropped: +41% verify price for 0.30 drafts expected saved".
pub(super) fn rows_lines(r: &RoundView, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let Some(d) = &r.rows else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let verifying = r.verdict.is_none();
    let rows = |n: usize| {
        if n == 1 {
            "1 row".to_string()
        } else {
            format!("{n} rows")
        }
    };
    if d.kept.rows > 0 {
        let verb = if d.kept.rows == 1 { "rides" } else { "ride" };
        let what = if d.unpriced {
            format!("{} {verb} (every row, unpriced)", rows(d.kept.rows))
        } else {
            format!("{} {verb}: {}", rows(d.kept.rows), d.describe(&d.kept))
        };
        let what = if verifying {
            format!("{what} · being verified…")
        } else {
            what
        };
        out.extend(wrap(&[(what, t.dim)], width));
    }
    if d.dropped.rows > 0 {
        let what = format!(
            "{} dropped: {}",
            rows(d.dropped.rows),
            d.describe(&d.dropped)
        );
        out.extend(wrap(&[(what, t.dim)], width));
    }
    out
}
