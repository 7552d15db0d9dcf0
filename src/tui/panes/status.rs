//! The status line: model, device, what decodes, session TPF and tokens/s on the left;
//! the state markers (slow motion, pause, recording, replay) and the newest notice on
//! the right. When the line is short the left fields go first (from the end); a notice
//! that does not fit whole takes the row above (`draw_notice_row`): the markers always
//! show.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::text::Fit;
use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::{pace_label, Level, State};
use crate::tui::theme::Theme;

const SEP: &str = " │ ";

/// `text` cut to `max` columns, the middle replaced by `…`.
pub fn cut_middle(text: &str, max: usize) -> String {
    if text.width() <= max {
        return text.to_string();
    }
    if max < 2 {
        return "…".chars().take(max).collect();
    }
    let keep = max - 1;
    let (head_w, tail_w) = (keep - keep / 3, keep / 3);
    let mut head = String::new();
    for c in text.chars() {
        if head.width() + c.to_string().width() > head_w {
            break;
        }
        head.push(c);
    }
    let mut tail: Vec<char> = Vec::new();
    let mut w = 0;
    for c in text.chars().rev() {
        let cw = c.to_string().width();
        if w + cw > tail_w {
            break;
        }
        w += cw;
        tail.push(c);
    }
    let tail: String = tail.into_iter().rev().collect();
    format!("{head}…{tail}")
}

/// "B200" for "B200 · NLD-8B (modeled)", "CPU" for "this CPU (measured)".
fn short_prices(prices: &str) -> String {
    prices
        .trim_start_matches("this ")
        .split([' ', '·'])
        .next()
        .unwrap_or(prices)
        .to_string()
}

/// The line's first word.
const APP: &str = " specscope";

/// The model as people call it.
pub fn model_name(model: &str) -> String {
    if let Some(name) = model.strip_prefix(crate::sim::PREFIX) {
        return format!("{} ({}{name})", crate::sim::LABEL, crate::sim::PREFIX);
    }
    match model.strip_prefix("bundled:") {
        Some(name) => format!("bundled drill model ({name})"),
        None => model.to_string(),
    }
}

/// The model's name alone: `tiny-nld`, `Nemotron-Labs-Diffusion-8B` for a hub id.
fn short_model_name(model: &str) -> String {
    if model.starts_with(crate::sim::PREFIX) {
        return "simulated NLD-8B".to_string();
    }
    if model.starts_with(crate::trace::nld::IMPORTED_PREFIX) {
        return "imported log".to_string();
    }
    let name = model.strip_prefix("bundled:").unwrap_or(model);
    name.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(name)
        .to_string()
}

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let width = usize::from(area.width);
    // Markers with their keys where the line is wide, bare where it is not.
    let wide = markers(s, t, keys, Detail::Keys);
    // The keys only where every left field (model, mode, TPF …) fits beside them.
    let right = if markers_width(&wide) + 90 <= width {
        wide
    } else {
        markers(s, t, keys, Detail::Bare)
    };
    draw_with(f, area, s, t, keys, right);
}

/// Whether the notice (if any) shows whole in the status line beside the name, the
/// mode, the activity, the device and the markers; else it takes the row above
/// ([`draw_notice_row`]) and the status line keeps its fields.
pub fn notice_inline(s: &State, t: &Theme, keys: &Keymap, width: usize) -> bool {
    let Some(n) = &s.status.notice else {
        return true;
    };
    let wide = markers(s, t, keys, Detail::Keys);
    let markers_w = if markers_width(&wide) + 90 <= width {
        markers_width(&wide)
    } else {
        markers_width(&markers(s, t, keys, Detail::Bare))
    };
    n.text.width() <= notice_room(s, keys, markers_w, width)
}

/// A notice too long for the status line, on the row above it (over the panes' lower
/// borders, for the few seconds it shows): whole where the row holds it, else cut
/// between words with the help's messages page named for the rest.
pub fn draw_notice_row(f: &mut Frame, area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let Some(n) = &s.status.notice else { return };
    let width = usize::from(area.width);
    // The messages page is the help's last: ← from the first wraps to it.
    let more = format!(" ({} ←: messages page)", keys.hint(Action::Help));
    let text = cut_words(&n.text, width.saturating_sub(2), &more);
    let style = notice_style(n.level, t);
    let pad = width.saturating_sub(text.width() + 1);
    let line = Line::from(vec![
        Span::styled(" ", t.status),
        Span::styled(text, style),
        Span::styled(" ".repeat(pad), t.status),
    ]);
    f.render_widget(Paragraph::new(line).style(t.status), area);
}

fn notice_style(level: Level, t: &Theme) -> Style {
    match level {
        Level::Info => t.status_key,
        Level::Warning => t.warning.patch(t.status),
        Level::Error => t.error.patch(t.status),
    }
}

/// `text` in `max` columns, cut only between words: its words while they fit (a path
/// by its file name, `…/name`), then `…` (and the last word where it is a path), then
/// `more` (where the whole text is). A word longer than the room is the only thing ever cut inside.
pub fn cut_words(text: &str, max: usize, more: &str) -> String {
    if text.width() <= max {
        return text.to_string();
    }
    let words: Vec<&str> = text.split(' ').collect();
    // A path: starts like one or has two slashes (not `rounds/s`, `OWNER/NAME`).
    let short = |w: &str| {
        let pathlike = w.starts_with(['/', '~', '.']) || w.matches('/').count() >= 2;
        match w.rsplit_once('/') {
            Some((_, name)) if pathlike && !name.is_empty() => Some(format!("…/{name}")),
            _ => None,
        }
    };
    // The first words that fit in `budget`, paths by their file names.
    let head = |budget: usize| -> (String, usize) {
        let mut out = String::new();
        let mut n = 0;
        for w in &words {
            let sep = usize::from(!out.is_empty());
            let form = short(w).unwrap_or_else(|| w.to_string());
            if out.width() + sep + form.width() > budget {
                break;
            }
            if sep == 1 {
                out.push(' ');
            }
            out.push_str(&form);
            n += 1;
        }
        (out, n)
    };
    let room = max.saturating_sub(more.width());
    let (all, n) = head(room);
    if n == words.len() {
        return format!("{all}{more}");
    }
    // The last word after the cut only where it is a file's name: a sentence's last
    // word alone ("none)") reads as noise.
    let tail = match short(words[words.len() - 1]) {
        Some(last) if last.width() + 14 <= room => format!(" … {last}"),
        _ => " …".to_string(),
    };
    let budget = room.saturating_sub(tail.width());
    let (mut first, n) = head(budget);
    if first.is_empty() {
        first = cut_middle(words[0], budget);
    }
    // Every word but the last shown: nothing is left out between them.
    let tail = if n + 1 == words.len() {
        tail.replacen(" … ", " ", 1)
    } else {
        tail
    };
    let out = format!("{first}{tail}{more}");
    if out.width() <= max {
        out
    } else {
        cut_middle(&out, max)
    }
}

/// How much the markers say.
#[derive(Clone, Copy, PartialEq)]
enum Detail {
    /// With the keys that change them.
    Keys,
    Bare,
}

/// The state markers: replay position, pause, slow motion, recording.
fn markers(s: &State, t: &Theme, keys: &Keymap, detail: Detail) -> Vec<(String, Style)> {
    let st = &s.status;
    let with_keys = detail == Detail::Keys;
    let mut right: Vec<(String, Style)> = Vec::new();
    if let Some(r) = &st.replay {
        let mark = if r.playing { "▶" } else { "⏸" };
        let text = format!(
            "{mark} replay event {}/{} · {}",
            r.pos,
            r.len,
            r.pace.label()
        );
        right.push((text, t.status_key));
    } else {
        if st.paused {
            let text = if with_keys {
                format!("⏸ paused · {} steps", keys.hint(Action::Step))
            } else {
                "⏸ paused".to_string()
            };
            right.push((text, t.status_key));
        }
        let ms = st.live_pace_ms();
        if ms > 0 {
            let text = if with_keys {
                format!(
                    "slow {} · {} faster",
                    pace_label(ms),
                    keys.hint(Action::Faster)
                )
            } else {
                format!("slow {}", pace_label(ms))
            };
            right.push((text, t.status_key));
        }
    }
    if st.recording.is_some() {
        right.push((" ● REC ".into(), t.recording));
    }
    right
}

/// The markers' width, each with its separator.
fn markers_width(markers: &[(String, Style)]) -> usize {
    markers.iter().map(|(x, _)| x.width() + SEP.width()).sum()
}

/// The help key's marker.
fn help_label(keys: &Keymap) -> String {
    format!("{} help", keys.hint(Action::Help))
}

/// What the line has for the notice: the width less the markers (`markers_w`), the
/// help key and what is kept on the left: the name, the mode's word, the activity,
/// the model's name and the device.
fn notice_room(s: &State, keys: &Keymap, markers_w: usize, width: usize) -> usize {
    let help = help_label(keys).width() + SEP.width();
    let label = s.session.label();
    let mode = label.split(' ').next().unwrap_or_default();
    let keep = [
        APP.to_string(),
        mode.to_string(),
        activity(s),
        short_model_name(&s.session.model),
        s.session.device.clone(),
    ]
    .iter()
    .map(|x| x.width() + SEP.width())
    .sum::<usize>()
        + 1;
    width.saturating_sub(markers_w + help + SEP.width() + keep)
}

/// Whether the session is answering, and how many requests; at the end of a replay
/// whose recording stops mid-answer, that those answers were cut off.
fn activity(s: &State) -> String {
    let ended = s.status.replay.as_ref().is_some_and(|r| r.pos >= r.len);
    let what = if ended { "cut off" } else { "answering" };
    match s.session.live.len() {
        0 => "idle".to_string(),
        1 => what.to_string(),
        n => format!("{n} {what}"),
    }
}

fn draw_with(
    f: &mut Frame,
    area: Rect,
    s: &State,
    t: &Theme,
    keys: &Keymap,
    mut right: Vec<(String, Style)>,
) {
    let width = usize::from(area.width);
    let sm = &s.stats.current;
    let st = &s.status;
    // The notice where it shows whole beside the fields that say what is running;
    // a longer one goes on the row above (`draw_notice_row`).
    let inline = notice_inline(s, t, keys, width);
    // The help key is a marker too: it stays whatever the notice.
    right.push((help_label(keys), t.status));
    let activity = activity(s);
    if let Some(n) = st.notice.as_ref().filter(|_| inline) {
        right.insert(right.len() - 1, (n.text.clone(), notice_style(n.level, t)));
    }
    let right_w: usize =
        right.iter().map(|(x, _)| x.width()).sum::<usize>() + SEP.width() * right.len();
    // Left, shown in this order: the name, the model, the mode, what it is doing and
    // the device are kept together, shortened (the model to its name, the mode to its
    // word), while they fit, in this order of importance: the activity, the mode,
    // the model, the device; the mode's and then the model's full forms next; the
    // rates only after.
    let label = s.session.label();
    let mode = label.split(' ').next().unwrap_or_default().to_string();
    let model = [
        model_name(&s.session.model),
        short_model_name(&s.session.model),
        String::new(),
    ];
    let mut left = Fit::separated(SEP, t.status)
        .tiered([APP, ""], t.status_key, 0, 0)
        .tiered(model, t.status, 3, 0)
        .tiered([label, mode, String::new()], t.status_key, 2, 0)
        .tiered([activity, String::new()], t.status, 1, 0)
        .tiered([s.session.device.clone(), String::new()], t.status, 4, 0);
    // What prices the decisions, beside the device (a lone `cpu` would read as "priced
    // by this CPU" when a GPU's prices decide).
    if !s.session.prices.is_empty() {
        left = left.tiered(
            [
                format!("priced as {}", s.session.prices),
                format!("{} prices", short_prices(&s.session.prices)),
                short_prices(&s.session.prices),
                String::new(),
            ],
            t.status,
            4,
            0,
        );
    }
    // Rates once something was decoded (zeros before would read as measured).
    if sm.tally.rounds > 0 {
        left = left
            .ranked(
                // Labelled in every form: the history pane's rates are 8-round means.
                [format!("TPF {:.2} (session)", sm.tpf()), String::new()],
                t.status,
                5,
            )
            .ranked(
                [
                    // No tokens per second where no forward was timed here.
                    if s.session.untimed() {
                        String::new()
                    } else {
                        format!("{:.0} tok/s (session)", sm.tokens_per_sec())
                    },
                    String::new(),
                ],
                t.status,
                6,
            );
    }
    let left = left.line(width.saturating_sub(right_w));
    let used = left.width();
    let mut spans = left.spans;
    let pad = width.saturating_sub(used + right_w);
    spans.push(Span::styled(" ".repeat(pad), t.status));
    for (text, style) in right {
        spans.push(Span::styled(SEP, t.status));
        spans.push(Span::styled(text, style));
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.status), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_middle_keeps_both_ends() {
        assert_eq!(cut_middle("short", 10), "short");
        let c = cut_middle(
            "/home/user/.config/specscope/keymap.toml:3: unknown action",
            24,
        );
        assert_eq!(c.width(), 24);
        assert!(c.starts_with("/home/user/") && c.ends_with("action"), "{c}");
        assert_eq!(
            model_name("bundled:tiny-nld"),
            "bundled drill model (tiny-nld)"
        );
    }
}
