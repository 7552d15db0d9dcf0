//! The round pane: the draft block token by token with margins, risky positions
//! (colour and `!`), the verifier's verdict, the bonus, the branches and why this block
//! size; with a position selected, draft top-k beside verifier top-k.

use ratatui::layout::{Margin, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::visible_token;
use crate::engine::events::PosView;
use crate::engine::overlap::{BranchKind, BranchOutcome};
use crate::tui::render::pane;
use crate::tui::state::{RoundView, State};
use crate::tui::theme::Theme;

/// The glyph in front of a risky position's margin.
pub const RISKY_GLYPH: &str = "!";
/// The glyph marking the first rejected position.
pub const REJECT_GLYPH: &str = "✗";
/// The glyph of a branch that was reused.
pub const HIT_GLYPH: &str = "✓";

/// Widest token shown in a cell.
const CELL_MAX: usize = 10;

/// How the verifier judged block position `p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PosFate {
    Seed,
    Pending,
    Accepted,
    Rejected,
    Discarded,
}

pub fn fate(r: &RoundView, p: usize) -> PosFate {
    if p == 0 {
        return PosFate::Seed;
    }
    match &r.verdict {
        None => PosFate::Pending,
        Some(v) if p <= v.accepted => PosFate::Accepted,
        Some(v) if v.first_reject == Some(p) => PosFate::Rejected,
        Some(_) => PosFate::Discarded,
    }
}

fn fate_style(f: PosFate, t: &Theme) -> Style {
    match f {
        PosFate::Seed => t.seed,
        PosFate::Pending => t.text,
        PosFate::Accepted => t.accepted,
        PosFate::Rejected => t.rejected,
        PosFate::Discarded => t.discarded,
    }
}

/// The two-line cells of the block, wrapped to `width`.
fn block_lines(r: &RoundView, s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut top: Vec<Span> = Vec::new();
    let mut bottom: Vec<Span> = Vec::new();
    let mut col = 0;
    let n = r.block.len();
    for p in 0..n {
        let fate = fate(r, p);
        let mut tok = visible_token(&s.token(r.block[p]), CELL_MAX);
        if fate == PosFate::Rejected {
            tok = format!("{REJECT_GLYPH}{tok}");
        }
        let risky = r.risky.contains(&p);
        let margin = if p == 0 {
            "seed".to_string()
        } else {
            let m = r.margins.get(p - 1).copied().unwrap_or(f32::NAN);
            let m = if m.is_nan() {
                "  ?".to_string()
            } else {
                format!("{m:.2}").trim_start_matches('0').to_string()
            };
            if risky {
                format!("{RISKY_GLYPH}{m}")
            } else {
                m
            }
        };
        let w = tok.width().max(margin.width()) + 1;
        if col > 0 && col + w > width {
            out.push(Line::from(std::mem::take(&mut top)));
            out.push(Line::from(std::mem::take(&mut bottom)));
            col = 0;
        }
        let mut ts = fate_style(fate, t);
        let mut ms = if risky {
            t.risky
        } else if p == 0 {
            t.seed
        } else {
            t.dim
        };
        if risky && fate != PosFate::Rejected {
            ts = ts.add_modifier(Modifier::UNDERLINED);
        }
        if s.selected == Some(p) {
            ts = ts.patch(t.selected);
            ms = ms.patch(t.selected);
        }
        top.push(Span::styled(format!("{tok:<w$}", w = w - 1), ts));
        top.push(Span::raw(" "));
        bottom.push(Span::styled(format!("{margin:<w$}", w = w - 1), ms));
        bottom.push(Span::raw(" "));
        col += w;
    }
    if let Some(v) = &r.verdict {
        let tok = format!("+{}", visible_token(&s.token(v.bonus), CELL_MAX));
        let w = tok.width() + 1;
        if col > 0 && col + w > width {
            out.push(Line::from(std::mem::take(&mut top)));
            out.push(Line::from(std::mem::take(&mut bottom)));
        }
        top.push(Span::styled(tok, t.bonus));
        bottom.push(Span::styled("bonus", t.dim));
    }
    if !top.is_empty() {
        out.push(Line::from(top));
        out.push(Line::from(bottom));
    }
    out
}

fn verdict_line(r: &RoundView, s: &State, t: &Theme) -> Line<'static> {
    let Some(v) = &r.verdict else {
        return Line::styled("verifying…", t.dim);
    };
    let drafts = r.block.len().saturating_sub(1);
    let mut spans = vec![Span::styled(
        format!("{HIT_GLYPH} accepted {} of {drafts}", v.accepted),
        t.accepted,
    )];
    match v.first_reject {
        Some(q) => {
            let draft = r.block.get(q).map(|id| s.token(*id)).unwrap_or_default();
            spans.push(Span::styled("  ", t.text));
            spans.push(Span::styled(
                format!(
                    "{REJECT_GLYPH} first reject at {q}: {} → {}",
                    quoted(&draft),
                    quoted(&s.token(v.bonus))
                ),
                t.rejected,
            ));
        }
        None if drafts > 0 => spans.push(Span::styled("  full block", t.accepted)),
        None => {}
    }
    spans.push(Span::styled(
        format!("  bonus {}", quoted(&s.token(v.bonus))),
        t.bonus,
    ));
    spans.push(Span::styled(
        format!("  advanced {}", v.accepted + 1),
        t.dim,
    ));
    Line::from(spans)
}

fn quoted(text: &str) -> String {
    format!("'{}'", visible_token(text, 14))
}

fn branch_lines(r: &RoundView, s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(k) = r.reused {
        out.push(Line::styled(
            format!("block reused from branch {} (no draft forward)", k.label()),
            t.reused,
        ));
    }
    for (i, b) in r.branches.iter().enumerate() {
        let style = match b.kind {
            BranchKind::Correction { .. } => t.correction,
            BranchKind::Continuation => t.continuation,
        };
        let head = match (b.kind, b.alt) {
            (BranchKind::Correction { .. }, Some(alt)) => {
                format!(
                    "{:<3} @{:<2} alt {} ",
                    b.kind.label(),
                    b.at,
                    quoted(&s.token(alt))
                )
            }
            _ => format!("{:<3} @{:<2} ", b.kind.label(), b.at),
        };
        let (badge, bstyle) = match r.outcome {
            Some(BranchOutcome::Hit { index, .. }) if index == i => {
                (format!("{HIT_GLYPH} HIT"), t.hit)
            }
            Some(BranchOutcome::Hit { .. }) => ("miss".to_string(), t.miss),
            Some(BranchOutcome::Miss { reason }) => {
                (format!("miss: {}", snake(&format!("{reason:?}"))), t.miss)
            }
            None => ("…".to_string(), t.dim),
        };
        let room = width.saturating_sub(head.width() + badge.width() + 4);
        let mut preview = String::new();
        for id in &b.block {
            let tok = visible_token(&s.token(*id), CELL_MAX);
            if preview.width() + tok.width() + 1 > room {
                preview.push('…');
                break;
            }
            preview.push_str(&tok);
            preview.push(' ');
        }
        out.push(Line::from(vec![
            Span::styled(head, style),
            Span::styled(format!("[{}] ", preview.trim_end()), t.text),
            Span::styled(badge, bstyle),
        ]));
    }
    if r.branches.is_empty() {
        if let Some(BranchOutcome::Miss { .. }) | None = r.outcome {
            out.push(Line::styled("no branch rows this round", t.dim));
        }
    }
    out
}

fn snake(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Block size, rule and signal, then each candidate's numbers, wrapped to `width`.
fn reason_lines(r: &RoundView, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let b = r.block_size.unwrap_or(r.block.len());
    let mut spans = vec![Span::styled(format!("B={b}"), t.title)];
    let Some(why) = &r.reason else {
        return vec![Line::from(spans)];
    };
    spans.push(Span::styled(format!(" {}", why.rule), t.text));
    if let Some(sig) = why.signal {
        spans.push(Span::styled(format!(" · entropy {sig:.2}"), t.dim));
    }
    // Chosen with the round: the pick maximises V − λ·T (T: the rows it adds).
    if let Some(rate) = why.rate {
        spans.push(Span::styled(format!(" · λ {rate:.2} tok/ms"), t.dim));
    }
    // AR steps by measured regime: what drafting and AR steps delivered lately.
    if let Some(m) = &why.measured {
        let show = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r:.2}"));
        spans.push(Span::styled(
            format!(
                " · measured tok/ms: AR steps {} · drafting {}",
                show(m.ar),
                show(m.draft)
            ),
            t.dim,
        ));
    }
    let mut lines = Vec::new();
    let mut col: usize = spans.iter().map(|s| s.content.width()).sum();
    for c in &why.candidates {
        let st = if c.block == b { t.title } else { t.dim };
        let mark = if c.block == b { " ◀" } else { "" };
        let text = match why.rate {
            Some(rate) => format!(
                "{}: V {:.1} − λ·{:.1}ms = {:.2}{mark}",
                c.block,
                c.value,
                c.cost_ms,
                c.value - rate * c.cost_ms
            ),
            None => {
                let ratio = if c.cost_ms > 0.0 {
                    c.value / c.cost_ms
                } else {
                    0.0
                };
                format!(
                    "{}: V {:.1} / T {:.1}ms = {:.2}{mark}",
                    c.block, c.value, c.cost_ms, ratio
                )
            }
        };
        if col + 3 + text.width() > width && col > 0 {
            lines.push(Line::from(std::mem::take(&mut spans)));
            spans.push(Span::styled("  ", t.dim));
            spans.push(Span::styled(text, st));
            col = 2 + spans[1].content.width();
        } else {
            col += 3 + text.width();
            spans.push(Span::styled(format!(" · {text}"), st));
        }
    }
    lines.push(Line::from(spans));
    lines
}

fn topk(v: Option<&PosView>, s: &State) -> String {
    match v {
        None => "(not recorded)".to_string(),
        Some(v) => v
            .top
            .iter()
            .map(|(id, p)| format!("{} {:.2}", visible_token(&s.token(*id), CELL_MAX), p))
            .collect::<Vec<_>>()
            .join("  "),
    }
}

fn inspector(r: &RoundView, s: &State, t: &Theme, p: usize) -> Vec<Line<'static>> {
    let mut out = vec![Line::styled(format!("position {p}"), t.title)];
    if p == 0 {
        out.push(Line::styled("the seed: committed last round", t.dim));
        return out;
    }
    let d = r.draft_detail.get(p - 1);
    let v = r.verdict.as_ref().and_then(|v| v.detail.get(p - 1));
    for (label, view) in [("draft", d), ("verifier", v)] {
        if let Some(x) = view {
            out.push(Line::styled(
                format!(
                    "{:<9} margin {:.3} · confidence {:.3} · entropy {:.3}",
                    format!("{label}:"),
                    x.margin,
                    x.confidence,
                    x.entropy
                ),
                t.text,
            ));
        }
        out.push(Line::from(vec![
            Span::styled(format!("{:<15}", format!("{label} top-k")), t.dim),
            Span::styled(topk(view, s), t.text),
        ]));
    }
    if d.is_none() && v.is_none() {
        out.push(Line::styled(
            "top-k is recorded only while the screen asks for detail",
            t.dim,
        ));
    }
    out
}

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme) {
    let inner = area.inner(Margin::new(1, 1));
    let width = usize::from(inner.width);
    let Some(r) = s.shown_round() else {
        let p = Paragraph::new(vec![
            Line::styled("No rounds yet.", t.dim),
            Line::styled(
                "Type a message and press Enter: each draft/verify round appears here.",
                t.dim,
            ),
        ])
        .block(pane(" round ", t));
        f.render_widget(p, area);
        return;
    };
    let idx = s.shown_index().unwrap_or(0);
    let mut title = vec![Span::styled(
        format!(" round {} · request {} ", r.round, r.req),
        t.title,
    )];
    if s.view.is_some() {
        title.push(Span::styled(
            format!("[{}/{} past · Alt+→ forward] ", idx + 1, s.rounds.len()),
            t.warning,
        ));
    } else {
        title.push(Span::styled("live ", t.dim));
    }
    if s.paused {
        title.push(Span::styled("⏸ paused · F6 steps ", t.warning));
    }
    let mut lines = reason_lines(r, t, width);
    if r.block.is_empty() {
        if let Some(v) = &r.verdict {
            lines.push(Line::from(vec![
                Span::styled("AR: one token per forward → ", t.dim),
                Span::styled(quoted(&s.token(v.bonus)), t.bonus),
            ]));
        }
    } else {
        lines.extend(block_lines(r, s, t, width));
        lines.push(verdict_line(r, s, t));
    }
    lines.extend(branch_lines(r, s, t, width));
    if let Some(p) = s.selected {
        lines.push(Line::default());
        lines.extend(inspector(r, s, t, p.min(r.block.len().saturating_sub(1))));
    }
    f.render_widget(
        Paragraph::new(lines).block(pane(Line::from(title), t)),
        area,
    );
}
