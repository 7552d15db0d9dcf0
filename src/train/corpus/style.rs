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
const CHOICES: &[(&str, &[&str])] = &[
    // math
    (" starts with ", &[" starts with ", " has "]),
    (", which is ", &[", which is ", ", that is ", ", so "]),
    (". Now ", &[". Now ", ". Then "]),
    (" gives away ", &[" gives away ", " gives "]),
    (", so ", &[", so ", ", and ", ", which is "]),
    (" finds ", &[" finds ", " gets "]),
    (" buys ", &[" buys ", " gets "]),
    (" loses ", &[" loses ", " gives away "]),
    (" more ", &[" more ", " "]),
    (
        "\nSo the new result is ",
        &[
            "\nSo the new result is ",
            "\nThe new result is ",
            "\nNow the result is ",
        ],
    ),
    // The closing lines of sort and capital answers (before the bare "\nSo ").
    (
        "\nSo the order is ",
        &["\nSo the order is ", "\nThe order is "],
    ),
    (
        "\nSo the answer is ",
        &[
            "\nSo the answer is ",
            "\nThe answer is ",
            "\nSo the capital is ",
        ],
    ),
    // The reversal answer's first and last sentences, which copy the word, stay
    // fixed: varied, reversal right fell from 11 to 5 of 15 (`docs/results.md`).
    ("\nSo '", &["\nSo '"]),
    ("\nSo ", &["\nSo ", "\nNow "]),
    (" are left.", &[" are left.", " left."]),
    (
        " at the end.\n",
        &[" at the end.\n", " now.\n", " in total.\n"],
    ),
    (
        "ing gives ",
        &["ing gives ", "ing makes ", "ing that gives "],
    ),
    (
        "The previous result was",
        &["The previous result was", "The last result was"],
    ),
    // code
    (
        "The function `",
        &["The function `", "The code `", "Here `"],
    ),
    (
        " and goes through it once, so it runs in linear time.",
        &[
            " and goes through it once, so it runs in linear time.",
            " and goes through each element once, so it runs in linear time.",
            " and checks each element once, so it runs in linear time.",
        ],
    ),
    (". For ", &[". For ", " and for "]),
    (
        " takes a list called `",
        &[
            " takes a list called `",
            " takes a list `",
            " takes the list `",
        ],
    ),
    (
        " it prints ",
        &[" it prints ", " it returns ", " the result is "],
    ),
    ("\"\"\"Return ", &["\"\"\"Return ", "\"\"\"Compute "]),
    ("  # ", &["  # ", "  # prints "]),
    (
        "Here is a test that checks",
        &[
            "Here is a test that checks",
            "Here is a unit test that checks",
        ],
    ),
    (
        " the example from above and a list with one element.",
        &[
            " the example from above and a list with one element.",
            " the example above and a list with one element.",
            " the example from above and a one element list.",
        ],
    ),
    (
        "Running the file prints ok when both assertions hold.",
        &[
            "Running the file prints ok when both assertions hold.",
            "Running the file prints ok if both assertions hold.",
            "Run the file: it prints ok when both assertions hold.",
        ],
    ),
    (
        " A list with one element is the smallest input `",
        &[
            " A list with one element is the smallest input `",
            " A list of one element is the smallest input `",
        ],
    ),
    (
        "` accepts, so it is a useful edge case.",
        &[
            "` accepts, so it is a useful edge case.",
            "` accepts, which makes it a good edge case.",
            "` accepts, so it is a good edge case.",
        ],
    ),
    // qa
    ("' is a match (", &["' is a match (", "' is the letter ("]),
    (" so far)", &[" so far)", " now)", " in total)"]),
    (
        "' is not a match",
        &["' is not a match", "' does not match"],
    ),
    (
        "\nThe letter '",
        &[
            "\nThe letter '",
            "\nSo the letter '",
            "\nIn total, the letter '",
        ],
    ),
    (
        ", the first is ",
        &[", the first is ", ", the first one is "],
    ),
    (" is left.", &[" is left.", " is the last one."]),
    (" words are ", &[" words are ", " words in the list are "]),
    (
        "The capital of ",
        &["The capital of ", "The capital city of "],
    ),
    (
        " is the capital of ",
        &[" is the capital of ", " is the capital city of "],
    ),
    (
        ", a country in ",
        &[", a country in ", ", which is in ", ", in "],
    ),
    (
        " The JSON object above has the three keys you asked for",
        &[
            " The JSON object above has the three keys you asked for",
            " The object above has the three keys you asked for",
        ],
    ),
    (" is in ", &[" is in ", " is a country in "]),
    (
        " Other countries in ",
        &[" Other countries in ", " Other countries of "],
    ),
    (
        " and their capitals:\n",
        &[
            " and their capitals:\n",
            ", with their capitals:\n",
            " and the capitals:\n",
        ],
    ),
    (
        "Their first letters are",
        &["Their first letters are", "The first letters are"],
    ),
    ("Its letters are", &["Its letters are", "The letters are"]),
    (
        "Read from the end, they are",
        &["Read from the end, they are", "Read backwards, they are"],
    ),
    (
        "Let's check each letter for",
        &[
            "Let's check each letter for",
            "Let's check every letter for",
        ],
    ),
    ("Here are ", &["Here are ", "Here is a list of "]),
    (
        ", with the length of each name:\n",
        &[
            ", with the length of each name:\n",
            ", with the length of every name:\n",
            " and the length of each name:\n",
        ],
    ),
    ("That makes ", &["That makes ", "That is "]),
    (" in total.", &[" in total.", "."]),
    (
        "The longest of these is ",
        &[
            "The longest of these is ",
            "The longest one is ",
            "The longest name is ",
        ],
    ),
    // first prompts (what the eval checks, "drill model" and "I can only", stays)
    (
        " trained from scratch on generated practice exchanges.",
        &[
            " trained from scratch on generated practice exchanges.",
            " trained from scratch on generated practice tasks.",
        ],
    ),
    (" I can solve ", &[" I can solve ", " I can do "]),
    (
        " help with a few kinds of practice tasks: ",
        &[
            " help with a few kinds of practice tasks: ",
            " answer a few kinds of practice tasks: ",
            " do a few kinds of practice tasks: ",
        ],
    ),
    (
        ", so this question is beyond what I was trained on.",
        &[
            ", so this question is beyond what I was trained on.",
            ", so this question is beyond what I know.",
            ", and this question is beyond what I was trained on.",
        ],
    ),
];

/// Names in the code answers' bodies, each renamed the same way throughout one
/// message (a real answer picks its own names, then keeps them).
const RENAMES: &[(&str, &[&str])] = &[("value", &["value", "num"])];

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
                        + 2 * b.content.contains("Read backwards") as u8,
                );
            }
            assert_eq!(vary(e.clone()), v, "the wording is a function of the text");
        }
        // Both alternatives occur somewhere, and so do the fixed phrases.
        assert!(seen.iter().any(|s| s & 1 == 1), "no varied sort line");
        assert!(seen.iter().any(|s| s & 2 == 2), "no varied reverse line");
        assert!(seen.contains(&0));
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
