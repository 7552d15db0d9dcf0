//! Prompt files: JSONL, one request per line, with a family tag.

use std::path::Path;

use anyhow::{bail, Context, Result};

use serde::{Deserialize, Serialize};

use crate::model::{ChatMessage, TextTokenizer};

/// One line of a prompt file: the corpus writes them (`specscope train`), bench, eval
/// and survival read them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRecord {
    #[serde(default = "other")]
    pub family: String,
    /// What kind of request it is (`word_problem`, `reverse`, `greeting`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The last user message (what `specscope run --prompt` would get).
    pub prompt: String,
    /// Earlier turns of a multi-turn prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ChatMessage>,
    /// The expected answer, when known: the `Answer:` line's value (math, arithmetic),
    /// else a string a right answer contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Strings a faithful answer contains (the prompt's names, numbers, list, words).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<String>,
    /// `FILE:LINE` it was read from (empty when made in memory), for messages.
    #[serde(skip)]
    pub source: String,
}

fn other() -> String {
    "other".to_string()
}

impl PromptRecord {
    pub fn messages(&self) -> Vec<ChatMessage> {
        let mut m = self.history.clone();
        m.push(ChatMessage::new("user", &self.prompt));
        m
    }
}

/// One benchmark request, encoded.
#[derive(Debug, Clone)]
pub struct BenchPrompt {
    pub family: String,
    pub task: Option<String>,
    pub tokens: Vec<u32>,
    pub answer: Option<String>,
    pub expect: Vec<String>,
}

/// Reads a JSONL prompt file (`{"prompt": ..., "family": ..., "history": [...]}` per line;
/// blank lines skipped). Errors name the file and line.
pub fn read_prompt_file(path: &Path) -> Result<Vec<PromptRecord>> {
    // Prompt files are read whole; 256 MiB is far above any prompt set.
    let text = crate::read_bounded(path, 256 << 20)
        .with_context(|| format!("cannot read prompt file {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let rec: PromptRecord = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not a prompt record (expected {{\"prompt\": ..., \"family\": ...}})",
                path.display(),
                i + 1
            )
        })?;
        if rec.prompt.trim().is_empty() {
            bail!("{}:{}: empty prompt", path.display(), i + 1);
        }
        // Families and tasks are printed to the terminal and drawn into SVG labels:
        // an escape sequence or a control character is refused, not passed on.
        for (field, text) in [("family", Some(&rec.family)), ("task", rec.task.as_ref())] {
            if text.is_some_and(|t| t.chars().any(char::is_control)) {
                bail!(
                    "{}:{}: `{field}` holds a control character",
                    path.display(),
                    i + 1
                );
            }
        }
        out.push(PromptRecord {
            source: format!("{}:{}", path.display(), i + 1),
            ..rec
        });
    }
    if out.is_empty() {
        bail!(
            "{}: no prompts (expected one JSON record per line)",
            path.display()
        );
    }
    Ok(out)
}

/// The records in file order, at most `limit` per family after the first `skip` of each.
pub fn per_family(
    records: &[PromptRecord],
    skip: usize,
    limit: Option<usize>,
) -> Vec<&PromptRecord> {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    records
        .iter()
        .filter(|r| {
            let n = seen.entry(r.family.as_str()).or_default();
            *n += 1;
            *n > skip && limit.is_none_or(|l| *n <= skip + l)
        })
        .collect()
}

/// Encodes records with the chat template, keeping at most `limit` per family after
/// the first `skip` of each; a prompt that does not fit a `context` of tokens (with
/// room for one more) fails naming its line.
pub fn encode(
    records: &[PromptRecord],
    tok: &TextTokenizer,
    skip: usize,
    limit: Option<usize>,
    context: usize,
) -> Result<Vec<BenchPrompt>> {
    let kept = per_family(records, skip, limit);
    if kept.is_empty() {
        bail!(
            "no prompts left to run of the {} read: --skip {skip} --limit {} keeps none",
            records.len(),
            limit.map_or("(all)".to_string(), |l| l.to_string())
        );
    }
    kept.into_iter()
        .map(|r| {
            let at = || match r.source.as_str() {
                "" => format!("the prompt `{}`", r.prompt),
                s => s.to_string(),
            };
            let tokens = tok.encode_chat(&r.messages(), false).with_context(at)?;
            crate::engine::check_prompt_len(tokens.len(), context).with_context(at)?;
            Ok(BenchPrompt {
                family: r.family.clone(),
                task: r.task.clone(),
                tokens,
                answer: r.answer.clone(),
                expect: r.expect.clone(),
            })
        })
        .collect()
}

/// Most requests one load may run (`requests_at`): far above any bench here.
pub const MAX_REQUESTS: usize = 1 << 20;

/// The requests a load of `concurrency` runs: the prompt list as many whole times as
/// it takes to give every slot `per_slot` requests (at least once). From two per slot
/// the load is held until at least half of them have finished instead of draining
/// from its first forward, and every prompt, so every family, weighs the same at every
/// load. A repeat is its prompt again: at temperature 0 it decodes the same tokens,
/// and it counts again. `per_slot` 0 is a closed batch: each prompt once, and where
/// the list is shorter than the load, the list again in order up to `concurrency`
/// requests, so that the load a result is labelled with was in flight at its start
/// (then the first prompts, so their families, count once more than the rest).
pub fn requests_at(
    prompts: &[BenchPrompt],
    concurrency: usize,
    per_slot: usize,
) -> Result<Vec<BenchPrompt>> {
    let n = if per_slot == 0 {
        prompts.len().max(concurrency)
    } else {
        let want = concurrency.saturating_mul(per_slot);
        let passes = want.div_ceil(prompts.len().max(1)).max(1);
        passes.saturating_mul(prompts.len())
    };
    if n > MAX_REQUESTS {
        bail!(
            "{n} requests at concurrency {concurrency} ({per_slot} per slot over {} prompts): more than {MAX_REQUESTS}",
            prompts.len()
        );
    }
    Ok(prompts.iter().cycle().take(n).cloned().collect())
}

/// `requests_at` with every repeat made a new request: pass k's prompts end with their
/// first token k more times. For a simulated backbone, whose answer is keyed by its
/// prompt, that is a fresh answer (it has as many as a load needs); never for a
/// checkpoint, whose prompts would change meaning.
pub fn fresh_requests_at(
    prompts: &[BenchPrompt],
    concurrency: usize,
    per_slot: usize,
) -> Result<Vec<BenchPrompt>> {
    let mut out = requests_at(prompts, concurrency, per_slot)?;
    for (i, p) in out.iter_mut().enumerate() {
        let pass = i / prompts.len().max(1);
        if let Some(&first) = p.tokens.first() {
            p.tokens.extend(std::iter::repeat_n(first, pass));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_runs_the_prompt_list_whole_until_each_slot_has_its_requests() {
        let prompts: Vec<BenchPrompt> = (0..3u32)
            .map(|i| BenchPrompt {
                family: "f".into(),
                task: None,
                tokens: vec![i],
                answer: None,
                expect: Vec::new(),
            })
            .collect();
        let firsts = |c, k| -> Vec<u32> {
            requests_at(&prompts, c, k)
                .unwrap()
                .iter()
                .map(|p| p.tokens[0])
                .collect()
        };
        // Enough prompts: each once.
        assert_eq!(firsts(1, 2), [0, 1, 2]);
        assert_eq!(firsts(2, 0), [0, 1, 2]);
        assert_eq!(firsts(3, 1), [0, 1, 2]);
        // A closed batch fills the load it is labelled with, however short the list.
        assert_eq!(firsts(4, 0), [0, 1, 2, 0]);
        for c in 1..40 {
            assert!(requests_at(&prompts, c, 0).unwrap().len() >= c, "C = {c}");
        }
        // Too few: the whole list again, in order, until C × per_slot are reached.
        assert_eq!(firsts(4, 1), [0, 1, 2, 0, 1, 2]);
        assert_eq!(firsts(4, 2), [0, 1, 2, 0, 1, 2, 0, 1, 2]);
        // A request count past the bound is refused, naming the load.
        let err = requests_at(&prompts, usize::MAX, 2).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }

    /// Every control character, in a family or a task, on any line: refused naming
    /// the file, the line and the field.
    #[test]
    fn control_characters_in_names_are_refused_naming_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        let good = r#"{"prompt": "hi", "family": "qa", "task": "greeting"}"#;
        let controls = (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32);
        for (k, c) in controls.enumerate() {
            let field = if k % 2 == 0 { "family" } else { "task" };
            let bad = serde_json::json!({"prompt": "hi", "family": "qa", "task": "t"});
            let mut bad = bad;
            bad[field] = format!("a{c}[31mb").into();
            let line = 1 + k % 3;
            let mut lines = vec![good.to_string(); 3];
            lines[line - 1] = bad.to_string();
            std::fs::write(&path, lines.join("\n")).unwrap();
            let e = read_prompt_file(&path).unwrap_err().to_string();
            assert!(
                e.contains(&format!("p.jsonl:{line}:")) && e.contains(field),
                "{c:?}: {e}"
            );
        }
        std::fs::write(&path, good).unwrap();
        assert_eq!(read_prompt_file(&path).unwrap().len(), 1);
    }

    #[test]
    fn per_family_skips_then_limits_each_family() {
        let recs: Vec<PromptRecord> = ["a", "b", "a", "a", "b", "a"]
            .iter()
            .enumerate()
            .map(|(i, f)| PromptRecord {
                prompt: format!("{f}{i}"),
                family: f.to_string(),
                task: None,
                history: Vec::new(),
                answer: None,
                expect: Vec::new(),
                source: String::new(),
            })
            .collect();
        let names = |skip, limit| -> Vec<String> {
            per_family(&recs, skip, limit)
                .iter()
                .map(|r| r.prompt.clone())
                .collect()
        };
        assert_eq!(names(0, Some(1)), ["a0", "b1"]);
        assert_eq!(names(1, Some(2)), ["a2", "a3", "b4"]);
        assert_eq!(names(2, None), ["a3", "a5"]);
        assert!(names(9, None).is_empty());
    }
}
