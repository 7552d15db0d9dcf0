//! Reading an NLD log: its JSON lines (a cut-off last line dropped), which format it
//! is, and its rounds, each field range-checked and named on failure.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::{Map, Value};

use super::super::{BlockStats, ConfidenceRow, ImportedRound, CONFIDENCE_EVENT};
use super::Format;

/// The largest vocabulary a rank may range over.
pub(super) const MAX_VOCAB: usize = 1 << 22;

/// Most forwards one imported round may count (a LinearSpec block takes two).
pub const MAX_ROUND_FORWARDS: u64 = 64;

/// Largest log read (the public ones are far smaller).
pub(super) const MAX_LOG: u64 = 1 << 30;

/// A log's JSON lines with their numbers; a cut-off last line is dropped with a
/// warning, anything else malformed fails naming FILE:LINE.
pub(super) struct Lines {
    pub(super) name: String,
    pub(super) rows: Vec<(usize, Map<String, Value>)>,
    pub(super) warnings: Vec<String>,
}

pub(super) fn read_lines(path: &Path) -> Result<Lines> {
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
pub(super) fn detect(lines: &Lines, forced: Option<Format>) -> Result<Format> {
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
pub(super) fn typed<T: serde::de::DeserializeOwned>(raw: &Map<String, Value>) -> Result<T> {
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
pub(super) fn health_check(id: &str) -> bool {
    id.starts_with("HEALTH_CHECK_")
}

/// Rounds grouped by request in order of first appearance.
pub(super) struct Parsed {
    pub(super) format_label: String,
    /// Each request's id (none: SGLang's block stats) and rounds.
    pub(super) requests: Vec<(Option<String>, Vec<ImportedRound>)>,
    pub(super) checks: usize,
    pub(super) check_rounds: usize,
    pub(super) backend: Option<String>,
}

pub(super) fn confidence_rounds(lines: &Lines) -> Result<Parsed> {
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
pub(super) fn check_counts(
    r: &ConfidenceRow,
    block: usize,
    emitted: usize,
) -> Result<Option<usize>> {
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
pub(super) fn check_confidence(r: &ConfidenceRow) -> Result<()> {
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

pub(super) fn stats_rounds(lines: &Lines) -> Result<Parsed> {
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
pub(super) fn check_stats(s: &BlockStats) -> Result<()> {
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
