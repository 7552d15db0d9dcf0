//! `trace import`: a log NLD's tooling wrote, read into a recording. The rounds come
//! from one file (a confidence trace or SGLang's block stats); per-request files are
//! joined to them on `request_id`, or by order where the rounds carry no ids.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, ensure, Result};
use serde_json::{Map, Value};

use super::{ConfidenceRow, ImportSource, ImportedRequest, ImportedRound, CONFIDENCE_EVENT};
use crate::engine::events::{Blocks, Mode};
use crate::output::printable;
use crate::trace::{SessionEvent, Stamped, Trace, TraceEvent, TraceHeader};

mod read;

pub use read::MAX_ROUND_FORWARDS;
use read::{
    check_confidence, check_stats, confidence_rounds, detect, health_check, read_lines,
    stats_rounds, Lines, Parsed,
};

/// The formats `trace import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The RecGuide confidence trace (`linearspec_confidence_round`, versions 1 and 2).
    LinearspecConfidence,
    /// SGLang LinearSpec's per-block `stats_file` lines.
    SglangStats,
    /// SGLang's per-request timing records (joined to the rounds).
    SglangTiming,
    /// The PyTorch harness's per-request stats (joined to the rounds).
    PytorchRequests,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::LinearspecConfidence => "linearspec-confidence",
            Format::SglangStats => "sglang-linearspec-stats",
            Format::SglangTiming => "sglang-timing",
            Format::PytorchRequests => "pytorch-request-stats",
        }
    }

    fn per_request(self) -> bool {
        matches!(self, Format::SglangTiming | Format::PytorchRequests)
    }

    /// The format a line is in, from its fields.
    fn of_line(v: &Map<String, Value>) -> Option<Format> {
        let has = |k: &str| v.contains_key(k);
        if v.get("event").and_then(Value::as_str) == Some(CONFIDENCE_EVENT) {
            Some(Format::LinearspecConfidence)
        } else if has("forward_passes") && has("block_gen_positions") {
            Some(Format::SglangStats)
        } else if has("request_id") && has("ttft_s") && has("tpot_s") {
            Some(Format::SglangTiming)
        } else if has("request_id") && has("nfe") && has("tokens_per_forward_pass") {
            Some(Format::PytorchRequests)
        } else {
            None
        }
    }
}

/// What `trace import` was asked.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    pub format: Option<Format>,
    /// What ran, in the user's words.
    pub label: Option<String>,
    /// Drop the requests no per-request record names (a server's warm-up).
    pub joined_only: bool,
}

/// Joins one per-request file; says how, or why not.
fn join(
    p: &mut Parsed,
    records: &Lines,
    joined: &mut Vec<(usize, Map<String, Value>, String)>,
) -> Result<String> {
    let recs: Vec<&Map<String, Value>> = records
        .rows
        .iter()
        .map(|(_, r)| r)
        .filter(|r| {
            !r.get("request_id")
                .and_then(Value::as_str)
                .is_some_and(health_check)
        })
        .collect();
    let id_of = |r: &Map<String, Value>| {
        r.get("request_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    // On request_id: the record's id is the trace's, or ends with it (the PyTorch
    // harness prefixes `chatcmpl-pytorch-`).
    let ids: Vec<Option<String>> = p.requests.iter().map(|(id, _)| id.clone()).collect();
    if ids.iter().all(Option::is_some) {
        // Each record under its id and the id's last `-` part; an id twice is an error.
        let mut by_id: HashMap<&str, &Map<String, Value>> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for r in &recs {
            let Some(rid) = r.get("request_id").and_then(Value::as_str) else {
                continue;
            };
            ensure!(
                seen.insert(rid),
                "{}: request_id {rid} names two records; which one belongs to its rounds is unknown",
                records.name
            );
            by_id.insert(rid, r);
            if let Some((_, tail)) = rid.rsplit_once('-') {
                by_id.entry(tail).or_insert(r);
            }
        }
        let mut hits = Vec::new();
        for (k, id) in ids.iter().flatten().enumerate() {
            if let Some(one) = by_id.get(id.as_str()) {
                hits.push((k, (*one).clone()));
            }
        }
        if !hits.is_empty() {
            let n = hits.len();
            for (k, r) in hits {
                joined.push((k, r, records.name.clone()));
            }
            return Ok(format!(
                "{} on request_id ({n} of {} requests)",
                records.name,
                ids.len()
            ));
        }
    }
    // By order: the rounds' tokens add up to each record's completion_tokens in turn
    // (SGLang's block stats carry no request ids).
    let tokens = |r: &Map<String, Value>| r.get("completion_tokens").and_then(Value::as_u64);
    if p.requests.len() == 1
        && p.requests[0].0.is_none()
        && recs.iter().all(|r| tokens(r).is_some())
    {
        let rounds = std::mem::take(&mut p.requests[0].1);
        let mut split: Vec<(Option<String>, Vec<ImportedRound>)> = Vec::new();
        let mut it = rounds.into_iter();
        let mut fits = true;
        for r in &recs {
            let want = tokens(r).unwrap_or(0) as usize;
            let (mut got, mut mine) = (0, Vec::new());
            while got < want {
                match it.next() {
                    Some(x) => {
                        got += x.emitted();
                        mine.push(x);
                    }
                    None => break,
                }
            }
            fits &= got == want;
            split.push((id_of(r), mine));
        }
        let rest: Vec<ImportedRound> = it.collect();
        if fits && rest.is_empty() {
            for (k, (_, rounds)) in split.iter_mut().enumerate() {
                for (i, x) in rounds.iter_mut().enumerate() {
                    x.req = k as u64 + 1;
                    x.round = i + 1;
                }
            }
            for (k, r) in recs.iter().enumerate() {
                joined.push((k, (*r).clone(), records.name.clone()));
            }
            p.requests = split;
            return Ok(format!(
                "{} by order (the blocks' tokens add up to each record's completion_tokens)",
                records.name
            ));
        }
        // Put the rounds back as they were: one request of unknown id.
        let mut all: Vec<ImportedRound> = split.into_iter().flat_map(|(_, r)| r).collect();
        all.extend(rest);
        for (i, x) in all.iter_mut().enumerate() {
            x.req = 1;
            x.round = i + 1;
        }
        p.requests = vec![(None, all)];
    }
    bail!(
        "{}: no record joins the rounds (neither a request_id they share nor, in order, completion_tokens their blocks add up to)",
        records.name
    )
}

/// Per-request records joined to a request (by its index), with their file.
type Joined = HashMap<usize, (Map<String, Value>, String)>;

/// Reads `files` (one of rounds, any of per-request records) into a recording.
pub fn import(files: &[PathBuf], opts: &ImportOptions) -> Result<Trace> {
    let (format, lines, records, warnings) = read_files(files, opts)?;
    let mut p = match format {
        Format::LinearspecConfidence => confidence_rounds(&lines)?,
        _ => stats_rounds(&lines)?,
    };
    ensure!(
        p.requests.iter().any(|(_, r)| !r.is_empty()),
        "{}: only health-check rounds; nothing to import",
        lines.name
    );
    let mut joined = Vec::new();
    let mut joins = Vec::new();
    for r in &records {
        joins.push(join(&mut p, r, &mut joined)?);
    }
    let mut by_req: Joined = HashMap::new();
    for (k, r, f) in joined {
        by_req.insert(k, (r, f));
    }
    let mut unjoined = 0;
    if opts.joined_only {
        ensure!(
            !records.is_empty(),
            "--joined-only drops the requests no per-request record names: give a per-request file"
        );
        let old = std::mem::take(&mut p.requests);
        let mut kept = Joined::new();
        for (k, (id, mut rounds)) in old.into_iter().enumerate() {
            let Some(rec) = by_req.remove(&k) else {
                unjoined += 1;
                continue;
            };
            let new = p.requests.len();
            for r in &mut rounds {
                r.req = new as u64 + 1;
            }
            kept.insert(new, rec);
            p.requests.push((id, rounds));
        }
        ensure!(
            !p.requests.is_empty(),
            "--joined-only: no request has a record"
        );
        by_req = kept;
    }
    let mut warnings = warnings;
    warnings.extend(join_warnings(&p, &by_req));
    let mut header = header_of(&p, &by_req, &lines.name, joins, opts);
    if let Some(src) = header.source.as_mut() {
        src.unjoined_dropped = unjoined;
    }
    Ok(Trace {
        header,
        events: events_of(&p, by_req),
        warnings,
    })
}

/// What the joins leave unsaid: requests no record names (a server's warm-up) while
/// others are joined, and rounds holding fewer tokens than their record's
/// `completion_tokens` less the prefill's (a log cut short; the PyTorch harness's
/// first token is the prefill's, not a round's).
fn join_warnings(p: &Parsed, by_req: &Joined) -> Vec<String> {
    let mut out = Vec::new();
    if by_req.is_empty() {
        return out;
    }
    for (k, (id, rounds)) in p.requests.iter().enumerate() {
        let tokens: usize = rounds.iter().map(ImportedRound::emitted).sum();
        let id = printable(id.as_deref().unwrap_or("(no id)"));
        match by_req.get(&k) {
            None => out.push(format!(
                "request {id}: no per-request record names it ({} rounds, {tokens} tokens; a warm-up?): its rounds count in the statistics",
                rounds.len()
            )),
            Some((r, file)) => {
                let want = r.get("completion_tokens").and_then(Value::as_u64);
                if let Some(want) = want.filter(|w| (tokens as u64) + 1 < *w) {
                    out.push(format!(
                        "request {id}: its rounds hold {tokens} tokens, its record in {file} {want}: the log holds part of it"
                    ));
                }
            }
        }
    }
    out
}

/// The files read and sorted: the rounds file with its format, the per-request ones,
/// and the warnings reading them gave.
fn read_files(
    files: &[PathBuf],
    opts: &ImportOptions,
) -> Result<(Format, Lines, Vec<Lines>, Vec<String>)> {
    ensure!(!files.is_empty(), "name at least one log to import");
    if let Some(f) = opts.format.filter(|f| f.per_request()) {
        bail!(
            "--format {}: names the file of rounds (linearspec-confidence or sglang-stats); per-request files are recognised by their lines",
            f.name()
        );
    }
    let mut rounds_file = None;
    let mut records = Vec::new();
    let mut warnings = Vec::new();
    let mut named = std::collections::HashSet::new();
    for f in files {
        let key = f.canonicalize().unwrap_or_else(|_| f.clone());
        ensure!(named.insert(key), "{}: named twice", f.display());
        let lines = read_lines(f)?;
        // `--format` names the rounds file's format; per-request files are detected.
        let forced = opts.format.filter(|f| !f.per_request());
        let format = match detect(&lines, None) {
            Ok(fm) if fm.per_request() => fm,
            _ => detect(&lines, forced)?,
        };
        warnings.extend(lines.warnings.iter().cloned());
        if format.per_request() {
            records.push(lines);
        } else {
            ensure!(
                rounds_file.is_none(),
                "{}: a second file of rounds; import one log of rounds at a time (its per-request files may join it)",
                lines.name
            );
            rounds_file = Some((format, lines));
        }
    }
    let (format, lines) = rounds_file.ok_or_else(|| {
        anyhow!("no file of rounds: per-request records join a confidence trace or SGLang's block stats")
    })?;
    Ok((format, lines, records, warnings))
}

/// The recording's header: LinearSpec at the log's block size, the model its records
/// name, and where it all came from.
fn header_of(
    p: &Parsed,
    by_req: &Joined,
    rounds_file: &str,
    joins: Vec<String>,
    opts: &ImportOptions,
) -> TraceHeader {
    let names: std::collections::BTreeSet<&str> = by_req
        .values()
        .filter_map(|(r, _)| r.get("model").and_then(Value::as_str))
        .collect();
    let model = match names.into_iter().collect::<Vec<_>>().as_slice() {
        [one] => one.to_string(),
        _ => "unknown model".to_string(),
    };
    let model = printable(&model);
    let label = opts.label.clone().unwrap_or_else(|| {
        format!(
            "{}, {model}",
            p.backend.clone().unwrap_or_else(|| p.format_label.clone())
        )
    });
    let label = printable(&label);
    let device = p.backend.as_deref().map(printable);
    let mut header = TraceHeader::new(
        model,
        device.unwrap_or_else(|| "device not in the log".into()),
    );
    let mut o = header.options.decode.clone();
    o.mode = Mode::Linear;
    o.overlap = false;
    let first_block = p
        .requests
        .iter()
        .flat_map(|(_, r)| r)
        .map(ImportedRound::block)
        .next();
    if let Some(b) = first_block.filter(|b| *b >= 1) {
        o.blocks = Blocks::Fixed(b);
    }
    header.set_options(&o);
    header.created_unix = 0;
    let here = crate::Provenance::here();
    header.command = here.command;
    header.machine = here.machine;
    header.source = Some(ImportSource {
        format: p.format_label.clone(),
        label,
        rounds_file: rounds_file.to_string(),
        joined: joins,
        health_checks_dropped: p.checks,
        health_check_rounds_dropped: p.check_rounds,
        unjoined_dropped: 0,
        absent: absent_fields(p),
    });
    header
}

/// The events in the log's order: each request's record where its first round is,
/// stamped with seconds since the log's first time stamp.
fn events_of(p: &Parsed, mut by_req: Joined) -> Vec<Stamped> {
    let mut all: Vec<(usize, TraceEvent, Option<f64>)> = Vec::new();
    for (k, (id, rounds)) in p.requests.iter().enumerate() {
        let Some(first) = rounds.first() else {
            continue;
        };
        let (record, record_file) = match by_req.remove(&k) {
            Some((r, f)) => (Some(r), Some(f)),
            None => (None, None),
        };
        all.push((
            first.line,
            SessionEvent::ImportedRequest(ImportedRequest {
                req: k as u64 + 1,
                request_id: id.clone(),
                record,
                record_file,
            })
            .into(),
            None,
        ));
        for r in rounds {
            let t = r.row.as_ref().and_then(|c| c.created_at_unix);
            all.push((
                r.line,
                SessionEvent::ImportedRound(Box::new(r.clone())).into(),
                t,
            ));
        }
    }
    all.sort_by_key(|(line, e, _)| {
        (
            *line,
            !matches!(e, TraceEvent::Session(SessionEvent::ImportedRequest(_))),
        )
    });
    let t0 = all
        .iter()
        .filter_map(|(_, _, t)| *t)
        .fold(f64::INFINITY, f64::min);
    let mut last = 0.0;
    all.into_iter()
        .enumerate()
        .map(|(seq, (_, event, t))| {
            // Lines without a stamp keep the last one.
            if let Some(t) = t.filter(|t| t.is_finite()) {
                last = f64::max(last, t - t0);
            }
            Stamped {
                t: last,
                seq: seq as u64,
                event,
            }
        })
        .collect()
}

/// What the rounds' format does not carry.
fn absent_fields(p: &Parsed) -> Vec<String> {
    let rounds: Vec<&ImportedRound> = p.requests.iter().flat_map(|(_, r)| r).collect();
    let none = |f: &dyn Fn(&ConfidenceRow) -> bool| {
        rounds.iter().all(|r| r.row.as_ref().is_none_or(|c| !f(c)))
    };
    let mut out = Vec::new();
    if rounds.iter().all(|r| r.row.is_none()) {
        out.push("token ids and confidences (SGLang's block stats count tokens only)".into());
        if p.requests.iter().all(|(id, _)| id.is_none()) {
            out.push("request ids (no per-request file joined)".into());
        }
        return out;
    }
    if none(&|c| c.accepted_draft_token_ids.is_some()) {
        out.push("the accepted tokens' ids (text of accepted drafts)".into());
    }
    if none(&|c| c.draft_forward_passes.is_some()) {
        out.push("forward counts (TPF counts LinearSpec's 2 per round)".into());
    }
    out.push("the draft's margins and top-k, the verifier's tokens after the first rejection, branch rows".into());
    out
}

/// An imported round read back from a recording: its source's checks.
pub fn check_round(r: &ImportedRound) -> Result<()> {
    ensure!(r.round >= 1, "field `round` is 0: rounds count from 1");
    match (&r.row, &r.sglang) {
        (Some(c), None) => check_confidence(c),
        (None, None) if r.confidence.is_some() => {
            bail!("field `confidence` is not a confidence-trace line")
        }
        (None, Some(s)) => check_stats(s),
        _ => bail!("an imported round holds either `confidence` or `sglang`"),
    }
}

/// Puts a `token_text` line before each imported round whose ids (rejected draft,
/// verifier's token, accepted ids) are new, with the text `text` gives them.
pub fn add_token_texts(trace: &mut Trace, text: impl Fn(u32) -> Option<String>) {
    let mut known = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(trace.events.len());
    for s in std::mem::take(&mut trace.events) {
        if let TraceEvent::Session(SessionEvent::ImportedRound(r)) = &s.event {
            let ids = r.row.iter().flat_map(|c| {
                c.accepted_draft_token_ids
                    .iter()
                    .flatten()
                    .copied()
                    .chain(c.rejected_draft_token_id)
                    .chain(c.rejected_correct_token_id)
            });
            let tokens: Vec<(u32, String)> = ids
                .filter(|id| known.insert(*id))
                .filter_map(|id| Some((id, text(id)?)))
                .collect();
            if !tokens.is_empty() {
                out.push(Stamped {
                    t: s.t,
                    seq: 0,
                    event: SessionEvent::TokenText { tokens }.into(),
                });
            }
        }
        out.push(s);
    }
    for (i, s) in out.iter_mut().enumerate() {
        s.seq = i as u64;
    }
    trace.events = out;
}
