//! Text the panes share: wrapping styled pieces to a width ([`wrap`],
//! [`wrap_indented`]) and fitting a one-line title or summary by importance ([`Fit`]).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// A space that does not break: words joined by it wrap together (drawn as a space).
pub const NBSP: char = '\u{a0}';

/// Wraps styled pieces to `width` columns at spaces where possible; `\n` breaks.
/// Continuation lines start with `indent` (a list item's hanging indent) plus the
/// leading spaces of their own line, so a wrapped line of code stays inside its
/// block's indentation (at most half the width).
pub fn wrap_indented(
    pieces: &[(String, Style)],
    width: usize,
    indent: usize,
) -> Vec<Line<'static>> {
    let width = width.max(indent + 1);
    let mut lines: Vec<Vec<(String, Style)>> = vec![Vec::new()];
    let mut col = 0usize;
    // Words keep their trailing spaces; a word wider than the line is cut. A word
    // ends at a space or `\n`, not where a piece does, so styled pieces inside a word
    // (a token coloured by its origin before a ",") wrap together.
    let mut words: Vec<(Vec<(String, Style)>, bool)> = Vec::new(); // (segments, newline-after)
    let mut word: Vec<(String, Style)> = Vec::new();
    for (text, style) in pieces {
        for c in text.chars() {
            if c == '\n' {
                words.push((std::mem::take(&mut word), true));
            } else {
                push_piece(Some(&mut word), c.to_string(), *style);
                if c == ' ' {
                    words.push((std::mem::take(&mut word), false));
                }
            }
        }
    }
    if !word.is_empty() {
        words.push((word, false));
    }
    // The leading spaces of the current line, while only spaces have been placed.
    let (mut lead, mut at_start) = (0usize, true);
    let new_line = |lines: &mut Vec<Vec<(String, Style)>>, col: &mut usize, hang: usize| {
        lines.push(Vec::new());
        if hang > 0 {
            push_piece(lines.last_mut(), " ".repeat(hang), Style::default());
        }
        *col = hang;
    };
    let width_of = |t: &str| -> usize { t.chars().map(|c| c.width().unwrap_or(0)).sum() };
    for (segs, nl) in words {
        let hang = (indent + lead).min(width / 2).max(indent);
        let text: String = segs.iter().map(|(t, _)| t.as_str()).collect();
        if at_start && text == " " {
            lead += 1;
        } else if !text.is_empty() {
            at_start = false;
        }
        let tw = width_of(text.trim_end_matches(' '));
        // Spaces never start a row: past the edge they are clipped, not carried over.
        if tw > 0 && col > hang && col + tw > width {
            new_line(&mut lines, &mut col, hang);
        }
        if tw > width - hang {
            // Hard-break a long word (its trailing space stays on the row).
            for (seg, style) in segs {
                let mut chunk = String::new();
                for c in seg.chars() {
                    let cw = c.width().unwrap_or(0);
                    // Never before a space (it stays, clipped), nor on an empty row.
                    if col + cw > width && col > hang && c != ' ' && c != NBSP {
                        push_piece(lines.last_mut(), std::mem::take(&mut chunk), style);
                        new_line(&mut lines, &mut col, hang);
                    }
                    chunk.push(c);
                    col += cw;
                }
                push_piece(lines.last_mut(), chunk, style);
            }
        } else {
            col += width_of(&text);
            for (seg, style) in segs {
                push_piece(lines.last_mut(), seg, style);
            }
        }
        if nl {
            lines.push(Vec::new());
            col = 0;
            (lead, at_start) = (0, true);
        }
    }
    lines
        .into_iter()
        .map(|spans| {
            Line::from(
                spans
                    .into_iter()
                    .map(|(t, s)| Span::styled(t.replace(NBSP, " "), s))
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

/// Wraps styled pieces to `width` columns.
pub fn wrap(pieces: &[(String, Style)], width: usize) -> Vec<Line<'static>> {
    wrap_indented(pieces, width, 0)
}

fn push_piece(line: Option<&mut Vec<(String, Style)>>, text: String, style: Style) {
    if let (Some(line), false) = (line, text.is_empty()) {
        match line.last_mut() {
            Some((t, s)) if *s == style => t.push_str(&text),
            _ => line.push((text, style)),
        }
    }
}

/// A one-line text (a pane title, a summary line) of parts, each with shorter forms,
/// fitted to a width. The parts that cannot be dropped are counted first at their
/// shortest forms; then tier by tier (a part's tier is its rank unless given), the
/// tier's droppable parts are shown at their shortest where they still fit, in order
/// of importance, and then its parts lengthened as far as the room allows. With one
/// part per tier each part takes its longest form before a less important one is
/// considered; a tier of several keeps them all, shortened, before any lengthens. So
/// a narrow pane drops or shortens the least important parts whole instead of
/// cutting the line mid-word at its border.
#[derive(Default)]
pub struct Fit {
    /// (forms longest first, an empty form drops the part; style; importance, 0
    /// first; tier)
    parts: Vec<(Vec<String>, Style, usize, usize)>,
    /// Drawn between shown parts (counted before every part but the first).
    sep: Option<(String, Style)>,
}

impl Fit {
    /// Parts joined by `sep` (the status line's " │ ").
    pub fn separated(sep: &str, style: Style) -> Self {
        Fit {
            sep: Some((sep.to_string(), style)),
            ..Fit::default()
        }
    }

    /// A part in the order shown, as important as its position says.
    pub fn part<S: Into<String>>(self, forms: impl IntoIterator<Item = S>, style: Style) -> Self {
        let rank = self.parts.len();
        self.ranked(forms, style, rank)
    }

    /// A part whose importance `rank` (0 first) differs from its position.
    pub fn ranked<S: Into<String>>(
        self,
        forms: impl IntoIterator<Item = S>,
        style: Style,
        rank: usize,
    ) -> Self {
        self.tiered(forms, style, rank, rank)
    }

    /// A ranked part decided with the others of its `tier` (see [`Fit`]).
    pub fn tiered<S: Into<String>>(
        mut self,
        forms: impl IntoIterator<Item = S>,
        style: Style,
        rank: usize,
        tier: usize,
    ) -> Self {
        self.parts.push((
            forms.into_iter().map(Into::into).collect(),
            style,
            rank,
            tier,
        ));
        self
    }

    /// The line fitted to `width` columns (what does not fit even at the shortest
    /// forms is left to the widget to clip).
    pub fn line(self, width: usize) -> Line<'static> {
        let sep_w = self.sep.as_ref().map_or(0, |(s, _)| s.width());
        // Every shown part is counted with a separator and the first shown has none,
        // so the room is one separator wider.
        let width = width + sep_w;
        let w = |f: &str| match f.width() {
            0 => 0,
            n => n + sep_w,
        };
        let mut order: Vec<usize> = (0..self.parts.len()).collect();
        order.sort_by_key(|&i| self.parts[i].2);
        // The shortest form that shows something, and whether the part may be dropped.
        let floor = |forms: &[String]| -> (Option<usize>, bool) {
            let shown = forms.iter().rposition(|f| !f.is_empty());
            (shown, shown.is_some_and(|k| k + 1 < forms.len()))
        };
        let mut chosen: Vec<Option<usize>> = vec![None; self.parts.len()];
        let mut used = 0;
        for &i in &order {
            if let (Some(k), false) = floor(&self.parts[i].0) {
                chosen[i] = Some(k);
                used += w(&self.parts[i].0[k]);
            }
        }
        let mut tiers: Vec<usize> = self.parts.iter().map(|p| p.3).collect();
        tiers.sort_unstable();
        tiers.dedup();
        for tier in tiers {
            let members: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&i| self.parts[i].3 == tier)
                .collect();
            for &i in &members {
                if let (Some(k), true) = floor(&self.parts[i].0) {
                    let need = w(&self.parts[i].0[k]);
                    if used + need <= width {
                        chosen[i] = Some(k);
                        used += need;
                    }
                }
            }
            for &i in &members {
                let Some(k) = chosen[i] else { continue };
                let forms = &self.parts[i].0;
                let now = w(&forms[k]);
                if let Some(longer) = (0..k).find(|&j| used - now + w(&forms[j]) <= width) {
                    used = used - now + w(&forms[longer]);
                    chosen[i] = Some(longer);
                }
            }
        }
        let mut spans: Vec<Span<'static>> = Vec::new();
        for ((mut forms, style, _, _), pick) in self.parts.into_iter().zip(chosen) {
            // A part given no forms shows nothing.
            let Some(text) = pick
                .filter(|&k| k < forms.len())
                .map(|k| forms.swap_remove(k))
            else {
                continue;
            };
            if text.is_empty() {
                continue;
            }
            if let (Some((sep, sep_style)), false) = (&self.sep, spans.is_empty()) {
                spans.push(Span::styled(sep.clone(), *sep_style));
            }
            spans.push(Span::styled(text, style));
        }
        Line::from(spans)
    }

    /// The line fitted as the title of a bordered pane `width` columns wide.
    pub fn title(self, width: u16) -> Line<'static> {
        self.line(usize::from(width.saturating_sub(2)))
    }
}

#[cfg(test)]
mod fit_tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn fit_shortens_the_least_important_parts_first_and_never_cuts_a_word() {
        let fit = || {
            Fit::default()
                .part([" history "], Style::default())
                .part(["· 14 rounds "], Style::default())
                .part(["· mean acceptance 7.12 ", "· acc 7.12 "], Style::default())
                .part(
                    ["· TPF 5.78 (session) ", "· TPF 5.78 ", ""],
                    Style::default(),
                )
        };
        let wide = text(&fit().line(80));
        assert_eq!(
            wide,
            " history · 14 rounds · mean acceptance 7.12 · TPF 5.78 (session) "
        );
        assert_eq!(
            text(&fit().line(wide.width() - 1)),
            " history · 14 rounds · mean acceptance 7.12 · TPF 5.78 "
        );
        // The acceptance keeps its long form; TPF, less important, is dropped whole.
        assert_eq!(
            text(&fit().line(44)),
            " history · 14 rounds · mean acceptance 7.12 "
        );
        assert_eq!(
            text(&fit().line(43)),
            " history · 14 rounds · acc 7.12 · TPF 5.78 "
        );
        assert_eq!(text(&fit().line(31)), " history · 14 rounds · acc 7.12 ");
        // Narrower than the shortest forms: those, for the widget to clip.
        assert_eq!(text(&fit().line(5)), " history · 14 rounds · acc 7.12 ");
    }

    #[test]
    fn fit_decides_by_rank_and_shows_in_order() {
        let fit = || {
            Fit::default()
                .ranked(["branches "], Style::default(), 0)
                .ranked(["P1 1/3 new 12/14 ", ""], Style::default(), 2)
                .ranked(["· hit 68% "], Style::default(), 1)
        };
        assert_eq!(
            text(&fit().line(40)),
            "branches P1 1/3 new 12/14 · hit 68% "
        );
        assert_eq!(text(&fit().line(30)), "branches · hit 68% ");
    }

    #[test]
    fn fit_keeps_a_tier_whole_before_it_lengthens() {
        let fit = || {
            Fit::separated(" | ", Style::default())
                .tiered(["app"], Style::default(), 0, 0)
                .tiered(["long model name", "model", ""], Style::default(), 1, 0)
                .tiered(
                    ["RecGuide adaptive", "RecGuide", ""],
                    Style::default(),
                    2,
                    0,
                )
                .tiered(["TPF 5.0", ""], Style::default(), 3, 1)
        };
        // Room for every part of tier 0 at its shortest, not for a long model name.
        assert_eq!(text(&fit().line(24)), "app | model | RecGuide");
        // Tier 0 lengthens (by rank) before tier 1 is considered.
        assert_eq!(text(&fit().line(34)), "app | long model name | RecGuide");
        assert_eq!(
            text(&fit().line(60)),
            "app | long model name | RecGuide adaptive | TPF 5.0"
        );
    }

    #[test]
    fn fit_counts_the_separator_of_each_shown_part() {
        let fit = || {
            Fit::separated(" | ", Style::default())
                .ranked(["app"], Style::default(), 0)
                .ranked(["long model name", "model", ""], Style::default(), 2)
                .ranked(["idle", ""], Style::default(), 1)
        };
        assert_eq!(text(&fit().line(28)), "app | long model name | idle");
        // One column short: the model shortens, its separator still counted.
        assert_eq!(text(&fit().line(27)), "app | model | idle");
        assert_eq!(text(&fit().line(18)), "app | model | idle");
        assert_eq!(text(&fit().line(17)), "app | idle");
        // A dropped first part leaves no separator in front, and none is counted.
        let lone = || {
            Fit::separated(" | ", Style::default())
                .ranked(["", ""], Style::default(), 0)
                .ranked(["idle"], Style::default(), 1)
                .ranked(["cpu", ""], Style::default(), 2)
        };
        assert_eq!(text(&lone().line(10)), "idle | cpu");
        assert_eq!(text(&lone().line(9)), "idle");
        // A part with no forms at all shows nothing (and does not panic).
        let none = Fit::default()
            .part(Vec::<String>::new(), Style::default())
            .part(["x"], Style::default());
        assert_eq!(text(&none.line(5)), "x");
    }
}
