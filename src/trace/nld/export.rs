//! `trace export --format linearspec-confidence`: a recording as confidence-trace lines
//! of schema version 2, so the RecGuide author's summarizers read specscope sessions.
//! specscope's own figures ride under one extra key, `specscope`.
//!
//! A round specscope decoded becomes a version-2 line; an imported round is written
//! back as its log had it (a version-1 line stays version 1: it never held the rest).

use std::collections::HashMap;

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::{ConfidenceRow, ImportedRound, CONFIDENCE_EVENT, CONFIDENCE_VERSION};
use crate::engine::events::{Assembler, DecodeEvent, Mode, RequestId, Round, StopReason};
use crate::trace::{SessionEvent, Trace, TraceEvent};

/// Every round of `trace` as confidence-trace lines, in the recording's order.
pub fn confidence_lines(trace: &Trace) -> Result<Vec<String>> {
    rounds(trace)?
        .into_iter()
        .map(|o| match o {
            Out::Native(r) => line(&r),
            Out::Verbatim(m) => Ok(serde_json::to_string(&m)?),
        })
        .collect()
}

/// Every round of `trace` as confidence-trace rows, in the recording's order.
pub fn confidence_rows(trace: &Trace) -> Result<Vec<ConfidenceRow>> {
    rounds(trace)?
        .into_iter()
        .map(|o| match o {
            Out::Native(r) => Ok(*r),
            Out::Verbatim(m) => Ok(serde_json::from_value(Value::Object(m))?),
        })
        .collect()
}

/// A round to write: one specscope decoded, or an imported log's line as it was.
enum Out {
    Native(Box<ConfidenceRow>),
    Verbatim(Map<String, Value>),
}

/// Every field of schema version 2.
pub const V2_FIELDS: &[&str] = &[
    "schema_version",
    "event",
    "backend",
    "created_at_unix",
    "request_id",
    "mode",
    "round_index",
    "batch_index",
    "block_size",
    "gen_start",
    "gen_len",
    "generation_offset",
    "matched_draft_tokens",
    "emitted_tokens",
    "accepted_draft_tokens",
    "eos_hit",
    "has_rejection",
    "draft_forward_passes",
    "nfe_after_round",
    "threshold",
    "temperature",
    "accepted_positions",
    "accepted_generation_positions",
    "accepted_draft_token_ids",
    "accepted_draft_confidences",
    "accepted_draft_confidence_mean",
    "rejected_position",
    "rejected_generation_position",
    "rejected_draft_token_id",
    "rejected_correct_token_id",
    "rejected_draft_confidence",
    "rejected_correct_token_rank",
    "confidence_drop_abs",
    "confidence_drop_pct",
    "mask_selected_positions",
];

/// A row as a line: a version-2 row carries every field of the schema (null where
/// unknown, as the tracer writes them); an older row keeps the fields it had.
fn line(r: &ConfidenceRow) -> Result<String> {
    let Value::Object(mut m) = serde_json::to_value(r)? else {
        anyhow::bail!("a confidence row did not serialise to an object");
    };
    if r.schema_version == Some(CONFIDENCE_VERSION) {
        let mut full = Map::new();
        for k in V2_FIELDS {
            full.insert((*k).to_string(), m.remove(*k).unwrap_or(Value::Null));
        }
        full.extend(m);
        m = full;
    }
    Ok(serde_json::to_string(&m)?)
}

/// Every round of `trace`, in the recording's order.
fn rounds(trace: &Trace) -> Result<Vec<Out>> {
    let mut rounds = Assembler::default();
    let mut modes: HashMap<RequestId, Mode> = HashMap::new();
    let mut nfe: HashMap<RequestId, u64> = HashMap::new();
    // Rounds wait for their request's end: whether the last one hit EOS.
    let mut pending: HashMap<RequestId, Vec<(Round, f64)>> = HashMap::new();
    let mut out = Vec::new();
    let mut ids: HashMap<RequestId, Option<String>> = HashMap::new();
    let h = &trace.header;
    let temperature = f64::from(h.options.sampling.temperature);
    let created = h.created_unix as f64;
    let emit = |out: &mut Vec<Out>, r: &Round, t: f64, eos: bool, mode: Mode, nfe: &mut u64| {
        let row = native_row(r, mode, eos, nfe, temperature, created + t);
        out.extend(row.map(|r| Out::Native(Box::new(r))));
    };
    for s in &trace.events {
        match &s.event {
            TraceEvent::Session(SessionEvent::ImportedRequest(r)) => {
                ids.insert(r.req, r.request_id.clone());
            }
            TraceEvent::Session(SessionEvent::ImportedRound(r)) => {
                let id = ids.get(&r.req).cloned().flatten();
                out.push(imported_row(r, id));
            }
            TraceEvent::Decode(e) => {
                if let DecodeEvent::RequestStarted { req, mode, .. } = e {
                    modes.insert(*req, *mode);
                    nfe.insert(*req, 1); // its prefill
                }
                if let Ok(Some(r)) = rounds.push(e) {
                    pending.entry(r.req).or_default().push((r, s.t));
                }
                if let DecodeEvent::RequestFinished { req, stop, .. } = e {
                    let list = pending.remove(req).unwrap_or_default();
                    let n = list.len();
                    let mode = modes.get(req).copied().unwrap_or(Mode::Linear);
                    let count = nfe.entry(*req).or_insert(1);
                    for (i, (r, t)) in list.into_iter().enumerate() {
                        emit(
                            &mut out,
                            &r,
                            t,
                            i + 1 == n && *stop == StopReason::Eos,
                            mode,
                            count,
                        );
                    }
                }
            }
            TraceEvent::Session(_) => {}
        }
    }
    // Requests the recording cut off: their rounds so far.
    let mut open: Vec<(RequestId, Vec<(Round, f64)>)> = pending.into_iter().collect();
    open.sort_by_key(|(req, _)| *req);
    for (req, list) in open {
        let mode = modes.get(&req).copied().unwrap_or(Mode::Linear);
        let count = nfe.entry(req).or_insert(1);
        for (r, t) in list {
            emit(&mut out, &r, t, false, mode, count);
        }
    }
    Ok(out)
}

/// An imported round as its log had it; SGLang's block stats as the schema's fields
/// they answer (the request's id, or `specscope-N` where no record named it; its
/// forwards as a draft count), the line itself under `specscope`.
fn imported_row(r: &ImportedRound, id: Option<String>) -> Out {
    match &r.confidence {
        Some(c) => Out::Verbatim(c.clone()),
        None => {
            let mut extra = Map::new();
            extra.insert("sglang".into(), json!(r.sglang));
            Out::Native(Box::new(ConfidenceRow {
                schema_version: Some(CONFIDENCE_VERSION),
                event: Some(CONFIDENCE_EVENT.into()),
                backend: Some("sglang".into()),
                request_id: Some(id.unwrap_or_else(|| format!("specscope-{}", r.req))),
                round_index: Some(r.round.saturating_sub(1) as u64),
                block_size: Some(r.block()),
                emitted_tokens: Some(r.emitted()),
                draft_forward_passes: r.forwards().map(|f| f.saturating_sub(1)),
                specscope: Some(extra),
                ..ConfidenceRow::default()
            }))
        }
    }
}

/// A verified round specscope decoded, as a version-2 line (`None`: a diffusion block,
/// which no verifier judged). `nfe` counts the request's forwards so far.
fn native_row(
    r: &Round,
    mode: Mode,
    eos: bool,
    nfe: &mut u64,
    temperature: f64,
    created: f64,
) -> Option<ConfidenceRow> {
    let v = r.verdict.as_ref()?;
    let draft = r.draft.as_ref();
    let block: Vec<u32> = draft.map(|d| d.block.clone()).unwrap_or_default();
    let detail = draft.map_or(&[][..], |d| d.detail.as_slice());
    // An AR step has no draft: a block of one (the verifier's token).
    let size = block.len().max(1);
    let offset = r.committed_before as u64;
    let emitted = r.committed.len();
    let ended = r.ended();
    let accepted = v.accepted.min(size - 1);
    let drafted = draft.is_some_and(|d| d.reused.is_none() && d.block.len() > 1);
    *nfe += u64::from(drafted) + 1;
    let conf_at = |p: usize| {
        detail
            .get(p.checked_sub(1)?)
            .map(|x| f64::from(x.confidence))
    };
    let confidences: Option<Vec<f64>> = (!detail.is_empty())
        .then(|| {
            (1..=accepted)
                .map(|p| conf_at(p).unwrap_or(f64::NAN))
                .collect()
        })
        .filter(|c: &Vec<f64>| c.iter().all(|x| x.is_finite()));
    let mean = confidences
        .as_ref()
        .filter(|c| !c.is_empty())
        .map(|c| c.iter().sum::<f64>() / c.len() as f64);
    let reject = v.first_reject.filter(|_| !ended);
    let rejected_conf = reject.and_then(conf_at);
    let correct = reject.and_then(|q| v.verifier_tokens.get(q - 1).copied());
    // The rank where the verifier's token is among the draft's recorded top-k; past
    // them only a bound is known (under `specscope`).
    let top = reject.and_then(|q| Some(&detail.get(q - 1)?.top));
    let rank = top.and_then(|top| {
        let c = correct?;
        top.iter().position(|(id, _)| *id == c).map(|i| i + 1)
    });
    let beyond = top
        .filter(|t| rank.is_none() && !t.is_empty())
        .map(Vec::len);
    let drop_abs = match (mean, rejected_conf) {
        (Some(m), Some(c)) => Some(m - c),
        _ => None,
    };
    let mut extra = Map::new();
    extra.insert("req".into(), json!(r.req));
    extra.insert("round".into(), json!(r.round));
    if let Some(d) = draft {
        extra.insert("margins".into(), json!(d.margins));
        extra.insert("risky".into(), json!(d.risky));
        extra.insert("reused".into(), json!(d.reused));
    }
    extra.insert(
        "branches".into(),
        json!(r.branches.iter().map(|b| b.kind).collect::<Vec<_>>()),
    );
    extra.insert("outcome".into(), json!(r.outcome));
    extra.insert("rule".into(), json!(r.reason.as_ref().map(|d| d.rule)));
    if let Some(k) = beyond {
        extra.insert("rank_beyond_top".into(), json!(k));
    }
    Some(ConfidenceRow {
        schema_version: Some(CONFIDENCE_VERSION),
        event: Some(CONFIDENCE_EVENT.into()),
        backend: Some("specscope".into()),
        created_at_unix: Some(created),
        request_id: Some(format!("specscope-{}", r.req)),
        mode: Some(serde_json::to_value(mode).ok()?.as_str()?.to_string()),
        // The tracer counts rounds from 0.
        round_index: Some(r.round.saturating_sub(1) as u64),
        batch_index: None,
        block_size: Some(size),
        gen_start: None,
        gen_len: None,
        generation_offset: Some(offset),
        matched_draft_tokens: Some(accepted),
        emitted_tokens: Some(emitted),
        accepted_draft_tokens: Some(accepted),
        eos_hit: Some(eos),
        has_rejection: Some(reject.is_some()),
        draft_forward_passes: Some(u64::from(drafted)),
        nfe_after_round: Some(*nfe),
        threshold: None,
        temperature: Some(temperature),
        accepted_positions: Some((1..=accepted).collect()),
        accepted_generation_positions: Some((0..accepted as u64).map(|i| offset + i).collect()),
        accepted_draft_token_ids: Some(block.iter().skip(1).take(accepted).copied().collect()),
        accepted_draft_confidences: confidences,
        accepted_draft_confidence_mean: mean,
        rejected_position: reject,
        rejected_generation_position: reject.map(|q| offset + q as u64 - 1),
        rejected_draft_token_id: reject.and_then(|q| block.get(q).copied()),
        rejected_correct_token_id: correct,
        rejected_draft_confidence: rejected_conf,
        rejected_correct_token_rank: rank,
        confidence_drop_abs: drop_abs,
        confidence_drop_pct: match (drop_abs, mean) {
            (Some(d), Some(m)) if m != 0.0 => Some(d / m),
            _ => None,
        },
        mask_selected_positions: None,
        specscope: Some(extra),
    })
}
