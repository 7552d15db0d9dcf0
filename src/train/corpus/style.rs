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
/// two start alike; a replacement is never matched again.
const CHOICES: &[(&str, &[&str])] = &[
    // The out-of-scope answer's reason (before ", so ", which it starts with).
    (
        ", so this question is beyond what I was trained on.",
        &[
            ", so this question is beyond what I was trained on.",
            ", so I was not trained for this question.",
            ", and this question is outside what I learned.",
        ],
    ),
    // math
    (
        " starts with ",
        &[" starts with ", " begins with ", " has "],
    ),
    (", which is ", &[", which is ", ", that is ", ", so "]),
    (". Now ", &[". Now ", ". So ", ". That means "]),
    (" gives away ", &[" gives away ", " gives "]),
    (", so ", &[", so ", ", and ", ", which means "]),
    (" finds ", &[" finds ", " gets "]),
    (" buys ", &[" buys ", " gets ", " picks up "]),
    (" loses ", &[" loses ", " drops ", " misplaces "]),
    (" more ", &[" more ", " extra ", " additional "]),
    (
        "\nSo the new result is ",
        &[
            "\nSo the new result is ",
            "\nThe new result is ",
            "\nThat gives ",
        ],
    ),
    // The closing lines of sort and capital answers (before the bare "\nSo ").
    (
        "\nSo the order is ",
        &[
            "\nSo the order is ",
            "\nSo the sorted order is ",
            "\nThe order is ",
        ],
    ),
    (
        "\nSo the answer is ",
        &[
            "\nSo the answer is ",
            "\nSo the capital is ",
            "\nThe answer is ",
        ],
    ),
    // The reversal answer's first and last sentences, which copy the word, stay
    // fixed: varied, reversal right fell from 11 to 5 of 15 (`docs/results.md`).
    ("\nSo '", &["\nSo '"]),
    ("\nSo ", &["\nSo ", "\nAll in all, ", "\nThat means "]),
    (" are left.", &[" are left.", " remain.", " are left over."]),
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
        &[
            "The previous result was",
            "Before, the result was",
            "The last answer was",
        ],
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
            " and loops over it once, so it runs in linear time.",
            " and visits each element once, so its running time is linear.",
        ],
    ),
    (". For ", &[". For ", ". On ", ". Given "]),
    (
        " takes a list called `",
        &[
            " takes a list called `",
            " takes a list named `",
            " receives a list `",
        ],
    ),
    (
        " it prints ",
        &[" it prints ", " it outputs ", " the output is "],
    ),
    (
        "\"\"\"Return ",
        &["\"\"\"Return ", "\"\"\"Returns ", "\"\"\"Give back "],
    ),
    ("  # ", &["  # ", "  # prints ", "  # -> "]),
    (
        "Here is a test that checks",
        &["Here is a test that checks", "This test checks"],
    ),
    (
        " the example from above and a list with one element.",
        &[
            " the example from above and a list with one element.",
            " the example above and a one-element list.",
            " the earlier example and a single-element list.",
        ],
    ),
    (
        "Running the file prints ok when both assertions hold.",
        &[
            "Running the file prints ok when both assertions hold.",
            "If both assertions pass, running the file prints ok.",
            "Running it prints ok when both checks pass.",
        ],
    ),
    (
        " A list with one element is the smallest input `",
        &[
            " A list with one element is the smallest input `",
            " A one-element list is the smallest input `",
            " The smallest input `",
        ],
    ),
    (
        "` accepts, so it is a useful edge case.",
        &[
            "` accepts, so it is a useful edge case.",
            "` accepts, which makes it a good edge case.",
            "` takes, so it is worth testing.",
        ],
    ),
    // qa
    (
        "' is a match (",
        &["' is a match (", "' matches (", "' is a hit ("],
    ),
    (" so far)", &[" so far)", " found)", " up to now)"]),
    (
        "' is not a match",
        &["' is not a match", "' does not match", "' is no match"],
    ),
    (
        "\nThe letter '",
        &[
            "\nThe letter '",
            "\nIn total, the letter '",
            "\nSo the letter '",
        ],
    ),
    (
        ", the first is ",
        &[", the first is ", ", the earliest is ", ", first comes "],
    ),
    (". Only ", &[". Only ", ". Just "]),
    (
        " is left.",
        &[" is left.", " remains.", " is what is left."],
    ),
    (" words are ", &[" words are ", " words given are "]),
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
            " The JSON above holds the three keys you asked for",
        ],
    ),
    (" is in ", &[" is in ", " lies in ", " is a country in "]),
    (
        " Other countries in ",
        &[
            " Other countries in ",
            " More countries in ",
            " Some other countries in ",
        ],
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
        &["Their first letters are", "They start with"],
    ),
    (". From ", &[". From ", ". Of ", ". Among "]),
    (
        "Its letters are",
        &[
            "Its letters are",
            "It is spelled",
            "Letter by letter, it is",
        ],
    ),
    (
        "Read from the end, they are",
        &[
            "Read from the end, they are",
            "Backwards, they are",
            "From last to first, they are",
        ],
    ),
    (
        "Let's check each letter for",
        &[
            "Let's check each letter for",
            "Checking every letter for",
            "Going through each letter to look for",
        ],
    ),
    (
        "Here are ",
        &["Here are ", "These are ", "Here is a list of "],
    ),
    (
        ", with the length of each name:\n",
        &[
            ", with the length of each name:\n",
            " and how long each name is:\n",
            ", each with its length:\n",
        ],
    ),
    (" letters)\n", &[" letters)\n", " letters long)\n"]),
    ("That makes ", &["That makes ", "This gives "]),
    (" in total.", &[" in total.", " altogether.", " in all."]),
    (
        "The longest of these is ",
        &[
            "The longest of these is ",
            "The longest one is ",
            "Of these, the longest is ",
        ],
    ),
    // first prompts (what the eval checks, "drill model" and "I can only", stays)
    (
        " trained from scratch on generated practice exchanges.",
        &[
            " trained from scratch on generated practice exchanges.",
            " trained from scratch on made-up practice tasks.",
            " trained from nothing on generated practice exchanges.",
        ],
    ),
    (
        " I can solve ",
        &[" I can solve ", " I can do ", " I am able to solve "],
    ),
    (
        " help with a few kinds of practice tasks: ",
        &[
            " help with a few kinds of practice tasks: ",
            " answer a few kinds of practice tasks: ",
            " do a few kinds of practice tasks: ",
        ],
    ),
    ("Try ", &["Try ", "You could try ", "For example, try "]),
];

/// Names in the code answers' bodies, each renamed the same way throughout one
/// message (a real answer picks its own names, then keeps them). The option sets
/// are disjoint, so two renamed names never collide.
const RENAMES: &[(&str, &[&str])] = &[
    ("value", &["value", "x", "item", "v"]),
    ("total", &["total", "acc", "s", "running"]),
    ("result", &["result", "out", "output", "kept"]),
    ("count", &["count", "n", "hits", "tally"]),
    ("best", &["best", "biggest", "top", "m"]),
    ("index", &["index", "i", "pos", "j"]),
];

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
                    b.content.contains("Among ") as u8 + 2 * b.content.contains("Backwards") as u8,
                );
            }
            assert_eq!(vary(e.clone()), v, "the wording is a function of the text");
        }
        // Both alternatives occur somewhere, and so do the fixed phrases.
        assert!(seen.iter().any(|s| s & 1 == 1), "no varied sort line");
        assert!(seen.iter().any(|s| s & 2 == 2), "no varied reverse line");
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
