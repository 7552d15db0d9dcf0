//! The round pane: the draft block token by token with margins, risky positions
//! (colour and `!`), the verifier's verdict, the bonus, the branches and why this block
//! size; with a position selected, draft top-k beside verifier top-k.

use ratatui::layout::{Margin, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::pane;
use super::text::Fit;
use super::text::{wrap, wrap_indented, NBSP};
use super::visible_token;
use crate::engine::events::{PosView, StopReason};
use crate::engine::overlap::{BranchKind, BranchOutcome, MissReason};
use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::{DiffusionView, RoundView, State};
use crate::tui::theme::Theme;

mod branches;
mod diffusion;
mod fold;
mod imported;

use branches::branch_lines;
use diffusion::{diffusion_inspector, diffusion_lines};
pub use diffusion::{DIVERGE_GLYPH, MASK_GLYPH};
use fold::{fit_optional, lines_as_groups, sections, Group, Sections};
use imported::imported_sections;

/// The glyph in front of a risky position's margin.
pub const RISKY_GLYPH: &str = "!";
/// The glyph marking the first rejected position.
pub const REJECT_GLYPH: &str = "✗";
/// The glyph of a branch that was reused.
pub const HIT_GLYPH: &str = "✓";

/// Widest token shown in a cell of a narrow pane.
const CELL_MAX: usize = 10;

/// Widest token shown in a block cell of a pane `width` columns wide: a wide pane cuts
/// fewer tokens.
fn cell_max(width: usize) -> usize {
    (width / 8).clamp(CELL_MAX, 24)
}

/// How the verifier judged block position `p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PosFate {
    Seed,
    Pending,
    Accepted,
    Rejected,
    Discarded,
    /// Accepted by the verifier but past the answer's end (EOS or the token limit
    /// inside the block): never committed.
    PastEnd,
}

/// The answer's last round: its request no longer answers and no round of it came
/// after (a branch that hit here is never used).
fn last_of_answer(r: &RoundView, s: &State) -> bool {
    r.verdict.is_some()
        && !s.session.live.contains(&r.req)
        && !s
            .rounds
            .list
            .iter()
            .any(|o| o.req == r.req && o.round > r.round)
}

/// The round's answer was stopped by the user (Esc, Ctrl+C).
fn stopped(r: &RoundView, s: &State) -> bool {
    s.session
        .requests
        .get(&r.req)
        .is_some_and(|info| info.stop == Some(StopReason::Cancelled))
}

pub fn fate(r: &RoundView, p: usize) -> PosFate {
    if p == 0 {
        return PosFate::Seed;
    }
    match &r.verdict {
        None => PosFate::Pending,
        // Past the answer's end nothing counts, accepted or rejected.
        Some(_) if r.ended() && p > r.committed.len() => PosFate::PastEnd,
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
        PosFate::Discarded | PosFate::PastEnd => t.discarded,
    }
}

/// Two-line cells (a token over its label), wrapped to a width: the block's and the
/// diffusion canvas's rows.
struct Cells {
    width: usize,
    col: usize,
    top: Vec<Span<'static>>,
    bottom: Vec<Span<'static>>,
    out: Vec<Line<'static>>,
}

impl Cells {
    fn new(width: usize) -> Self {
        Self {
            width,
            col: 0,
            top: Vec::new(),
            bottom: Vec::new(),
            out: Vec::new(),
        }
    }

    /// Starts a new pair of rows when a cell of `w` columns would not fit.
    fn room_for(&mut self, w: usize) {
        if self.col > 0 && self.col + w > self.width {
            self.out.push(Line::from(std::mem::take(&mut self.top)));
            self.out.push(Line::from(std::mem::take(&mut self.bottom)));
            self.col = 0;
        }
    }

    /// A cell as wide as the wider of its two texts, and a column of space.
    fn push(&mut self, text: String, style: Style, under: String, under_style: Style) {
        let w = text.width().max(under.width()) + 1;
        self.room_for(w);
        self.top
            .push(Span::styled(format!("{text:<w$}", w = w - 1), style));
        self.top.push(Span::raw(" "));
        self.bottom
            .push(Span::styled(format!("{under:<w$}", w = w - 1), under_style));
        self.bottom.push(Span::raw(" "));
        self.col += w;
    }

    /// A last cell with no space after it.
    fn last(&mut self, text: String, style: Style, under: String, under_style: Style) {
        self.room_for(text.width().max(under.width()));
        self.top.push(Span::styled(text, style));
        self.bottom.push(Span::styled(under, under_style));
    }

    fn lines(mut self) -> Vec<Line<'static>> {
        if !self.top.is_empty() {
            self.out.push(Line::from(self.top));
            self.out.push(Line::from(self.bottom));
        }
        self.out
    }
}

/// The two-line cells of the block, wrapped to `width`.
fn block_lines(r: &RoundView, st: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let s = &st.session;
    let sel = st.rounds.selected;
    let mut cells = Cells::new(width);
    for p in 0..r.block.len() {
        let fate = fate(r, p);
        let mut tok = visible_token(&s.token(r.block[p]), cell_max(width));
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
        if sel == Some(p) {
            // A cell drawn on its own background (the rejected one) takes the text
            // colour, so it stays readable on the selection's background.
            if ts.bg.is_some() && t.selected.bg.is_some() {
                ts.fg = t.text.fg;
            }
            ts = ts.patch(t.selected);
            ms = ms.patch(t.selected);
        }
        cells.push(tok, ts, margin, ms);
    }
    // Where the answer ended inside the block the verifier's token is no bonus:
    // nothing follows the end, so it is not drawn.
    if let Some(v) = r.verdict.as_ref().filter(|_| !r.ended()) {
        let tok = format!("+{}", visible_token(&s.token(v.bonus), cell_max(width)));
        cells.last(tok, t.bonus, "bonus".into(), t.dim);
    }
    cells.lines()
}

/// The verdict in words, wrapped to `width`.
fn verdict_lines(r: &RoundView, s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let Some(v) = &r.verdict else {
        return vec![Line::styled("verifying…", t.dim)];
    };
    let tok = |id: u32| quoted(&s.session.token(id));
    let drafts = r.block.len().saturating_sub(1);
    let unit = |n: usize| if n == 1 { "token" } else { "tokens" };
    // Each phrase is glued: it wraps whole ("bonus '6'", "→ 2 tokens"), not at its
    // inner spaces.
    if r.ended() {
        // The answer ended among the accepted drafts: what the verifier said after
        // its end (more accepts, a reject, a bonus) is no part of it.
        let k = r.committed.len();
        let pieces = [
            (
                glue(&format!("{HIT_GLYPH} accepted {k} of {drafts}")),
                t.accepted,
            ),
            (
                format!(
                    "  {} the answer ends here",
                    glue(&format!("→ {k} {} kept:", unit(k)))
                ),
                t.dim,
            ),
        ];
        return wrap(&pieces, width);
    }
    let mut pieces = vec![(
        glue(&format!("{HIT_GLYPH} accepted {} of {drafts}", v.accepted)),
        t.accepted,
    )];
    match v.first_reject {
        Some(q) => {
            let draft = r.block.get(q).map(|id| tok(*id)).unwrap_or_default();
            pieces.push((
                format!(
                    "  {} {} {}",
                    glue(&format!("{REJECT_GLYPH} first reject at {q}:")),
                    glue(&format!("drafted {draft},")),
                    glue(&format!("verifier says {}", tok(v.bonus)))
                ),
                t.rejected,
            ));
        }
        None if drafts > 0 => pieces.push(("  full block".into(), t.accepted)),
        None => {}
    }
    pieces.push((
        format!("  {}", glue(&format!("bonus {}", tok(v.bonus)))),
        t.bonus,
    ));
    let n = v.accepted + 1;
    pieces.push((format!("  {}", glue(&format!("→ {n} {}", unit(n)))), t.dim));
    wrap(&pieces, width)
}

fn quoted(text: &str) -> String {
    format!("'{}'", visible_token(text, 14))
}

/// The block size and why (wrapped), then (where there is room) the candidates.
fn decision_lines(
    r: &RoundView,
    t: &Theme,
    width: usize,
) -> (Vec<Line<'static>>, Vec<Line<'static>>) {
    let b = r.size();
    let mut head = vec![Span::styled(format!("block {b}"), t.title)];
    let Some(why) = &r.reason else {
        let what = if b == 1 {
            " · AR (one token per forward)"
        } else {
            ""
        };
        head.push(Span::styled(what, t.text));
        return (vec![Line::from(head)], Vec::new());
    };
    head.push(Span::styled(format!(" · {}", why.rule.describe()), t.text));
    if let Some(sig) = why.signal {
        head.push(Span::styled(
            format!(" · {}", glue(&format!("verifier entropy {sig:.2}"))),
            t.dim,
        ));
    }
    let mut more = Vec::new();
    // AR steps by measured regime: what drafting and AR steps delivered lately.
    if let Some(m) = &why.measured {
        let show = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r:.2}"));
        more.push(Line::styled(
            format!(
                "measured tokens/ms here: AR steps {} · drafting {}",
                show(m.ar),
                show(m.draft)
            ),
            t.dim,
        ));
    }
    if !why.candidates.is_empty() {
        let mut pieces: Vec<(String, ratatui::style::Style)> = Vec::new();
        // The number each size is judged by, so the pick is the largest one shown
        // (V and T alone hide the round's fixed cost).
        let lead = match why.rate {
            // The round's rate: what its forward is expected to deliver per ms.
            Some(rate) => format!("net tokens V − T×{rate:.2}/ms per size:"),
            None => "tokens per ms V ÷ T per size:".to_string(),
        };
        pieces.push((lead, t.dim));
        for c in &why.candidates {
            let mine = c.block == b;
            let st = if mine { t.title } else { t.dim };
            let score = c.score(why.rate);
            let score = if why.rate.is_some() {
                format!("{score:+.2}")
            } else {
                significant(score)
            };
            pieces.push((
                format!(" {}:{NBSP}{score}{}", c.block, if mine { "◀" } else { "" }),
                st,
            ));
        }
        more.extend(wrap(&pieces, width));
    }
    let pieces: Vec<(String, ratatui::style::Style)> = head
        .into_iter()
        .map(|sp| (sp.content.into_owned(), sp.style))
        .collect();
    (wrap(&pieces, width), more)
}

/// A positive figure to three significant digits (0.0412, 0.412, 4.12, 41.2).
fn significant(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        a if a >= 1.0 => format!("{x:.2}"),
        a if a >= 0.1 => format!("{x:.3}"),
        _ => format!("{x:.4}"),
    }
}

/// `text` with its spaces made non-breaking: it wraps as one word.
fn glue(text: &str) -> String {
    text.replace(' ', &NBSP.to_string())
}

/// The top-k as "token p" pairs, each wrapping whole.
fn topk(v: Option<&PosView>, s: &State) -> String {
    match v {
        None => "(not recorded)".to_string(),
        Some(v) => v
            .top
            .iter()
            .map(|(id, p)| {
                format!(
                    "{}{NBSP}{:.2}",
                    visible_token(&s.session.token(*id), CELL_MAX),
                    p
                )
            })
            .collect::<Vec<_>>()
            .join("  "),
    }
}

fn inspector(r: &RoundView, s: &State, t: &Theme, p: usize, width: usize) -> Vec<Line<'static>> {
    // Which token it is: the draft's, and the verifier's where they differ.
    let drafted = r.block.get(p).map(|id| quoted(&s.session.token(*id)));
    let verified = r
        .verdict
        .as_ref()
        .and_then(|v| v.verifier_tokens.get(p.checked_sub(1)?))
        .map(|id| quoted(&s.session.token(*id)));
    let mut head = format!("position {p}");
    match (&drafted, &verified) {
        (Some(d), Some(v)) if d != v => head.push_str(&format!(": drafted {d}, verifier {v}")),
        (Some(d), _) => head.push_str(&format!(": {d}")),
        _ => {}
    }
    let mut out = wrap(&[(head, t.title)], width);
    if p == 0 {
        out.push(Line::styled("the seed: committed last round", t.dim));
        return out;
    }
    let d = r.draft_detail.get(p - 1);
    let v = r.verdict.as_ref().and_then(|v| v.detail.get(p - 1));
    // Both sides' figures first, then the lists: a short pane still compares them.
    for (label, view) in [("draft", d), ("verifier", v)] {
        if let Some(x) = view {
            let text = format!(
                "{} {} · {} · {}",
                glue(&format!("{:<9}", format!("{label}:"))),
                glue(&format!("margin {:.3}", x.margin)),
                glue(&format!("confidence {:.3}", x.confidence)),
                glue(&format!("entropy {:.3}", x.entropy)),
            );
            out.extend(wrap_indented(&[(text, t.text)], width, 10));
        }
    }
    for (label, view) in [("draft", d), ("verifier", v)] {
        // Long top-k lists wrap under their first entry.
        out.extend(wrap_indented(
            &[
                (glue(&format!("{:<15}", format!("{label} top-k"))), t.dim),
                (topk(view, s), t.text),
            ],
            width,
            15,
        ));
    }
    if d.is_none() && v.is_none() {
        out.push(Line::styled(
            "top-k is recorded only while the screen asks for detail",
            t.dim,
        ));
    }
    out
}

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let inner = area.inner(Margin::new(1, 1));
    let width = usize::from(inner.width);
    let rounds = &s.rounds;
    let Some(r) = rounds.shown(&s.stats.summary) else {
        let playing = s.status.replay.as_ref().is_some_and(|r| r.playing);
        let text = if s.replaying() && playing {
            wrap(
                &[(
                    format!(
                        "Playing: the first round shows when the recording reaches it ({} pauses).",
                        keys.hint(Action::TogglePause)
                    ),
                    t.dim,
                )],
                width,
            )
        } else if s.replaying() {
            vec![
                Line::styled("Nothing played yet.", t.dim),
                Line::styled(
                    format!(
                        "{} plays, {} steps one round.",
                        keys.hint(Action::TogglePause),
                        keys.hint(Action::Step)
                    ),
                    t.dim,
                ),
            ]
        } else {
            wrap(
                &[(
                    "No rounds yet. Send a message: each draft/verify round shows here.".into(),
                    t.dim,
                )],
                width,
            )
        };
        f.render_widget(Paragraph::new(text).block(pane(" round ", t)), area);
        return;
    };
    let idx = rounds.shown_index(&s.stats.summary).unwrap_or(0);
    let mut title = Fit::default().part(
        [
            format!(" round {} · request {} ", r.round, r.req),
            format!(" round {} ", r.round),
        ],
        t.title,
    );
    if rounds.view.is_some() {
        // The round number before is the request's; this count is the session's rounds
        // (every request's), so it says so in every form.
        let (at, of) = (idx + 1, rounds.list.len());
        title = title.part(
            [
                format!(
                    "[past: {at} of {of} session rounds · {} forward] ",
                    keys.hint(Action::RoundNext)
                ),
                format!("[past: {at} of {of} session rounds] "),
                format!("[session {at}/{of}] "),
            ],
            t.warning,
        );
    } else {
        // "live" only while the request is answering; a replay and a finished answer
        // show their latest round.
        let word = if s.replaying() {
            "replay "
        } else if s.session.live.contains(&r.req) {
            "live "
        } else {
            "latest "
        };
        title = title.part([word], t.dim);
    }
    if s.status.paused {
        // The status line says paused too.
        title = title.part(["⏸ paused ", "⏸ "], t.warning);
    }
    if s.session.source.is_some() {
        // An imported log's round: NLD decoded it, specscope only shows it.
        title = title.part(["imported from its log ", "imported ", ""], t.dim);
    }
    if s.session.model.starts_with(crate::sim::PREFIX) {
        // A simulated backbone's rounds are never a model's: the title says so.
        title = title.part(["simulated NLD-8B acceptance ", "simulated ", ""], t.dim);
    }
    let title = title.title(area.width);
    let h = usize::from(inner.height);
    let (mut lines, verdict, optional) = sections(&r, s, t, width, h);
    if lines.len() > h {
        // Keep the verdict, however many lines it wrapped to: cut draft rows from the
        // end of the block.
        let keep_tail = verdict.min(h.saturating_sub(1));
        let cut = lines.len() - h + 1;
        let tail: Vec<Line> = lines.split_off(lines.len() - keep_tail);
        lines.truncate(lines.len().saturating_sub(cut));
        lines.push(Line::styled("… (larger pane shows the whole block)", t.dim));
        lines.extend(tail);
    }
    fit_optional(&mut lines, optional, h, t);
    f.render_widget(Paragraph::new(lines).block(pane(title, t)), area);
}
