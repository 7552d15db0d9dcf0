//! The help overlay, in pages: the keys (generated from the active keymap, so it
//! never disagrees with it), what every figure and word on the screen means, and the
//! session's warnings in full.

use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::history::speed_words;
use super::pane;
use super::text::{wrap_indented, NBSP};
use crate::tui::action::Action;
use crate::tui::input::EDITING;
use crate::tui::keymap::Keymap;
use crate::tui::state::{HelpPage, Level, State};
use crate::tui::theme::Theme;

/// What each term on the screen means.
pub const LEGEND: &[(&str, &str)] = &[
    ("block", "the tokens of one round: the seed, then B − 1 masked positions the draft forward fills at once (bidirectional attention)"),
    ("seed", "position 0: the last round's bonus token, already committed"),
    ("margin", "under each drafted token: p1 − p2 of the draft's distribution there (mask excluded); small means the draft is unsure"),
    ("!", "risky: the margin is below the risk threshold (0.5 by default); RecGuide builds correction rows at the first risky positions"),
    ("✓ accepted", "drafted tokens the verifier (one causal forward over the block) agreed with, from the left"),
    ("✗ first reject", "the first position where the verifier chose another token; the draft after it is discarded"),
    ("bonus", "the verifier's own token at the first reject, or after a full block: kept (unless the answer ended before it), so a round advances accepted + 1 tokens"),
    ("kept: the answer ends here", "the answer ended inside the block (end of turn, or the token limit): positions after it are drawn as discarded even where the verifier agreed"),
    ("P1 P2 P3", "correction rows, run inside the verify forward: re-draft from the 1st/2nd/3rd risky position with the draft's next-best token (the default table, from three risky positions on: two P1 rows, its 2nd and 3rd choices); HIT when the verifier rejected exactly there and chose that token: the next round needs no draft forward"),
    ("new", "the continuation: the verify row extended by B masked positions that draft the next block as if this one were accepted whole (its prefix is the block being verified, computed once); HIT when the bonus equals its first token"),
    ("tokens per ms V ÷ T", "per block size B, the figure the adaptive rule picks the largest of: V, the tokens a round of B is expected to advance (survival tables from the verifier's recent entropy, scaled by what verification said this session, less a discount for a size no round has measured yet), over T, its forwards' cost in ms (the cost profile) plus what the branch rows B is expected to carry change that by (less where they are expected to spare a later draft worth more than they cost)"),
    ("net tokens V − T×rate", "where sizes are chosen for the whole round: each size's V less its T times the round's rate (the figure after ×), the tokens per ms the rule expects of the round's forward (every request's V, summed, ÷ the round's ms: each T plus the forwards' fixed part, paid once, which is why V ÷ T alone can favour another size); the rule picks the largest, which makes the round's rate largest (an explore round shows the figures of the rule's choice, before the size it tries was swapped in)"),
    ("cold start", "an answer's first round, no history yet: the sizes up to the paper's cap by concurrency (32 for one request), valued by the tables' average; the best tokens per ms is chosen, so often a size below the cap"),
    ("AR step", "block 1: no draft, one token per forward (AR mode, or the throughput preset where drafting does not pay)"),
    ("explore", "now and then a size the rule did not choose runs, so its cost stays measured"),
    ("TPF", "tokens per forward: decode tokens / decode forwards; \"(session)\" counts the whole session (history title, and the status line where it is wide), the history's sparklines are 8-round means"),
    ("tok/s", "tokens per second of forward time (the screen's own time left out)"),
    ("drafting × AR", "drafting's tokens per ms of forward time against AR steps', on this machine"),
    ("· and ⏎", "in token text: a space at the token's start, and a newline"),
    ("<|im_end|> <|im_start|> <s>", "the chat template's special tokens: <|im_end|> ends the answer (the model's end of turn); drafts often run on past it into a next turn's template, which is never kept"),
    ("+token", "the bonus token after the verdict"),
    ("◀", "the block size chosen among the candidates"),
    ("[a b …]", "a branch row's first drafted tokens"),
    ("drafts saved", "drafts a branch row's hit spared: the next round verified the branch's block without drafting"),
    ("rows ride / dropped", "the branch rows the row table asked for this round, priced at this load: a row rides in the verify forward when its chance of a hit × the draft forward it would spare covers what it adds; \"+24% verify price for 0.53 drafts expected saved\": the rows add 24% to this request's share of the verify forward and are expected to spare 0.53 draft forwards (each worth more than a row where forwards are memory-bound, as on a GPU at low load)"),
    ("priced as", "status line: whose prices the block size and rows are decided by: a GPU's roofline profile (modeled, the default: \"B200 · NLD-8B\"), or this machine's measured one (--cost-profile cpu)"),
    ("branches (br)", "history: by kind, branch rows that hit / rows built, then the hit rate over all kinds; \"branch\" or \"br\" and fewer parts where the pane is narrow"),
    ("tokens per round (tok/round)", "history title: tokens a round advanced (accepted drafts + the bonus), averaged over the session's rounds; an answer's last round counts the tokens it kept, as in bench and eval"),
    ("request N live", "the round pane follows the newest round of request N while it answers (\"latest\" once it is done, \"replay\" in a replay; \"past\" when you walk back with Alt+←)"),
    ("diffusion canvas ░ s1 s2", "block diffusion (F2's fourth mode): a canvas of L masks (░) after the answer so far; each step is one bidirectional forward and commits every masked position whose top probability is at least τ (at least the most confident one); s1, s2 … under a token: the step that committed it; a full canvas is written to the cache by one causal forward, 'steps + 1' forwards per block, no verifier"),
    ("≠ AR would say", "block diffusion, once a block is written: the causal forward that wrote it also gives AR's choice at every position; ≠ marks tokens AR would not have emitted there given the same prefix. Diffusion is fast and not lossless; history's =AR bars are the share of each block AR agrees with"),
    ("history bars (adv/B)", "one per round: height = tokens advanced (kept, in an answer's last round) ÷ block size; colour: full block, reject, reused branch"),
    ("family histogram", "per prompt family: how many rounds advanced 1, 2, ≤4, ≤8 … tokens, bar height relative to the family's most common"),
    ("origin colours (Ctrl+O)", "answer tokens coloured by where they came from: the accepted colour for accepted draft tokens, the bonus colour for bonus tokens, the branch colour for tokens of a reused branch row"),
];

/// Why speculation does or does not pay on this machine.
const SPEED: &str = "On a CPU a forward of a small model is compute-bound from about 2 tokens on: a forward of 16 tokens costs several of 1, so a draft and its verification can cost more than the AR steps a round replaces (the history pane's speed line says how much here), and speculation gains little or nothing on wall-clock, whatever the acceptance. It wins where a forward is memory-bound (a GPU at small concurrency, a large model), and the screen is there to show how it works: TPF, acceptance and branch hits are what carry over.";

fn keys_page(
    t: &Theme,
    keys: &Keymap,
    replay: bool,
    width: usize,
    height: usize,
) -> Vec<Line<'static>> {
    let mut rows: Vec<(String, Option<Action>, &str)> = keys
        .help_rows()
        .into_iter()
        .filter(|r| r.1.acts_in(replay))
        .map(|(k, a, h)| (k, Some(a), h))
        .collect();
    if !replay {
        // The input box's own keys, from the table that handles them (those a keymap
        // binds to an action act as that, listed above).
        rows.extend(
            EDITING
                .iter()
                .filter(|e| keys.action(&e.event()).is_none())
                .map(|e| (e.key.to_string(), None, e.help)),
        );
    }
    // Two columns only where the descriptions fit whole; else one that scrolls.
    let two = rows.len() > height && width >= 140;
    let col_w = if two { width / 2 } else { width };
    let key_w = 16.min(col_w / 3);
    let cell = |r: &(String, Option<Action>, &'static str)| {
        let keys = format!("{:<key_w$} ", cut(&r.0, key_w));
        let what =
            r.1.and_then(Action::replay_help)
                .filter(|_| replay)
                .unwrap_or(r.2);
        let help = format!(
            "{:<w$}",
            cut(what, col_w.saturating_sub(key_w + 2)),
            w = col_w.saturating_sub(key_w + 2)
        );
        vec![
            Span::styled(keys, t.help_key),
            Span::styled(help, t.text),
            Span::raw(" "),
        ]
    };
    let n = if two {
        rows.len().div_ceil(2)
    } else {
        rows.len()
    };
    // The note first: the list below it may scroll.
    let note = if replay {
        // Only the keys that act in a replay are listed.
        format!("A replay is read-only: these keys play, walk and inspect it. Rebind in <config{NBSP}dir>/keymap.toml.")
    } else {
        // The path wraps whole.
        format!("Printable keys act only while the input is empty. Rebind in <config{NBSP}dir>/keymap.toml.")
    };
    let mut lines = wrap_indented(&[(note, t.dim)], width, 0);
    for i in 0..n {
        let mut spans = cell(&rows[i]);
        if two {
            if let Some(r) = rows.get(i + n) {
                spans.extend(cell(r));
            }
        }
        lines.push(Line::from(spans));
    }
    lines
}

fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(w.saturating_sub(1)).collect();
        c.push('…');
        c
    }
}

/// Entries and messages wrap with a hanging indent, so where one ends and the next
/// begins shows at a glance.
const HANG: usize = 2;

/// What every term means, after why speculation does or does not pay here (first:
/// the history pane's speed line points here with "F1 →").
fn legend_page(s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some((words, _)) = speed_words(s) {
        lines.extend(wrap_indented(&[(words, t.title)], width, 0));
    }
    lines.extend(wrap_indented(&[(SPEED.to_string(), t.text)], width, 0));
    lines.push(Line::default());
    lines.extend(LEGEND.iter().flat_map(|(term, what)| {
        let pieces = [
            (format!("{term}: "), t.help_key),
            (what.to_string(), t.text),
        ];
        wrap_indented(&pieces, width, HANG)
    }));
    lines
}

fn messages_page(s: &State, t: &Theme, width: usize) -> Vec<Line<'static>> {
    if s.status.messages.is_empty() {
        return vec![Line::styled("No messages yet this session.", t.dim)];
    }
    // Newest first: on a short screen the latest is the one in view.
    s.status
        .messages
        .iter()
        .rev()
        .flat_map(|(level, text)| {
            let style = match level {
                Level::Error => t.error,
                Level::Warning => t.warning,
                Level::Info => t.text,
            };
            wrap_indented(&[(format!("• {text}"), style)], width, HANG)
        })
        .collect()
}

/// The page shown in the overlay at `area`, and how far it scrolls at most. The pages
/// come wrapped and the paragraph does not wrap them again (a row past the edge is
/// clipped), so each line is one row: the scroll stops at the last.
fn page_of(area: Rect, s: &State, t: &Theme, keys: &Keymap) -> (Vec<Line<'static>>, usize) {
    let inner = area.inner(Margin::new(1, 1));
    let height = usize::from(inner.height);
    let width = usize::from(inner.width).max(1);
    let body = match s.help_page {
        HelpPage::Keys => keys_page(t, keys, s.replaying(), width, height.saturating_sub(1)),
        HelpPage::Legend => legend_page(s, t, width),
        HelpPage::Messages => messages_page(s, t, width),
    };
    let max_scroll = body.len().saturating_sub(height);
    (body, max_scroll)
}

/// How far the help overlay at `area` scrolls at most (the reducer bounds the scroll).
pub fn max_scroll(area: Rect, s: &State, t: &Theme, keys: &Keymap) -> usize {
    page_of(area, s, t, keys).1
}

pub fn draw(f: &mut Frame, area: Rect, s: &State, t: &Theme, keys: &Keymap) {
    let mut tabs: Vec<Span> = vec![Span::styled(" help: ", t.title)];
    for &page in HelpPage::all() {
        let style = if page == s.help_page {
            t.selected
        } else {
            t.dim
        };
        tabs.push(Span::styled(format!(" {} ", page.name()), style));
    }
    let (body, max_scroll) = page_of(area, s, t, keys);
    let scroll = s.help_scroll.min(max_scroll);
    let hint = if max_scroll == 0 {
        " ← → pages · Esc closes "
    } else if scroll < max_scroll {
        " ← → pages · ↓ more · Esc closes "
    } else {
        " ← → pages · ↑ back · Esc closes "
    };
    tabs.push(Span::styled(hint, t.dim));
    f.render_widget(
        // Pre-wrapped: a row's trailing space past the edge is clipped, not wrapped.
        Paragraph::new(body)
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0))
            .block(pane(Line::from(tabs), t)),
        area,
    );
}
