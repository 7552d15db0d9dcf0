//! `trace import`: a log NLD's tooling wrote, read into a recording. The rounds come
//! from one file (a confidence trace or SGLang's block stats); per-request files are
//! joined to them on `request_id`, or by order where the rounds carry no ids.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::{Map, Value};

use super::{
    BlockStats, ConfidenceRow, ImportSource, ImportedRequest, ImportedRound, CONFIDENCE_EVENT,
};
use crate::engine::events::{Blocks, Mode};
use crate::output::printable;
use crate::trace::{SessionEvent, Stamped, Trace, TraceEvent, TraceHeader};

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

/// The largest vocabulary a rank may range over.
const MAX_VOCAB: usize = 1 << 22;

/// Most forwards one imported round may count (a LinearSpec block takes two).
pub const MAX_ROUND_FORWARDS: u64 = 64;

/// Largest log read (the public ones are far smaller).
const MAX_LOG: u64 = 1 << 30;

/// A log's JSON lines with their numbers; a cut-off last line is dropped with a
/// warning, anything else malformed fails naming FILE:LINE.
struct Lines {
    name: String,
    rows: Vec<(usize, Map<String, Value>)>,
    warnings: Vec<String>,
}

fn read_lines(path: &Path) -> Result<Lines> {
    let name = path.display().to_string();
    let bytes = crate::read_bytes_bounded(path, MAX_LOG)?;
    let ends = bytes.last() == Some(&b'\n');
    let parts: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let n = if ends { parts.len() - 1 } else { parts.len() };
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let cut_at = |lineno: usize| {
        format!(
            "{name}:{lineno}: the last line is incomplete; read up to line {}",
            lineno - 1
        )
    };
    for (i, raw) in parts.iter().enumerate().take(n) {
        let lineno = i + 1;
        let cut = i + 1 == n && !ends;
        let parsed = std::str::from_utf8(raw)
            .map_err(|e| anyhow!("{name}:{lineno}: invalid UTF-8 ({e})"))
            .map(str::trim)
            .and_then(|t| {
                if t.is_empty() {
                    return Ok(None);
                }
                serde_json::from_str::<Value>(t)
                    .map(Some)
                    .map_err(|e| anyhow!("{name}:{lineno}: bad JSON: {e}"))
            });
        match parsed {
            Ok(None) => {}
            Ok(Some(Value::Object(m))) => rows.push((lineno, m)),
            Ok(Some(_)) => bail!("{name}:{lineno}: a line must be a JSON object"),
            // A killed writer leaves a partial last line: read up to it.
            Err(_) if cut => {
                warnings.push(cut_at(lineno));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    ensure!(!rows.is_empty(), "{name}: no lines to import");
    Ok(Lines {
        name,
        rows,
        warnings,
    })
}

/// A file with its format: `forced`, else the first line's, and every line in it.
fn detect(lines: &Lines, forced: Option<Format>) -> Result<Format> {
    let (first_line, first) = &lines.rows[0];
    if first.get("format").and_then(Value::as_str) == Some(crate::trace::FORMAT) {
        bail!(
            "{}: this is already a specscope recording; `specscope replay` plays it",
            lines.name
        );
    }
    let format = match forced {
        Some(f) => f,
        None => Format::of_line(first).ok_or_else(|| {
            anyhow!(
                "{}:{first_line}: not a format `trace import` reads (a confidence trace's `event: {CONFIDENCE_EVENT}`, SGLang's block stats, SGLang's timing or the PyTorch request stats)",
                lines.name
            )
        })?,
    };
    for (lineno, row) in &lines.rows {
        let f = Format::of_line(row);
        ensure!(
            f == Some(format),
            "{}:{lineno}: a line of {} in a file of {}",
            lines.name,
            f.map_or("an unknown format", Format::name),
            format.name()
        );
    }
    Ok(format)
}

/// A line read as `T`; a value of the wrong type is named by its field (serde names
/// only the type): each field alone is read as `T`, and the first that fails for a
/// reason other than the fields it lacks is the one.
fn typed<T: serde::de::DeserializeOwned>(raw: &Map<String, Value>) -> Result<T> {
    serde_json::from_value(Value::Object(raw.clone())).map_err(|e| {
        for (k, v) in raw {
            let one = Map::from_iter([(k.clone(), v.clone())]);
            if let Err(why) = serde_json::from_value::<T>(Value::Object(one)) {
                if !why.to_string().starts_with("missing field") {
                    return anyhow!("field `{k}`: {why}");
                }
            }
        }
        anyhow!("{e}")
    })
}

/// A health-check request of the server, not a user's.
fn health_check(id: &str) -> bool {
    id.starts_with("HEALTH_CHECK_")
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

/// Rounds grouped by request in order of first appearance.
struct Parsed {
    format_label: String,
    /// Each request's id (none: SGLang's block stats) and rounds.
    requests: Vec<(Option<String>, Vec<ImportedRound>)>,
    checks: usize,
    check_rounds: usize,
    backend: Option<String>,
}

fn confidence_rounds(lines: &Lines) -> Result<Parsed> {
    let mut order: Vec<(Option<String>, Vec<ImportedRound>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let (mut checks, mut check_rounds) = (std::collections::HashSet::new(), 0);
    let mut versions = std::collections::BTreeSet::new();
    let mut backend = None;
    for (lineno, raw) in &lines.rows {
        let at = || format!("{}:{lineno}", lines.name);
        let row: ConfidenceRow =
            typed(raw).with_context(|| format!("{}: bad confidence-trace line", at()))?;
        check_confidence(&row).with_context(at)?;
        versions.insert(row.schema_version.unwrap_or(1));
        if backend.is_none() {
            backend.clone_from(&row.backend);
        }
        let id = row
            .request_id
            .clone()
            .ok_or_else(|| anyhow!("{}: field `request_id` is missing", at()))?;
        if health_check(&id) {
            checks.insert(id);
            check_rounds += 1;
            continue;
        }
        let k = *index.entry(id.clone()).or_insert_with(|| {
            order.push((Some(id), Vec::new()));
            order.len() - 1
        });
        let rounds = &mut order[k].1;
        rounds.push(ImportedRound {
            req: k as u64 + 1,
            round: rounds.len() + 1,
            line: *lineno,
            confidence: Some(raw.clone()),
            sglang: None,
            row: Some(row),
        });
    }
    let v: Vec<String> = versions.iter().map(|v| format!("v{v}")).collect();
    Ok(Parsed {
        format_label: format!("linearspec-confidence {}", v.join("+")),
        requests: order,
        checks: checks.len(),
        check_rounds,
        backend,
    })
}

/// A line's counts against one another: emitted tokens, accepted and matched drafts,
/// the rejection; returns the accepted drafts when the line says.
fn check_counts(r: &ConfidenceRow, block: usize, emitted: usize) -> Result<Option<usize>> {
    ensure!(
        emitted >= 1,
        "field `emitted_tokens` is 0: a round emits at least the verifier's token"
    );
    let accepted = r.accepted_draft_tokens.or(r.matched_draft_tokens);
    if let Some(a) = accepted {
        ensure!(
            a < block,
            "field `accepted_draft_tokens` is {a}: a block of {block} drafts {}",
            block - 1
        );
        // The accepted drafts and the verifier's token; fewer only where the answer
        // ended in the block (`eos_hit`).
        let eos = r.eos_hit == Some(true);
        ensure!(
            emitted == a + 1 || (eos && emitted <= a + 1),
            "field `emitted_tokens` is {emitted} after {a} accepted drafts: a round emits them and the verifier's token{}",
            if eos { "" } else { " (fewer only with `eos_hit`)" }
        );
    }
    if let (Some(m), Some(a)) = (r.matched_draft_tokens, r.accepted_draft_tokens) {
        ensure!(
            a <= m && (a == m || r.eos_hit == Some(true)),
            "field `accepted_draft_tokens` is {a} against `matched_draft_tokens` {m}: they differ only where the answer ended (`eos_hit`)"
        );
    }
    if let (Some(h), q) = (r.has_rejection, r.rejected_position) {
        ensure!(
            h == q.is_some(),
            "field `has_rejection` is {h} but `rejected_position` is {}",
            q.map_or("null".to_string(), |q| q.to_string())
        );
    }
    Ok(accepted)
}

/// A confidence line's fields agree with each other and with the schema.
fn check_confidence(r: &ConfidenceRow) -> Result<()> {
    match r.schema_version {
        None | Some(1) | Some(2) => {}
        Some(v) => bail!("field `schema_version` is {v}: this specscope reads versions 1 and 2"),
    }
    let block = r
        .block_size
        .ok_or_else(|| anyhow!("field `block_size` is missing"))?;
    ensure!(
        (1..=4096).contains(&block),
        "field `block_size` is {block}: expected 1 to 4096"
    );
    let emitted = r
        .emitted_tokens
        .ok_or_else(|| anyhow!("field `emitted_tokens` is missing"))?;
    ensure!(
        emitted <= block,
        "field `emitted_tokens` is {emitted}, more than `block_size` {block}"
    );
    let accepted = check_counts(r, block, emitted)?;
    if let Some(c) = r.accepted_draft_confidence_mean {
        ensure!(
            c.is_finite() && (0.0..=1.0).contains(&c),
            "field `accepted_draft_confidence_mean` is {c}: expected 0 to 1"
        );
    }
    for (field, v) in [
        ("confidence_drop_abs", r.confidence_drop_abs),
        ("confidence_drop_pct", r.confidence_drop_pct),
        ("created_at_unix", r.created_at_unix),
    ] {
        if let Some(x) = v {
            ensure!(x.is_finite(), "field `{field}` is not a finite number");
        }
    }
    if let (Some(a), Some(p)) = (accepted, &r.accepted_positions) {
        ensure!(
            p.iter().copied().eq(1..=a),
            "field `accepted_positions` is not 1..={a} (`accepted_draft_tokens`)"
        );
    }
    if let Some(list) = &r.accepted_draft_confidences {
        if let Some(a) = accepted {
            ensure!(
                list.len() == a,
                "field `accepted_draft_confidences` has {} values for {a} accepted drafts",
                list.len()
            );
        }
        ensure!(
            list.iter()
                .all(|c| c.is_finite() && (0.0..=1.0).contains(c)),
            "field `accepted_draft_confidences` holds a value outside 0 to 1"
        );
    }
    if let (Some(a), Some(ids)) = (accepted, &r.accepted_draft_token_ids) {
        ensure!(
            ids.len() == a,
            "field `accepted_draft_token_ids` has {} ids for {a} accepted drafts",
            ids.len()
        );
    }
    if let Some(c) = r.rejected_draft_confidence {
        ensure!(
            c.is_finite() && (0.0..=1.0).contains(&c),
            "field `rejected_draft_confidence` is {c}: expected 0 to 1"
        );
    }
    if let Some(d) = r.draft_forward_passes {
        ensure!(
            d < MAX_ROUND_FORWARDS,
            "field `draft_forward_passes` is {d}: a round takes a few"
        );
    }
    if let Some(k) = r.rejected_correct_token_rank {
        ensure!(
            (1..=MAX_VOCAB).contains(&k),
            "field `rejected_correct_token_rank` is {k}: ranks count from 1 to a vocabulary's size"
        );
    }
    if let Some(q) = r.rejected_position {
        ensure!(
            (1..block).contains(&q),
            "field `rejected_position` is {q}: a block of {block} has positions 1 to {}",
            block - 1
        );
        if let Some(a) = accepted {
            ensure!(
                q == a + 1,
                "field `rejected_position` is {q} after {a} accepted drafts"
            );
        }
    }
    Ok(())
}

fn stats_rounds(lines: &Lines) -> Result<Parsed> {
    let mut rounds = Vec::new();
    for (lineno, raw) in &lines.rows {
        let at = || format!("{}:{lineno}", lines.name);
        let s: BlockStats =
            typed(raw).with_context(|| format!("{}: bad SGLang stats line", at()))?;
        check_stats(&s).with_context(at)?;
        rounds.push(ImportedRound {
            req: 1,
            round: rounds.len() + 1,
            line: *lineno,
            confidence: None,
            sglang: Some(s),
            row: None,
        });
    }
    Ok(Parsed {
        format_label: Format::SglangStats.name().into(),
        requests: vec![(None, rounds)],
        checks: 0,
        check_rounds: 0,
        backend: Some("SGLang LinearSpec".into()),
    })
}

/// A block's figures fit in it.
fn check_stats(s: &BlockStats) -> Result<()> {
    let b = s.block_gen_positions;
    ensure!(
        s.tokens >= 1,
        "field `tokens` is 0: a block emits at least the verifier's token"
    );
    ensure!(
        s.forward_passes >= 1,
        "field `forward_passes` is 0: a block takes a verify at least"
    );
    ensure!(
        (1..=4096).contains(&b),
        "field `block_gen_positions` is {b}: expected 1 to 4096"
    );
    ensure!(
        s.tokens <= b,
        "field `tokens` is {}, more than `block_gen_positions` {b}",
        s.tokens
    );
    ensure!(
        s.forward_passes <= MAX_ROUND_FORWARDS,
        "field `forward_passes` is {}: a block takes a few",
        s.forward_passes
    );
    ensure!(
        s.acceptance_rate.is_finite() && (0.0..=1.0).contains(&s.acceptance_rate),
        "field `acceptance_rate` is {}: expected 0 to 1",
        s.acceptance_rate
    );
    let rate = s.tokens as f64 / b as f64;
    ensure!(
        (s.acceptance_rate - rate).abs() < 1e-6,
        "field `acceptance_rate` is {} where `tokens` / `block_gen_positions` is {rate}",
        s.acceptance_rate
    );
    Ok(())
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
    let mut o = header.options.clone();
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
