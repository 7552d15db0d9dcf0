//! One file per screen region; each draws from the state snapshot only.

pub mod chat;
pub mod help;
pub mod history;
pub mod round;
pub mod status;

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use unicode_width::UnicodeWidthStr;

use super::theme::Theme;

/// A token's text made visible: spaces as `·`, newlines as `⏎`, tabs as `⇥`, cut to
/// `max` columns with `…`.
pub fn visible_token(text: &str, max: usize) -> String {
    let mut s: String = text
        .chars()
        .map(|c| match c {
            ' ' => '·',
            '\n' => '⏎',
            '\t' => '⇥',
            c if c.is_control() => '�',
            c => c,
        })
        .collect();
    if s.is_empty() {
        s.push('∅');
    }
    if s.width() > max {
        let mut out = String::new();
        for c in s.chars() {
            if out.width() + 1 >= max {
                break;
            }
            out.push(c);
        }
        out.push('…');
        s = out;
    }
    s
}

/// A bordered block with a title in the theme's colours.
pub fn pane<'a>(title: impl Into<ratatui::text::Line<'a>>, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title.into().style(theme.title))
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
