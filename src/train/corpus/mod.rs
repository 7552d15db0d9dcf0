//! The self-made training corpus: chat exchanges in four families that behave
//! differently under speculation. Deterministic for a seed.
//!
//! - math: arithmetic word problems, restated and worked step by step, `Answer:` line;
//! - code: small Python functions over a list, run on the prompt's example;
//! - qa: capitals from a built-in table, lists, and word tasks (reverse, count, sort);
//! - first: what newcomers type first (greetings, short arithmetic, function requests
//!   without an example, capitals, and a polite refusal for everything else).
//!
//! Answers restate the prompt's entities (names, objects, numbers, lists, words)
//! systematically, so copying from the context is learnable.

mod code;
pub mod first;
mod math;
mod qa;

use serde::{Deserialize, Serialize};

pub use crate::bench::prompts::PromptRecord;
use crate::model::ChatMessage;
use crate::rng::Rng;

/// Prompt family, as prompt files tag them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Math,
    Code,
    Qa,
    First,
}

impl Family {
    pub const ALL: [Family; 4] = [Family::Math, Family::Code, Family::Qa, Family::First];

    pub fn name(self) -> &'static str {
        match self {
            Family::Math => "math",
            Family::Code => "code",
            Family::Qa => "qa",
            Family::First => "first",
        }
    }
}

/// One conversation; the last message is the assistant's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub family: Family,
    /// What kind of request the last user turn is (`word_problem`, `reverse`, …).
    pub task: &'static str,
    pub messages: Vec<ChatMessage>,
    /// The expected answer: the `Answer:` line's value (math, arithmetic), the printed
    /// result (code), or a string a right answer contains (qa).
    pub answer: Option<String>,
    /// Strings a faithful answer contains: the prompt's person, objects and numbers,
    /// its example list, its words.
    pub expect: Vec<String>,
}

trait Pick {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T;
    fn range(&mut self, lo: i64, hi: i64) -> i64;
    fn chance(&mut self, p: f64) -> bool;
}

impl Pick for Rng {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next_u64() % xs.len() as u64) as usize]
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}

/// The families in rotation: math weighs most (its exact answers are the hardest to
/// learn), first prompts are short.
const ROTATION: [Family; 9] = [
    Family::Math,
    Family::Code,
    Family::Qa,
    Family::Math,
    Family::First,
    Family::Code,
    Family::Math,
    Family::Qa,
    Family::First,
];

/// The generator of one exchange of a stream: each index its own, so any exchange
/// can be made without the ones before it.
fn exchange_rng(seed: u64, index: u64) -> Rng {
    Rng::new(seed.wrapping_mul(0x100_0000_01B3) ^ index)
}

/// The `index`-th exchange of the stream for `seed`.
pub fn exchange(seed: u64, index: u64) -> Exchange {
    let mut rng = exchange_rng(seed, index);
    match ROTATION[(index % ROTATION.len() as u64) as usize] {
        Family::Math => math::exchange(&mut rng),
        Family::Code => code::exchange(&mut rng),
        Family::Qa => qa::exchange(&mut rng),
        Family::First => first::exchange(&mut rng),
    }
}

/// The `index`-th exchange of the annealing stream (the last `--anneal-steps` of
/// training): word tasks, whose answers copy the prompt's words, make 4 in 10, math 3,
/// code, first prompts and any qa task one each (word tasks about 4.5 in 10 in all).
/// The main mix gives word tasks 1 in 9 and the model did not learn to copy words
/// from it.
pub fn anneal_exchange(seed: u64, index: u64) -> Exchange {
    let mut rng = exchange_rng(seed, index);
    match index % 10 {
        0 | 3 | 6 | 8 => qa::word_exchange(&mut rng),
        1 | 5 | 9 => math::exchange(&mut rng),
        2 => code::exchange(&mut rng),
        4 => first::exchange(&mut rng),
        _ => qa::exchange(&mut rng),
    }
}

/// `n` exchanges for `seed`, none of whose prompts is a held-out first prompt.
pub fn generate(seed: u64, n: usize) -> Vec<Exchange> {
    stream(exchange, seed, n, &Default::default())
}

/// `n` exchanges of the annealing stream, none of them held out: neither a first
/// prompt of `first::HELDOUT` nor one whose `prompt_key` is in `exclude`.
pub fn generate_anneal(
    seed: u64,
    n: usize,
    exclude: &std::collections::HashSet<String>,
) -> Vec<Exchange> {
    stream(anneal_exchange, seed, n, exclude)
}

fn stream(
    source: fn(u64, u64) -> Exchange,
    seed: u64,
    n: usize,
    exclude: &std::collections::HashSet<String>,
) -> Vec<Exchange> {
    let heldout: std::collections::HashSet<&str> = first::HELDOUT.iter().map(|h| h.1).collect();
    (0..)
        .map(|i| source(seed, i))
        .filter(|e| {
            e.messages
                .iter()
                .all(|m| m.role != "user" || !heldout.contains(m.content.as_str()))
                && (exclude.is_empty() || !exclude.contains(&prompt_key(e)))
        })
        .take(n)
        .collect()
}

fn record(e: &Exchange) -> PromptRecord {
    let last_user = last_user(e);
    PromptRecord {
        family: e.family.name().to_string(),
        task: Some(e.task.to_string()),
        prompt: e.messages[last_user].content.clone(),
        history: e.messages[..last_user].to_vec(),
        answer: e.answer.clone(),
        expect: e.expect.clone(),
        source: String::new(),
    }
}

/// Held-out prompts of one family from `seed`, none of whose texts occur in `exclude`;
/// for `first`, the hand-written set (`first::HELDOUT`, at most `n`).
pub fn heldout(
    seed: u64,
    family: Family,
    n: usize,
    exclude: &std::collections::HashSet<String>,
) -> Vec<PromptRecord> {
    if family == Family::First {
        return first::HELDOUT
            .iter()
            .take(n)
            .map(|(task, prompt, expect, answer)| PromptRecord {
                family: family.name().to_string(),
                task: Some(task.to_string()),
                prompt: prompt.to_string(),
                history: Vec::new(),
                answer: answer.map(str::to_string),
                expect: expect.iter().map(|s| s.to_string()).collect(),
                source: String::new(),
            })
            .collect();
    }
    heldout_exchanges(seed, family, n, exclude)
        .iter()
        .map(record)
        .collect()
}

/// The exchanges behind `heldout`: distinct, and with prompts not in `exclude`.
pub fn heldout_exchanges(
    seed: u64,
    family: Family,
    n: usize,
    exclude: &std::collections::HashSet<String>,
) -> Vec<Exchange> {
    let mut out = Vec::new();
    let mut index = 0u64;
    let mut seen = std::collections::HashSet::new();
    while out.len() < n && index < 1_000_000 {
        let e = exchange(seed, index);
        index += 1;
        if e.family != family {
            continue;
        }
        let key = prompt_key(&e);
        if exclude.contains(&key) || !seen.insert(key) {
            continue;
        }
        out.push(e);
    }
    out
}

/// Index of the exchange's last user message.
fn last_user(e: &Exchange) -> usize {
    e.messages
        .iter()
        .rposition(|m| m.role == "user")
        .unwrap_or(0)
}

/// The key `heldout` compares: every message up to and including the last user turn.
pub fn prompt_key(e: &Exchange) -> String {
    e.messages[..=last_user(e)]
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\u{1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_for_a_seed_and_varied() {
        assert_eq!(generate(7, 30), generate(7, 30));
        assert_ne!(generate(7, 30), generate(8, 30));
        let ex = generate(7, 300);
        let distinct: std::collections::HashSet<_> = ex.iter().map(prompt_key).collect();
        assert!(distinct.len() > 250, "{}", distinct.len());
        for f in Family::ALL {
            assert!(ex.iter().filter(|e| e.family == f).count() >= 60);
        }
        assert!(
            ex.iter().any(|e| e.messages.len() == 4),
            "multi-turn exchanges exist"
        );
    }

    #[test]
    fn answers_are_right_and_restate_the_prompt() {
        for e in generate(3, 900) {
            let last = &e.messages.last().unwrap().content;
            for x in &e.expect {
                assert!(last.contains(x.as_str()), "{x:?} not in {last:?}");
            }
            let Some(answer) = &e.answer else { continue };
            match last.lines().last().unwrap().strip_prefix("Answer: ") {
                Some(a) => assert_eq!(a, answer, "{last}"),
                None => assert!(last.contains(answer.as_str()), "{answer:?} not in {last:?}"),
            }
        }
    }

    #[test]
    fn math_numbers_stay_small() {
        for e in generate(11, 3000)
            .iter()
            .filter(|e| e.family == Family::Math)
        {
            let a: i64 = e.answer.as_ref().unwrap().parse().unwrap();
            assert!((0..1000).contains(&a), "{a}");
        }
    }

    #[test]
    fn first_prompts_are_never_trained_on() {
        let train: std::collections::HashSet<String> = generate(1234, 20_000)
            .iter()
            .flat_map(|e| e.messages.iter().map(|m| m.content.clone()))
            .collect();
        for (_, prompt, _, _) in first::HELDOUT {
            assert!(!train.contains(*prompt), "{prompt}");
        }
        assert_eq!(
            heldout(1, Family::First, 100, &Default::default()).len(),
            first::HELDOUT.len()
        );
    }

    #[test]
    fn anneal_stream_weighs_word_tasks_and_skips_what_is_held_out() {
        let held: std::collections::HashSet<String> =
            heldout_exchanges(99, Family::Qa, 60, &Default::default())
                .iter()
                .map(prompt_key)
                .collect();
        let ex = generate_anneal(99, 2000, &held);
        assert_eq!(ex.len(), 2000);
        assert!(ex.iter().all(|e| !held.contains(&prompt_key(e))));
        let words = ex
            .iter()
            .filter(|e| matches!(e.task, "reverse" | "count" | "sort"))
            .count();
        let math = ex.iter().filter(|e| e.family == Family::Math).count();
        // About 4.5 in 10 are word tasks (a few turn into a follow-up list), 3 in 10 math.
        assert!((700..=900).contains(&words), "{words}");
        assert!((550..=650).contains(&math), "{math}");
        // Without the exclusion some held-out prompts would be drawn: the filter acts.
        let unfiltered = generate_anneal(99, 2000, &Default::default());
        assert!(unfiltered.iter().any(|e| held.contains(&prompt_key(e))));
    }

    #[test]
    fn heldout_never_overlaps_training() {
        let train: std::collections::HashSet<String> =
            generate(1, 3000).iter().map(prompt_key).collect();
        for f in [Family::Math, Family::Code, Family::Qa] {
            let h = heldout(99, f, 60, &train);
            assert_eq!(h.len(), 60);
            for p in &h {
                let mut msgs = p.history.clone();
                msgs.push(ChatMessage::new("user", &p.prompt));
                let key = msgs
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\u{1}");
                assert!(!train.contains(&key));
            }
        }
    }
}

#[cfg(test)]
mod length_tests {
    use super::*;

    /// Mean token length (with eos) of the reference answers to the held-out prompts
    /// the bundled model is evaluated on, per family, with the bundled tokenizer.
    fn mean_answer_tokens() -> Vec<(Family, f64)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/tiny-nld/tokenizer.json"
        );
        let tok = tokenizers::Tokenizer::from_file(path).expect("bundled tokenizer");
        // The bundled model's corpus and held-out seeds (`specscope train` defaults).
        let train: std::collections::HashSet<String> =
            generate(1234, 60_000).iter().map(prompt_key).collect();
        [Family::Math, Family::Code, Family::Qa]
            .iter()
            .map(|&f| {
                let lens: Vec<usize> = heldout_exchanges(1234 + 1_000_003, f, 60, &train)
                    .iter()
                    .map(|e| {
                        let a = &e.messages.last().expect("answer").content;
                        tok.encode(a.as_str(), false).expect("encode").len() + 1
                    })
                    .collect();
                (f, lens.iter().sum::<usize>() as f64 / lens.len() as f64)
            })
            .collect()
    }

    #[test]
    fn answers_are_long_enough_for_32_token_blocks() {
        let means = mean_answer_tokens();
        eprintln!("{means:?}");
        let overall = means.iter().map(|m| m.1).sum::<f64>() / means.len() as f64;
        assert!(overall >= 90.0, "{means:?}");
    }
}
