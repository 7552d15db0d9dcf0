//! The reducer's part that folds what happened: each engine event (a request's start
//! and end, its rounds for the round pane, its text for the chat) and each session
//! event (the user's messages, token texts, an imported log's requests and rounds).

use super::{Level, RequestInfo, Role, State, Topic, Turn, TurnStatus};
use crate::engine::events::{DecodeEvent, Origin, StopReason};
use crate::engine::options::DecodeOptions;
use crate::trace::{SessionEvent, TraceEvent};

/// Before the statistics' round assembler takes `e`: the round it is gathering for
/// `e`'s request, when `e` makes it drop that round unfinished (the request ended, or
/// its events moved on to another round), is kept for the round pane.
fn keep_cut_off(s: &mut State, e: &DecodeEvent) {
    let Some(req) = e.request() else {
        return;
    };
    let Some(open) = s.stats.summary.gathering(req) else {
        return;
    };
    let drops = match e {
        DecodeEvent::RequestFinished { .. } | DecodeEvent::Error { .. } => true,
        _ => e
            .round()
            .is_some_and(|r| r > 0 && r != open.round && s.stats.summary.round(req, r).is_none()),
    };
    if drops {
        if let Some(entry) = s.rounds.find_mut(req, open.round) {
            if entry.kept.is_none() {
                entry.kept = Some(open.clone());
            }
        }
    }
}

/// After the assembler took `e` (in `Stats::push`): the round pane has an entry for
/// the round `e` belongs to, and keeps a copy of it once committed (the assembler
/// holds it until then; a later event of a committed round, in an older recording's
/// order, renews the copy).
fn show_round(s: &mut State, t: f64, e: &DecodeEvent) {
    let (Some(req), Some(round)) = (e.request(), e.round()) else {
        return;
    };
    if round == 0 {
        return; // the prefill's first token: no round to show
    }
    if let Some(r) = s.stats.summary.round(req, round) {
        let entry = s.rounds.get_mut(req, round, t);
        if matches!(e, DecodeEvent::Committed { .. }) || entry.kept.is_some() {
            entry.kept = Some(r.clone());
        }
    }
}

pub(super) fn on_event(s: &mut State, t: f64, event: TraceEvent) {
    // The size of the round a commit ends, for the speed meter.
    let block = match &event {
        TraceEvent::Decode(DecodeEvent::Committed { req, round, .. }) if *round > 0 => s
            .rounds
            .list
            .iter()
            .rev()
            .find(|r| r.req == *req && r.round == *round)
            .map(|e| e.view(&s.stats.summary).size()),
        _ => None,
    };
    if let TraceEvent::Decode(e) = &event {
        keep_cut_off(s, e);
    }
    s.stats.push(t, &event, block);
    let e = match event {
        TraceEvent::Session(se) => return on_session(s, t, se),
        TraceEvent::Decode(e) => e,
    };
    show_round(s, t, &e);
    match e {
        DecodeEvent::RequestStarted {
            req,
            mode,
            blocks,
            overlap,
            family,
            ..
        } => {
            let o = DecodeOptions {
                mode,
                blocks,
                overlap,
                ..s.session.options.clone()
            };
            s.session.requests.insert(
                req,
                RequestInfo {
                    label: s.session.ablation.label(&o),
                    started: s.session.ablation.label(&o),
                    family: family.unwrap_or_else(|| "chat".into()),
                    stop: None,
                    diffusing: mode == crate::engine::Mode::Diffusion,
                    imported_tokens: None,
                },
            );
            s.session.live.push(req);
            s.chat.answer_of(req);
        }
        DecodeEvent::Prefilled { .. }
        | DecodeEvent::Forward { .. }
        | DecodeEvent::Learned { .. } => {}
        // The round's events: the assembler gathers them (above), the view shows it.
        DecodeEvent::BlockChosen { .. }
        | DecodeEvent::Drafted { .. }
        | DecodeEvent::BranchesBuilt { .. }
        | DecodeEvent::Verified { .. }
        | DecodeEvent::BranchResolved { .. }
        | DecodeEvent::Denoised { .. }
        | DecodeEvent::BlockWritten { .. } => {}
        DecodeEvent::Committed {
            req,
            tokens,
            origins,
            text,
            ..
        } => {
            let pieces = split_by_origin(s, &tokens, &origins, &text);
            if let Some(turn) = s.chat.answer_of(req) {
                turn.text.push_str(&text);
                turn.pieces.extend(pieces);
            }
        }
        DecodeEvent::RequestFinished {
            req, stop, text, ..
        } => {
            s.session.live.retain(|r| *r != req);
            if let Some(info) = s.session.requests.get_mut(&req) {
                info.stop = Some(stop);
            }
            if let Some(turn) = s.chat.answer_of(req) {
                if !text.is_empty() && text != turn.text {
                    // The streaming detokenizer may hold back a partial character; the
                    // final decode is exact.
                    turn.text = text;
                    turn.pieces.clear();
                }
                if !matches!(turn.status, TurnStatus::Failed(_)) {
                    turn.status = TurnStatus::Done(stop);
                }
            }
            if s.session.live.is_empty() {
                s.status.clear(Topic::Busy);
            }
        }
        DecodeEvent::EngineState { paused } => s.status.paused = paused,
        DecodeEvent::Error { req, message } => {
            if let Some(req) = req {
                s.session.live.retain(|r| *r != req);
                if let Some(turn) = s.chat.answer_of(req) {
                    turn.status = TurnStatus::Failed(message.clone());
                }
            }
            s.notice(message, Level::Error);
        }
    }
}

/// Splits a round's committed text into per-token pieces when the token texts add up
/// to it (otherwise one piece with the last token's origin).
fn split_by_origin(
    s: &State,
    tokens: &[u32],
    origins: &[Origin],
    text: &str,
) -> Vec<(String, Origin)> {
    let pieces: Vec<String> = tokens.iter().map(|t| s.session.token(*t)).collect();
    if pieces.concat() == text && pieces.len() == origins.len() {
        let mut out: Vec<(String, Origin)> = Vec::new();
        for (p, o) in pieces.into_iter().zip(origins) {
            match out.last_mut() {
                Some((acc, last)) if last == o => acc.push_str(&p),
                _ => out.push((p, *o)),
            }
        }
        out
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![(text.to_string(), *origins.last().unwrap_or(&Origin::Draft))]
    }
}

fn on_session(s: &mut State, t: f64, e: SessionEvent) {
    match e {
        SessionEvent::UserMessage {
            req,
            text,
            regenerate,
        } => {
            if regenerate {
                if let Some(i) = s.chat.transcript.iter().rposition(|t| t.role == Role::User) {
                    s.chat.truncate(i);
                }
            }
            s.chat.transcript.push(Turn::user(req, text));
            s.chat.answer_of(req);
            s.chat.scroll_back = 0;
        }
        SessionEvent::TokenText { tokens } => s.session.token_text.extend(tokens),
        SessionEvent::ChatCleared => {
            s.chat.truncate(0);
            s.chat.scroll_back = 0;
        }
        SessionEvent::SessionEnd { .. } => {}
        SessionEvent::ImportedRequest(r) => {
            let id = r.request_id.as_deref().unwrap_or("(the log names none)");
            s.session.requests.insert(
                r.req,
                RequestInfo {
                    label: s.session.ablation.label(&s.session.options),
                    started: s.session.ablation.label(&s.session.options),
                    family: crate::trace::summary::IMPORTED_FAMILY.into(),
                    stop: None,
                    diffusing: false,
                    imported_tokens: Some(0),
                },
            );
            s.chat
                .transcript
                .push(Turn::user(r.req, format!("imported request {id}")));
            if let Some(turn) = s.chat.answer_of(r.req) {
                turn.status = TurnStatus::Streaming;
            }
        }
        SessionEvent::ImportedRound(r) => {
            let (req, round, emitted) = (r.req, r.round, r.emitted());
            let ended = r.row.as_ref().and_then(|c| c.eos_hit) == Some(true);
            s.rounds.get_mut(req, round, t).imported = Some(r);
            let Some(tokens) = s
                .session
                .requests
                .get_mut(&req)
                .and_then(|i| i.imported_tokens.as_mut())
            else {
                return;
            };
            *tokens += emitted;
            let text =
                format!("{round} rounds · {tokens} tokens (the log holds counts, not the text)");
            if let Some(turn) = s.chat.answer_of(req) {
                turn.text = text;
                if ended {
                    turn.status = TurnStatus::Done(StopReason::Eos);
                }
            }
        }
    }
}
