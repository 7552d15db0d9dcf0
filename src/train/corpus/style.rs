//! Varied phrasing for the restyle phase: each answer words its openings and
//! connectives its own way, as real answers do, so the draft is not sure of what it
//! has only ever seen one way (`docs/decisions.md`, "Answers vary their wording").
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
        "Here is a test that checks",
        &["Here is a test that checks", "This test checks"],
    ),
    // qa
    // The reversal answer's first and last sentences, which copy the word, stay
    // fixed: varied, reversal right fell from 11 to 5 of 15 (`docs/results.md`).
    (
        "' is a match (",
        &["' is a match (", "' matches (", "' is a hit ("],
    ),
    (
        "' is not a match",
        &["' is not a match", "' does not match", "' is no match"],
    ),
    (
        ", the first is ",
        &[", the first is ", ", the earliest is ", ", first comes "],
    ),
    (". Only ", &[". Only ", ". Just "]),
    (" words are ", &[" words are ", " words given are "]),
    (
        "The capital of ",
        &["The capital of ", "The capital city of "],
    ),
    (" is in ", &[" is in ", " lies in ", " is a country in "]),
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
    ("That makes ", &["That makes ", "This gives "]),
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

/// The exchange with its assistant messages reworded; its prompts, `answer` and
/// `expect` unchanged.
pub fn vary(mut e: Exchange) -> Exchange {
    for m in e.messages.iter_mut().filter(|m| m.role == "assistant") {
        let mut rng = Rng::new(fnv(&m.content));
        m.content = vary_text(&m.content, &mut rng);
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
    fn scan_replaces_once_and_keeps_the_rest() {
        let mut rng = Rng::new(1);
        let t = "Maya starts with 5 apples, so 5 - 1 = 4 apples are left. ünïcode";
        let v = vary_text(t, &mut rng);
        assert!(v.starts_with("Maya "));
        assert!(v.ends_with("4 apples are left. ünïcode"));
        assert!(v.contains(" 5 apples"));
    }
}
