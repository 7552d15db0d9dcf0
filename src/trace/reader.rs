//! Reads and validates a recording. A cut-off last line (a killed process) replays up to
//! the last full line with a warning; anything else malformed fails naming FILE:LINE.

use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::Value;

use super::{SessionEvent, Stamped, TraceEvent, TraceHeader, FORMAT, SESSION_KINDS, TRACE_VERSION};
use crate::engine::events::{DecodeEvent, EVENT_VERSION};

/// A recording in memory.
#[derive(Debug, Clone)]
pub struct Trace {
    pub header: TraceHeader,
    pub events: Vec<Stamped>,
    /// Things skipped or repaired while reading (shown, never fatal).
    pub warnings: Vec<String>,
}

impl Trace {
    /// The closing summary line, when the file has one.
    pub fn recorded_summary(&self) -> Option<&super::Summary> {
        self.events.iter().rev().find_map(|s| match &s.event {
            TraceEvent::Session(SessionEvent::SessionEnd { summary }) => Some(&**summary),
            _ => None,
        })
    }
}

/// Reads `path`.
pub fn read_trace(path: &Path) -> Result<Trace> {
    let bytes = crate::read_bytes_bounded(path, MAX_RECORDING)
        .with_context(|| format!("cannot read the recording {}", path.display()))?;
    parse_trace(&bytes, &path.display().to_string())
}

/// Largest recording read (a day of a busy session is a few hundred MiB).
pub const MAX_RECORDING: u64 = 2 << 30;
/// Longest line of a recording: an event with a whole answer's text and top-k lists is
/// far shorter; a longer line is refused before it is parsed.
pub const MAX_LINE: usize = 4 << 20;

/// Parses recording bytes; `name` is used in messages.
pub fn parse_trace(bytes: &[u8], name: &str) -> Result<Trace> {
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // split yields an empty tail after a final newline.
    let n_lines = if ends_with_newline {
        lines.len() - 1
    } else {
        lines.len()
    };
    if n_lines == 0 || bytes.iter().all(|b| b.is_ascii_whitespace()) {
        bail!("{name}: empty file, not a specscope recording");
    }
    let header = parse_header(lines[0], name)?;
    super::validate::header(&header).map_err(|e| anyhow!("{name}:1: {e:#}"))?;
    let mut events = Vec::new();
    let mut warnings = Vec::new();
    let mut order = super::order::Order::new(header.event_version);
    for (i, raw) in lines.iter().enumerate().take(n_lines).skip(1) {
        let lineno = i + 1;
        ensure!(
            raw.len() <= MAX_LINE,
            "{name}:{lineno}: a line of {} MiB; no event is longer than {} MiB",
            raw.len() >> 20,
            MAX_LINE >> 20
        );
        let is_cut = i == n_lines - 1 && !ends_with_newline;
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(_) if is_cut => {
                warnings.push(cut_warning(name, lineno));
                break;
            }
            Err(e) => bail!("{name}:{lineno}: invalid UTF-8 ({e})"),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let value: Value = match serde_json::from_str(trimmed) {
            Ok(v) => v,
            Err(_) if is_cut => {
                warnings.push(cut_warning(name, lineno));
                break;
            }
            Err(e) => bail!("{name}:{lineno}: bad JSON: {e}"),
        };
        match parse_event(value, n_lines).with_context(|| format!("{name}:{lineno}"))? {
            Parsed::Event(s) => {
                order
                    .push(&s, lineno)
                    .with_context(|| format!("{name}:{lineno}"))?;
                events.push(*s)
            }
            Parsed::Unknown(kind, seq) => {
                order
                    .skip(seq, lineno)
                    .with_context(|| format!("{name}:{lineno}"))?;
                warnings.push(format!(
                    "{name}:{lineno}: unknown event kind `{kind}` skipped"
                ))
            }
        }
    }
    Ok(Trace {
        header,
        events,
        warnings,
    })
}

fn cut_warning(name: &str, lineno: usize) -> String {
    format!(
        "{name}:{lineno}: the last line is incomplete (the recording was cut off); replaying up to line {}",
        lineno - 1
    )
}

fn parse_header(raw: &[u8], name: &str) -> Result<TraceHeader> {
    let text = std::str::from_utf8(raw).map_err(|e| anyhow!("{name}:1: invalid UTF-8 ({e})"))?;
    let value: Value = serde_json::from_str(text.trim()).map_err(|e| {
        anyhow!("{name}:1: the header is not JSON ({e}); is this a specscope recording?")
    })?;
    match value.get("format").and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(other) => bail!("{name}:1: format is `{other}`, expected `{FORMAT}`"),
        None if value.get("event").is_some() || value.get("forward_passes").is_some() => bail!(
            "{name}:1: an NLD log, not a specscope recording: `specscope trace import {name} --out REC.jsonl` reads it"
        ),
        None => bail!("{name}:1: the header has no `format` field; is this a specscope recording?"),
    }
    let version = value.get("version");
    if version.and_then(Value::as_u64) != Some(u64::from(TRACE_VERSION)) {
        bail!(
            "{name}:1: unknown recording version {} (this specscope reads version {TRACE_VERSION})",
            shown(version)
        );
    }
    let ev = value.get("event_version");
    if !ev
        .and_then(Value::as_u64)
        .is_some_and(|v| (1..=u64::from(EVENT_VERSION)).contains(&v))
    {
        bail!(
            "{name}:1: unknown event version {} (this specscope reads versions 1 to {EVENT_VERSION})",
            shown(ev)
        );
    }
    serde_json::from_value(value).map_err(|e| anyhow!("{name}:1: bad header: {e}"))
}

/// A header field's value as the file has it (`"1"` and `-1` are not versions).
fn shown(v: Option<&Value>) -> String {
    v.map_or("(missing)".to_string(), Value::to_string)
}

enum Parsed {
    // Boxed: an event is far larger than the name of an unknown kind.
    Event(Box<Stamped>),
    Unknown(String, u64),
}

fn parse_event(mut value: Value, lines: usize) -> Result<Parsed> {
    let obj = value
        .as_object_mut()
        .ok_or_else(|| anyhow!("an event must be a JSON object"))?;
    let t = obj
        .remove("t")
        .and_then(|v| v.as_f64())
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| anyhow!("field `t` (seconds since the start) is missing or not a number"))?;
    let seq = obj
        .remove("seq")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| anyhow!("field `seq` is missing or not an integer"))?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("field `kind` is missing or not a string"))?
        .to_string();
    // Through text, not `from_value`: integer map keys (block sizes) are strings in JSON
    // and only the text deserializer turns them back into numbers.
    let text = value.to_string();
    let event = if SESSION_KINDS.contains(&kind.as_str()) {
        let e = serde_json::from_str::<SessionEvent>(&text)
            .with_context(|| format!("bad `{kind}` event"))?;
        super::validate::session(&e, lines).with_context(|| format!("bad `{kind}` event"))?;
        TraceEvent::Session(e)
    } else if DecodeEvent::KINDS.contains(&kind.as_str()) {
        let e = serde_json::from_str::<DecodeEvent>(&text)
            .with_context(|| format!("bad `{kind}` event"))?;
        super::validate::event(&e, lines).with_context(|| format!("bad `{kind}` event"))?;
        TraceEvent::Decode(e)
    } else {
        return Ok(Parsed::Unknown(kind, seq));
    };
    Ok(Parsed::Event(Box::new(Stamped { t, seq, event })))
}
