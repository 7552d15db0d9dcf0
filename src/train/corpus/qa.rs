//! Facts from a built-in table and word tasks (reverse, count letters, sort). Word
//! answers first restate the prompt's own words, then operate on them.

use super::{Exchange, Family, Pick};
use crate::model::ChatMessage;
use crate::rng::Rng;

/// (country, capital, continent): the facts the model knows.
pub(super) const CAPITALS: &[(&str, &str, &str)] = &[
    ("France", "Paris", "Europe"),
    ("Japan", "Tokyo", "Asia"),
    ("Kenya", "Nairobi", "Africa"),
    ("Canada", "Ottawa", "North America"),
    ("Brazil", "Brasilia", "South America"),
    ("Egypt", "Cairo", "Africa"),
    ("India", "New Delhi", "Asia"),
    ("Spain", "Madrid", "Europe"),
    ("Peru", "Lima", "South America"),
    ("Norway", "Oslo", "Europe"),
    ("Chile", "Santiago", "South America"),
    ("Ghana", "Accra", "Africa"),
    ("Italy", "Rome", "Europe"),
    ("Mexico", "Mexico City", "North America"),
    ("Vietnam", "Hanoi", "Asia"),
    ("Australia", "Canberra", "Oceania"),
    ("Germany", "Berlin", "Europe"),
    ("Thailand", "Bangkok", "Asia"),
    ("Morocco", "Rabat", "Africa"),
    ("Argentina", "Buenos Aires", "South America"),
    ("Portugal", "Lisbon", "Europe"),
    ("China", "Beijing", "Asia"),
    ("Nigeria", "Abuja", "Africa"),
    ("Cuba", "Havana", "North America"),
    ("Greece", "Athens", "Europe"),
    ("Turkey", "Ankara", "Asia"),
    ("Sweden", "Stockholm", "Europe"),
    ("Colombia", "Bogota", "South America"),
    ("Poland", "Warsaw", "Europe"),
    ("New Zealand", "Wellington", "Oceania"),
];

const LISTS: &[(&str, &[&str])] = &[
    (
        "fruits",
        &[
            "apple", "banana", "cherry", "mango", "pear", "grape", "lemon", "peach", "plum", "kiwi",
        ],
    ),
    (
        "colors",
        &[
            "red", "blue", "green", "yellow", "purple", "orange", "black", "white", "pink", "brown",
        ],
    ),
    (
        "animals",
        &[
            "lion", "tiger", "zebra", "eagle", "dolphin", "wolf", "panda", "horse", "otter",
            "camel",
        ],
    ),
    (
        "planets",
        &[
            "Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune",
        ],
    ),
    (
        "vegetables",
        &[
            "carrot", "onion", "potato", "pepper", "spinach", "pea", "leek", "celery", "kale",
            "radish",
        ],
    ),
    (
        "instruments",
        &[
            "piano", "violin", "guitar", "flute", "drum", "cello", "trumpet", "harp", "oboe",
            "banjo",
        ],
    ),
];

const WORDS: &[&str] = &[
    "planet", "garden", "window", "rocket", "silver", "bridge", "candle", "forest", "market",
    "pocket", "yellow", "dragon", "puzzle", "winter", "castle", "summer", "button", "island",
    "mirror", "tunnel", "basket", "carpet", "pencil", "ladder", "orange", "violet", "jungle",
    "anchor", "helmet", "lemon",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tas", "vo", "pel", "dor", "shi", "nu", "bra", "fen", "gol", "ri",
    "zan", "tu", "mer", "lin", "sko", "pa",
];

/// A real word half of the time, otherwise a made-up one of 2–3 syllables.
fn word(rng: &mut Rng) -> String {
    if rng.chance(0.5) {
        return rng.pick(WORDS).to_string();
    }
    (0..rng.range(2, 3)).map(|_| *rng.pick(SYLLABLES)).collect()
}

fn letters(w: &str) -> String {
    w.chars()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The capital of a country, with its neighbours on the continent.
pub(super) fn capital_answer(country: &str, capital: &str, continent: &str) -> String {
    let others: Vec<&(&str, &str, &str)> = CAPITALS
        .iter()
        .filter(|c| c.2 == continent && c.0 != country)
        .take(4)
        .collect();
    let mut a = format!("The capital of {country} is {capital}. {country} is in {continent}.");
    if !others.is_empty() {
        a.push_str(&format!(
            " Other countries in {continent} and their capitals:\n"
        ));
        for (c, cap, _) in others {
            a.push_str(&format!("- {c}: {cap}\n"));
        }
        a.push_str(&format!("So the answer is {capital}."));
    }
    a
}

pub(super) fn capital_question(rng: &mut Rng, country: &str) -> String {
    rng.pick(&[
        format!("What is the capital of {country}?"),
        format!("Tell me the capital city of {country}."),
        format!("Which city is the capital of {country}?"),
        format!("What's the capital of {country}?"),
        format!("capital of {country}?"),
        format!("Do you know the capital of {country}?"),
    ])
    .clone()
}

pub(super) fn exchange(rng: &mut Rng) -> Exchange {
    let task = rng.range(0, 5);
    build(rng, task)
}

/// A word task only (reverse, count, sort): answers that copy the prompt's words.
pub(super) fn word_exchange(rng: &mut Rng) -> Exchange {
    let task = rng.range(2, 4);
    build(rng, task)
}

/// Sorting by selection, one line per pick, each restating the words still left: a
/// small model learns to copy a list minus one word and to pick the earliest of a
/// few words, where writing the sorted list straight away was beyond it.
fn sort_answer(words: &[String], sorted: &[String]) -> String {
    let firsts: Vec<String> = words.iter().map(|w| w.chars().take(1).collect()).collect();
    let mut a = format!(
        "The {} words are {}.\nTheir first letters are {}.\n",
        words.len(),
        words.join(", "),
        firsts.join(", ")
    );
    let mut left: Vec<&str> = words.iter().map(String::as_str).collect();
    for (i, w) in sorted.iter().enumerate() {
        if left.len() == 1 {
            a.push_str(&format!("{}. Only {w} is left.\n", i + 1));
        } else {
            let from = left.join(", ");
            a.push_str(&format!("{}. From {from}, the first is {w}.\n", i + 1));
        }
        left.retain(|x| x != w);
    }
    a.push_str(&format!("So the order is {}.", sorted.join(", ")));
    a
}

/// Task 0 capital, 1 list, 2 reverse, 3 count, 4 sort, otherwise JSON.
#[allow(clippy::too_many_lines)] // one template per question task
fn build(rng: &mut Rng, task: i64) -> Exchange {
    let (task, user, answer, expect, exact) = match task {
        0 => {
            let (country, capital, continent) = *rng.pick(CAPITALS);
            (
                "capital",
                capital_question(rng, country),
                capital_answer(country, capital, continent),
                vec![country.to_string()],
                capital.to_string(),
            )
        }
        1 => {
            let (topic, items) = *rng.pick(LISTS);
            let n = rng.range(3, items.len().min(8) as i64) as usize;
            let start = rng.range(0, (items.len() - n) as i64) as usize;
            let user = rng
                .pick(&[
                    format!("List {n} {topic}."),
                    format!("Name {n} {topic}, one per line."),
                    format!("Give me a numbered list of {n} {topic}."),
                ])
                .clone();
            let mut a = format!("Here are {n} {topic}:\n");
            for (i, it) in items[start..start + n].iter().enumerate() {
                a.push_str(&format!("{}. {it} ({} letters)\n", i + 1, it.len()));
            }
            a.push_str(&format!("That makes {n} {topic} in total."));
            ("list", user, a, vec![topic.to_string()], format!("{n}. "))
        }
        2 => {
            let w = word(rng);
            let rev: String = w.chars().rev().collect();
            let q = if rng.chance(0.8) {
                format!("'{w}'")
            } else {
                w.clone()
            };
            let user = rng
                .pick(&[
                    format!("Reverse the word {q}."),
                    format!("Spell {q} backwards."),
                    format!("What is {q} written in reverse?"),
                    format!("Can you reverse {q}?"),
                ])
                .clone();
            let a = format!(
                "The word is '{w}'. Its letters are {}.\nRead from the end, they are {}.\nSo '{w}' reversed is '{rev}'.",
                letters(&w),
                letters(&rev)
            );
            ("reverse", user, a, vec![w.clone()], format!("'{rev}'"))
        }
        3 => {
            let w = word(rng);
            let chars: Vec<char> = w.chars().collect();
            let c = *rng.pick(&chars);
            let count = chars.iter().filter(|&&x| x == c).count();
            let user = rng
                .pick(&[
                    format!("How many times does the letter '{c}' appear in '{w}'?"),
                    format!("Count the letter '{c}' in the word '{w}'."),
                    format!("How many '{c}'s are in '{w}'?"),
                ])
                .clone();
            let mut a = format!("The word is '{w}'. Let's check each letter for '{c}':\n");
            let mut seen = 0;
            for (i, x) in chars.iter().enumerate() {
                if *x == c {
                    seen += 1;
                    a.push_str(&format!("{}. '{x}' is a match ({seen} so far)\n", i + 1));
                } else {
                    a.push_str(&format!("{}. '{x}' is not a match\n", i + 1));
                }
            }
            let times = if count == 1 { "time" } else { "times" };
            a.push_str(&format!(
                "The letter '{c}' appears {count} {times} in '{w}'."
            ));
            (
                "count",
                user,
                a,
                vec![w.clone()],
                format!("appears {count} {times}"),
            )
        }
        4 => {
            let n = rng.range(3, 6) as usize;
            let mut words: Vec<String> = Vec::new();
            while words.len() < n {
                let w = word(rng);
                if !words.contains(&w) {
                    words.push(w);
                }
            }
            let joined = words.join(", ");
            let user = rng
                .pick(&[
                    format!("Sort these words alphabetically: {joined}."),
                    format!("Put these words in alphabetical order: {joined}."),
                    format!("Sort: {joined}"),
                ])
                .clone();
            let mut sorted = words.clone();
            sorted.sort_unstable();
            let a = sort_answer(&words, &sorted);
            ("sort", user, a, words, sorted.join(", "))
        }
        _ => {
            let (country, capital, continent) = *rng.pick(CAPITALS);
            let user = format!(
                "Answer in JSON with the keys country, capital and continent: where is {capital}?"
            );
            let a = format!("```json\n{{\n  \"country\": \"{country}\",\n  \"capital\": \"{capital}\",\n  \"continent\": \"{continent}\"\n}}\n```\n{capital} is the capital of {country}, a country in {continent}. The JSON object above has the three keys you asked for: country, capital and continent.");
            (
                "json",
                user,
                a,
                vec![capital.to_string()],
                format!("\"country\": \"{country}\""),
            )
        }
    };
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer),
    ];
    let (mut task, mut expect, mut exact) = (task, expect, exact);
    if rng.chance(0.15) {
        let (topic, items) = *rng.pick(LISTS);
        let n = rng.range(3, 5) as usize;
        messages.push(ChatMessage::new(
            "user",
            &format!("Thanks. Now list {n} {topic}."),
        ));
        let mut a = format!("Here are {n} {topic}, with the length of each name:\n");
        for (i, it) in items[..n].iter().enumerate() {
            a.push_str(&format!("{}. {it} ({} letters)\n", i + 1, it.len()));
        }
        a.push_str(&format!(
            "The longest of these is {}.",
            items[..n].iter().max_by_key(|w| w.len()).unwrap_or(&"")
        ));
        messages.push(ChatMessage::new("assistant", &a));
        task = "list";
        expect = vec![topic.to_string()];
        exact = format!("{n}. ");
    }
    Exchange {
        family: Family::Qa,
        task,
        messages,
        answer: Some(exact),
        expect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_answer_picks_the_earliest_word_from_what_is_left() {
        let words: Vec<String> = ["winter", "garden", "window", "button"]
            .map(String::from)
            .to_vec();
        let mut sorted = words.clone();
        sorted.sort_unstable();
        let a = sort_answer(&words, &sorted);
        assert_eq!(
            a,
            "The 4 words are winter, garden, window, button.\n\
             Their first letters are w, g, w, b.\n\
             1. From winter, garden, window, button, the first is button.\n\
             2. From winter, garden, window, the first is garden.\n\
             3. From winter, window, the first is window.\n\
             4. Only winter is left.\n\
             So the order is button, garden, window, winter."
        );
    }
}
