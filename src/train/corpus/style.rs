//! Varied phrasing for the restyle phase: each answer words its openings and
//! connectives its own way, and its code its own names, as real answers do, so the
//! draft is not sure of what it has only ever seen one way (`docs/decisions.md`,
//! "Answers vary their wording").
//!
//! Only the assistant's wording changes, never what it restates or computes: names,
//! numbers, lists, words and `Answer:` lines stay, and so do the prompts, the held-out
//! sets and the expected answers. The choice is drawn from a generator seeded by the
//! message's text, not from the exchange's, so the rest of the stream stays the same.

use super::{Exchange, Pick};
use crate::rng::Rng;

/// Choice points: a phrase the fixed answers use, and the ways a varied answer may say
/// it (the phrase itself first). Matched left to right, longest listed first where
/// two start alike; a replacement is never matched again. Every alternative is
/// spelled with words the bundled tokenizer has whole (checked by a test): a word it
/// never saw comes apart into letters, and a draft then has to place each piece.
/// Most points have four ways: with two, the draft leans one way (0.7–0.8) and its
/// misses there are confident ones.
const CHOICES: &[(&str, &[&str])] = &[
    // The out-of-scope answer's reason (before ", so ", which it starts with).
    (
        ", so this question is beyond what I was trained on.",
        &[
            ", so this question is beyond what I was trained on.",
            ", so this question is beyond what I know.",
            ", and this question is beyond what I was trained on.",
            ", and this question is beyond what I know.",
        ],
    ),
    // math
    (
        ", which is ",
        &[", which is ", ", that is ", ", so ", ", and "],
    ),
    (
        ". Now ",
        &[". Now ", ". Then ", ". Next, ", ". After that, "],
    ),
    (
        " gives away ",
        &[" gives away ", " gives ", " loses ", " sells "],
    ),
    (
        " loses ",
        &[" loses ", " gives away ", " gives ", " sells "],
    ),
    (", so ", &[", so ", ", and ", ", which is ", ", that is "]),
    (" finds ", &[" finds ", " gets ", " adds ", " takes "]),
    (" buys ", &[" buys ", " gets ", " takes ", " finds "]),
    (
        "\nSo the new result is ",
        &[
            "\nSo the new result is ",
            "\nThe new result is ",
            "\nNow the result is ",
            "\nSo the result is ",
        ],
    ),
    // The closing lines of sort and capital answers (before the bare "\nSo ").
    (
        "\nSo the order is ",
        &[
            "\nSo the order is ",
            "\nThe order is ",
            "\nNow the order is ",
            "\nSo the alphabetical order is ",
        ],
    ),
    (
        "\nSo the answer is ",
        &[
            "\nSo the answer is ",
            "\nThe answer is ",
            "\nSo the capital is ",
            "\nThe capital is ",
        ],
    ),
    // The reversal answer, which copies the word letter by letter, stays as it was:
    // reworded, reversal right fell from 11 to 5 of 15 (`docs/results.md`).
    ("\nSo '", &["\nSo '"]),
    (
        "\nSo ",
        &["\nSo ", "\nNow ", "\nIn the end, ", "\nIn total, "],
    ),
    (
        " are left.",
        &[" are left.", " left.", " are left now.", " now."],
    ),
    (
        " at the end.\n",
        &[
            " at the end.\n",
            " in the end.\n",
            " now.\n",
            " in total.\n",
        ],
    ),
    (
        "ing gives ",
        &[
            "ing gives ",
            "ing makes ",
            "ing that gives ",
            "ing that makes ",
        ],
    ),
    (
        "The previous result was",
        &[
            "The previous result was",
            "The last result was",
            "The previous answer was",
            "The last answer was",
        ],
    ),
    // code
    (
        "The function `",
        &[
            "The function `",
            "The code `",
            "Here `",
            "Here the function `",
        ],
    ),
    (
        " and goes through it once, so it runs in linear time.",
        &[
            " and goes through it once, so it runs in linear time.",
            " and goes through each element once, so it runs in linear time.",
            " and checks each element once, so it runs in linear time.",
            " and goes through it once, so it takes linear time.",
        ],
    ),
    (
        " takes a list called `",
        &[
            " takes a list called `",
            " takes a list `",
            " takes the list `",
            " accepts a list called `",
        ],
    ),
    (
        " it prints ",
        &[
            " it prints ",
            " it returns ",
            " the result is ",
            " the function returns ",
        ],
    ),
    (
        "  # ",
        &["  # ", "  # prints ", "  # returns ", "  # gives "],
    ),
    (
        "Here is a test that checks",
        &[
            "Here is a test that checks",
            "Here is a unit test that checks",
            "Here is a test which checks",
            "Here is a unit test which checks",
        ],
    ),
    (
        "Running the file prints ok when both assertions hold.",
        &[
            "Running the file prints ok when both assertions hold.",
            "Running the file prints ok if both assertions hold.",
            "Run the file: it prints ok when both assertions hold.",
            "Run the file: it prints ok if both assertions hold.",
        ],
    ),
    (
        "` accepts, so it is a useful edge case.",
        &[
            "` accepts, so it is a useful edge case.",
            "` accepts, so it is a good edge case.",
            "` accepts, which makes it a useful edge case.",
            "` accepts, which makes it a good edge case.",
        ],
    ),
    // qa
    (" so far)", &[" so far)", " now)", " in total)"]),
    (
        "\nThe letter '",
        &[
            "\nThe letter '",
            "\nSo the letter '",
            "\nIn total, the letter '",
            "\nNow the letter '",
        ],
    ),
    (
        ", the first is ",
        &[
            ", the first is ",
            ", the first one is ",
            ", the first word is ",
            ", first is ",
        ],
    ),
    (
        " is left.",
        &[
            " is left.",
            " is the last one.",
            " is the last word.",
            " is left now.",
        ],
    ),
    (
        ", a country in ",
        &[
            ", a country in ",
            ", which is in ",
            ", in ",
            ", a country of ",
        ],
    ),
    (
        " is in ",
        &[" is in ", " is a country in ", " is a country of "],
    ),
    (
        " and their capitals:\n",
        &[
            " and their capitals:\n",
            ", with their capitals:\n",
            " and the capitals:\n",
            ", with the capitals:\n",
        ],
    ),
    (
        ", with the length of each name:\n",
        &[
            ", with the length of each name:\n",
            ", with the length of every name:\n",
            " and the length of each name:\n",
            " and the length of every name:\n",
        ],
    ),
    (
        "That makes ",
        &["That makes ", "That is ", "So that makes ", "So that is "],
    ),
    (
        "The longest of these is ",
        &[
            "The longest of these is ",
            "The longest one is ",
            "The longest name is ",
            "The longest word is ",
        ],
    ),
    // first prompts (what the eval checks, "drill model" and "I can only", stays)
    (
        " generated practice exchanges.",
        &[
            " generated practice exchanges.",
            " generated practice tasks.",
            " generated practice problems.",
            " generated practice questions.",
        ],
    ),
    (
        " I can solve ",
        &[
            " I can solve ",
            " I can do ",
            " I can help with ",
            " I can answer ",
        ],
    ),
    (
        " help with a few kinds of practice tasks: ",
        &[
            " help with a few kinds of practice tasks: ",
            " answer a few kinds of practice tasks: ",
            " do a few kinds of practice tasks: ",
            " solve a few kinds of practice tasks: ",
        ],
    ),
];

/// Names in the code answers' bodies, each renamed the same way throughout one
/// message (a real answer picks its own names, then keeps them).
const RENAMES: &[(&str, &[&str])] = &[("value", &["value", "num", "n", "v"])];

/// FNV-1a of `text`: the seed of its wording.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
    })
}

/// `text` with each choice point worded as drawn from `rng`.
fn vary_text(text: &str, rng: &mut Rng) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        for &(phrase, options) in CHOICES {
            if let Some(after) = rest.strip_prefix(phrase) {
                out.push_str(rng.pick::<&str>(options));
                rest = after;
                continue 'scan;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether `c` can be part of a Python identifier.
fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `code` with each whole identifier of `names` replaced by its new name.
fn rename_idents(code: &str, names: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        let after_ident = out.chars().next_back().is_some_and(ident_char);
        let hit = (!after_ident)
            .then(|| {
                names.iter().find(|(old, _)| {
                    rest.strip_prefix(old)
                        .is_some_and(|tail| !tail.chars().next().is_some_and(ident_char))
                })
            })
            .flatten();
        match hit {
            Some((old, new)) => {
                out.push_str(new);
                rest = &rest[old.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// `text` with the names inside its ```python fences renamed as drawn from `rng`.
fn rename_code(text: &str, rng: &mut Rng) -> String {
    const OPEN: &str = "```python\n";
    let names: Vec<(&str, &str)> = RENAMES
        .iter()
        .map(|&(old, options)| (old, *rng.pick::<&str>(options)))
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(OPEN) {
        let body = &rest[i + OPEN.len()..];
        let len = body.find("```").unwrap_or(body.len());
        out.push_str(&rest[..i + OPEN.len()]);
        out.push_str(&rename_idents(&body[..len], &names));
        rest = &body[len..];
    }
    out.push_str(rest);
    out
}

/// The exchange with its assistant messages reworded; its prompts, `answer` and
/// `expect` unchanged.
pub fn vary(mut e: Exchange) -> Exchange {
    for m in e.messages.iter_mut().filter(|m| m.role == "assistant") {
        let mut rng = Rng::new(fnv(&m.content));
        let renamed = rename_code(&m.content, &mut rng);
        m.content = vary_text(&renamed, &mut rng);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_varies_but_what_is_restated_stays() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..400 {
            let e = super::super::anneal_exchange(7, i);
            let v = vary(e.clone());
            assert_eq!(e.answer, v.answer);
            assert_eq!(e.expect, v.expect);
            for (a, b) in e.messages.iter().zip(&v.messages) {
                if a.role == "user" {
                    assert_eq!(a.content, b.content);
                    continue;
                }
                // What a faithful answer restates is still there.
                for s in &e.expect {
                    if a.content.contains(s.as_str()) {
                        assert!(b.content.contains(s.as_str()), "{s:?} lost from {b:?}");
                    }
                }
                if let Some(x) = &e.answer {
                    if a.content.contains(x.as_str()) {
                        assert!(b.content.contains(x.as_str()), "{x:?} lost from {b:?}");
                    }
                }
                seen.insert(
                    b.content.contains("the first one is") as u8
                        + 2 * b.content.contains("The last answer was") as u8,
                );
            }
            assert_eq!(vary(e.clone()), v, "the wording is a function of the text");
        }
        // Both alternatives occur somewhere, and so do the fixed phrases.
        assert!(seen.iter().any(|s| s & 1 == 1), "no varied sort line");
        assert!(seen.iter().any(|s| s & 2 == 2), "no varied follow-up line");
        assert!(seen.contains(&0));
    }

    #[test]
    fn no_phrase_is_hidden_behind_an_earlier_one() {
        for (i, &(first, _)) in CHOICES.iter().enumerate() {
            for &(later, _) in &CHOICES[i + 1..] {
                assert!(
                    !later.starts_with(first),
                    "{later:?} never matches: {first:?} is tried first"
                );
            }
        }
    }

    /// Each word an alternative brings is one token of the bundled tokenizer, which
    /// the restyle phase trains with (the fixed phrase's own words are as the corpus
    /// has them).
    #[test]
    fn alternatives_are_spelled_with_whole_tokens() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/tiny-nld/tokenizer.json"
        );
        let tok = tokenizers::Tokenizer::from_file(path).expect("the bundled tokenizer");
        let tokens = |s: &str| tok.encode(s, false).expect("encodes").get_ids().len();
        let words = |s: &str| -> Vec<String> {
            let mut out = Vec::new();
            let mut prev = '\n';
            let mut word = String::new();
            for c in s.chars().chain(std::iter::once('.')) {
                if c.is_ascii_alphabetic() {
                    if word.is_empty() && prev == ' ' {
                        word.push(' ');
                    }
                    word.push(c);
                } else if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                prev = c;
            }
            out
        };
        let mut checked = 0;
        for &(phrase, options) in CHOICES {
            let own = words(phrase);
            for w in options.iter().flat_map(|o| words(o)) {
                if !own.contains(&w) {
                    assert_eq!(
                        tokens(&w),
                        1,
                        "{w:?} (for {phrase:?}) is split by the tokenizer"
                    );
                    checked += 1;
                }
            }
        }
        for &(_, names) in RENAMES {
            for n in names {
                // After a space (`for num in`) and after a bracket (`append(num)`).
                assert_eq!(tokens(&format!(" {n}")), 1, "{n:?}");
                assert_eq!(tokens(n), 1, "{n:?}");
            }
        }
        assert!(checked > 40, "{checked}");
    }

    #[test]
    fn code_names_are_renamed_whole_and_alike() {
        let names = [("value", "x"), ("total", "acc")];
        let code = "def f(values):\n    total = 0\n    for value in values:\n        total += value * value\n    return max_value(total)\n";
        assert_eq!(
            rename_idents(code, &names),
            "def f(values):\n    acc = 0\n    for x in values:\n        acc += x * x\n    return max_value(acc)\n"
        );
        // No name is another's option, so a renamed body never merges two names.
        let all: Vec<&str> = RENAMES
            .iter()
            .flat_map(|(_, o)| o.iter().copied())
            .collect();
        let unique: std::collections::HashSet<&str> = all.iter().copied().collect();
        assert_eq!(all.len(), unique.len(), "{all:?}");
        // Prose outside a fence keeps its words.
        let mut rng = Rng::new(3);
        let text = "```python\nresult = []\n```\nThe result is here.";
        let v = rename_code(text, &mut rng);
        assert!(v.ends_with("```\nThe result is here."), "{v}");
    }

    #[test]
    fn scan_replaces_once_and_keeps_the_rest() {
        let mut rng = Rng::new(1);
        let t = "Maya starts with 5 apples, so 5 - 1 = 4 apples are left. ünïcode";
        let v = vary_text(t, &mut rng);
        assert!(v.starts_with("Maya "));
        assert!(v.contains("= 4 apples"), "{v}");
        assert!(v.ends_with(". ünïcode"), "{v}");
        assert!(v.contains(" 5 apples"));
    }
}
