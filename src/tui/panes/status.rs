//! The status line: model, device, mode, block policy, concurrency, TPF, tokens/s,
//! reuse rate, recording and replay state, and the newest notice.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::{Level, State, LIVE_DELAYS_MS};
use crate::tui::theme::Theme;

use super::chat::mode_name;

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let sm = &s.summary.summary;
    let sep = || Span::styled(" │ ", t.status);
    let mut spans = vec![
        Span::styled(" specscope", t.status_key),
        sep(),
        Span::styled(s.model.clone(), t.status),
        sep(),
        Span::styled(s.device.clone(), t.status),
        sep(),
    ];
    // The live request's settings, else what the next request will use.
    let mode = match s.active().and_then(|r| s.requests.get(&r)) {
        Some(i) => format!(
            "{} {}{}",
            mode_name(i.mode),
            i.block_policy,
            if i.overlap && i.mode == crate::engine::Mode::Recguide {
                " +overlap"
            } else {
                ""
            }
        ),
        None => s.options.label(),
    };
    spans.push(Span::styled(mode, t.status_key));
    spans.push(sep());
    spans.push(Span::styled(format!("C {}", s.live.len()), t.status));
    spans.push(sep());
    spans.push(Span::styled(format!("TPF {:.2}", sm.tpf()), t.status));
    spans.push(sep());
    spans.push(Span::styled(
        format!("{:.0} tok/s", sm.tokens_per_sec()),
        t.status,
    ));
    spans.push(sep());
    spans.push(Span::styled(
        format!("reuse {:.0}%", 100.0 * sm.hit_rate()),
        t.status,
    ));
    if let Some(r) = &s.replay {
        spans.push(sep());
        spans.push(Span::styled(
            format!(
                "{} replay {}/{} ×{}",
                if r.playing { "▶" } else { "⏸" },
                r.pos,
                r.len,
                r.speed
            ),
            t.status_key,
        ));
    } else {
        if s.paused {
            spans.push(sep());
            spans.push(Span::styled("⏸ paused", t.status_key));
        }
        let delay = LIVE_DELAYS_MS.get(s.speed).copied().unwrap_or(0);
        if delay > 0 {
            spans.push(sep());
            spans.push(Span::styled(format!("slow {delay}ms/round"), t.status_key));
        }
    }
    if s.recording.is_some() {
        spans.push(Span::styled(" ", t.status));
        spans.push(Span::styled(" ● REC ", t.recording));
    }
    spans.push(sep());
    match &s.notice {
        Some(n) => spans.push(Span::styled(
            n.text.clone(),
            match n.level {
                Level::Info => t.status_key,
                Level::Warning => t.warning.patch(t.status),
                Level::Error => t.error.patch(t.status),
            },
        )),
        None => spans.push(Span::styled(
            format!("{} help", keys.hint(Action::Help)),
            t.status,
        )),
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.status), area);
}
