//! The self-made training corpus: chat exchanges in three families that behave
//! differently under speculation. Deterministic for a seed.
//!
//! - math: multi-step arithmetic word problems, worked step by step, final answer line;
//! - code: small Python functions from a one-line spec, docstring and a usage line;
//! - qa: facts from a built-in table and instruction following (lists, reversing,
//!   counting, answering in a given format).

use serde::{Deserialize, Serialize};

use crate::model::ChatMessage;
use crate::rng::Rng;

/// Prompt family, as benchmark files tag them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Math,
    Code,
    Qa,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Math, Family::Code, Family::Qa];

    pub fn name(self) -> &'static str {
        match self {
            Family::Math => "math",
            Family::Code => "code",
            Family::Qa => "qa",
        }
    }
}

/// One conversation; the last message is the assistant's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub family: Family,
    pub messages: Vec<ChatMessage>,
    /// The final answer line's value for math (for the exact-answer rate).
    pub answer: Option<String>,
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

const NAMES: &[&str] = &[
    "Maya", "Liam", "Ava", "Noah", "Zoe", "Omar", "Lena", "Ivan", "Sara", "Ravi", "Chen", "Nina",
    "Tom", "Priya", "Leo", "Emma", "Yuki", "Marco", "Aisha", "Ben",
];
const ITEMS: &[(&str, &str)] = &[
    ("apples", "bags"),
    ("marbles", "jars"),
    ("stickers", "packs"),
    ("pencils", "boxes"),
    ("cookies", "trays"),
    ("books", "shelves"),
    ("coins", "purses"),
    ("cards", "decks"),
    ("eggs", "cartons"),
    ("stamps", "albums"),
    ("beads", "strings"),
    ("shells", "buckets"),
];

/// A worked multi-step arithmetic problem.
fn math(rng: &mut Rng) -> Exchange {
    let name = *rng.pick(NAMES);
    let (item, holder) = *rng.pick(ITEMS);
    let mut total = rng.range(5, 60);
    let mut story = vec![format!("{name} has {total} {item}.")];
    let mut steps = Vec::new();
    let nsteps = rng.range(3, 6);
    for _ in 0..nsteps {
        match rng.range(0, 3) {
            0 => {
                let (n, each) = (rng.range(2, 9), rng.range(3, 15));
                let got = n * each;
                story.push(format!(
                    "{} buys {n} {holder} with {each} {item} each.",
                    rng.pick(&["Then she", "Next, she", "She also", "After that, she"])
                ));
                steps.push(format!(
                    "{n} {holder} with {each} {item} each is {n} * {each} = {got} {item}."
                ));
                steps.push(format!(
                    "Now {name} has {total} + {got} = {} {item}.",
                    total + got
                ));
                total += got;
            }
            1 if total > 3 => {
                let give = rng.range(1, total - 1);
                story.push(format!(
                    "{} gives {give} {item} to a friend.",
                    rng.pick(&["Then she", "Later she", "She"])
                ));
                steps.push(format!(
                    "Giving away {give} leaves {total} - {give} = {} {item}.",
                    total - give
                ));
                total -= give;
            }
            2 => {
                let k = rng.range(2, 4);
                story.push(format!(
                    "{} her {item} by {k}.",
                    rng.pick(&[
                        "Then she multiplies",
                        "Next, she multiplies",
                        "She multiplies"
                    ])
                ));
                steps.push(format!(
                    "Multiplying by {k} gives {total} * {k} = {} {item}.",
                    total * k
                ));
                total *= k;
            }
            _ => {
                let add = rng.range(2, 40);
                story.push(format!(
                    "{} finds {add} more {item}.",
                    rng.pick(&["Then she", "She", "The next day she"])
                ));
                steps.push(format!(
                    "Finding {add} more gives {total} + {add} = {} {item}.",
                    total + add
                ));
                total += add;
            }
        }
    }
    let question = rng
        .pick(&[
            format!("How many {item} does {name} have now?"),
            format!("How many {item} does {name} have at the end?"),
            format!("What is the final number of {item}?"),
        ])
        .clone();
    let lead = rng.pick(&[
        "",
        "Solve this step by step. ",
        "Word problem: ",
        "Please help: ",
    ]);
    let user = format!("{lead}{} {question}", story.join(" "));
    let mut answer = String::new();
    const INTROS: &[&str] = &[
        "Let's work through it.\n",
        "We solve it step by step.\n",
        "Here is the solution.\n",
    ];
    let intro: &&str = rng.pick(INTROS);
    answer.push_str(intro);
    for (i, s) in steps.iter().enumerate() {
        answer.push_str(&format!("Step {}: {s}\n", i + 1));
    }
    answer.push_str(&format!(
        "So {name} ends with {total} {item}.\nAnswer: {total}"
    ));
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer),
    ];
    let mut final_answer = total.to_string();
    if rng.chance(0.2) {
        let k = rng.range(2, 5);
        messages.push(ChatMessage::new(
            "user",
            &format!("Now multiply that result by {k}."),
        ));
        messages.push(ChatMessage::new(
            "assistant",
            &format!(
                "Step 1: The previous result was {total}.\nStep 2: {total} * {k} = {}.\nAnswer: {}",
                total * k,
                total * k
            ),
        ));
        final_answer = (total * k).to_string();
    }
    Exchange {
        family: Family::Math,
        messages,
        answer: Some(final_answer),
    }
}

const VARS: &[&str] = &[
    "values", "items", "numbers", "nums", "data", "xs", "scores", "counts",
];

/// A small Python function from a one-line spec, with the printed result computed here.
fn code(rng: &mut Rng) -> Exchange {
    let var = *rng.pick(VARS);
    let list: Vec<i64> = (0..rng.range(3, 6)).map(|_| rng.range(1, 20)).collect();
    let shown = format!(
        "[{}]",
        list.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let k = rng.range(2, 9);
    let op = rng.range(0, 7);
    let single = rng.range(1, 20);
    // What each function returns for `[single]` (the follow-up test's edge case).
    let single_result = match op {
        0 => (single * single).to_string(),
        1 => i64::from(single > k).to_string(),
        2 => format!("[{}]", single * k),
        3 => single.to_string(),
        4 if single % 2 == 0 => format!("[{single}]"),
        4 => "[]".to_string(),
        5 => (single + k).to_string(),
        6 => format!("{single}.0"),
        _ => format!("[{single}]"),
    };
    let (spec, name, doc, body, result): (String, String, String, Vec<String>, String) = match op {
        0 => (
            "returns the sum of the squares of a list of numbers".into(),
            rng.pick(&["sum_of_squares", "square_sum", "total_squares"])
                .to_string(),
            format!("Return the sum of the squares of {var}."),
            vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                "    total += value * value".into(),
                "return total".into(),
            ],
            list.iter().map(|x| x * x).sum::<i64>().to_string(),
        ),
        1 => (
            format!("counts how many numbers in a list are greater than {k}"),
            rng.pick(&["count_greater", "count_above", "how_many_above"])
                .to_string(),
            format!("Count the elements of {var} greater than {k}."),
            vec![
                "count = 0".into(),
                format!("for value in {var}:"),
                format!("    if value > {k}:"),
                "        count += 1".into(),
                "return count".into(),
            ],
            list.iter().filter(|&&x| x > k).count().to_string(),
        ),
        2 => (
            format!("multiplies every number in a list by {k}"),
            rng.pick(&["scale_all", "multiply_each", "times_each"])
                .to_string(),
            format!("Return a new list with each element of {var} multiplied by {k}."),
            vec![
                "result = []".into(),
                format!("for value in {var}:"),
                format!("    result.append(value * {k})"),
                "return result".into(),
            ],
            format!(
                "[{}]",
                list.iter()
                    .map(|x| (x * k).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        3 => (
            "returns the largest number in a list".into(),
            rng.pick(&["find_max", "largest", "max_value"]).to_string(),
            format!("Return the largest element of {var}."),
            vec![
                format!("best = {var}[0]"),
                format!("for value in {var}:"),
                "    if value > best:".into(),
                "        best = value".into(),
                "return best".into(),
            ],
            list.iter().max().copied().unwrap_or(0).to_string(),
        ),
        4 => (
            "keeps only the even numbers of a list".into(),
            rng.pick(&["only_even", "filter_even", "evens"]).to_string(),
            format!("Return the even elements of {var}, in order."),
            vec![
                "result = []".into(),
                format!("for value in {var}:"),
                "    if value % 2 == 0:".into(),
                "        result.append(value)".into(),
                "return result".into(),
            ],
            format!(
                "[{}]",
                list.iter()
                    .filter(|x| *x % 2 == 0)
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        5 => (
            format!("adds {k} to every number in a list and returns the total"),
            rng.pick(&["shifted_total", "add_and_sum", "total_plus"])
                .to_string(),
            format!("Add {k} to each element of {var} and return the sum."),
            vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                format!("    total += value + {k}"),
                "return total".into(),
            ],
            list.iter().map(|x| x + k).sum::<i64>().to_string(),
        ),
        6 => (
            "returns the average of a list of numbers".into(),
            rng.pick(&["average", "mean", "mean_value"]).to_string(),
            format!("Return the arithmetic mean of {var}."),
            vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                "    total += value".into(),
                format!("return total / len({var})"),
            ],
            {
                let s: i64 = list.iter().sum();
                let m = s as f64 / list.len() as f64;
                if m.fract() == 0.0 {
                    format!("{m:.1}")
                } else {
                    format!("{}", (m * 1e10).round() / 1e10)
                }
            },
        ),
        _ => (
            "reverses a list without using reversed()".into(),
            rng.pick(&["reverse_list", "backwards", "flip"]).to_string(),
            format!("Return the elements of {var} in reverse order."),
            vec![
                "result = []".into(),
                format!("for index in range(len({var}) - 1, -1, -1):"),
                format!("    result.append({var}[index])"),
                "return result".into(),
            ],
            format!(
                "[{}]",
                list.iter()
                    .rev()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    };
    let ask = rng.pick(&[
        "Write a Python function that",
        "Write a function that",
        "Implement a Python function which",
        "Please write a small function that",
    ]);
    // The example list in the prompt makes single-turn prompts rarely repeat, so the
    // held-out split is not left with follow-up turns only.
    let show = rng.pick(&[
        "Show it on {}.",
        "Use {} as the example.",
        "Try it with {}.",
        "Demonstrate it on {}.",
    ]);
    let user = format!("{ask} {spec}. {}", show.replace("{}", &shown));
    let mut answer = format!("```python\ndef {name}({var}):\n    \"\"\"{doc}\"\"\"\n");
    for line in &body {
        answer.push_str(&format!("    {line}\n"));
    }
    answer.push_str(&format!("\n\nprint({name}({shown}))  # {result}\n```\n"));
    answer.push_str(&format!(
        "The function `{name}` takes a list called `{var}` and goes through it once, so it runs in linear time. For {shown} it prints {result}."
    ));
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer),
    ];
    if rng.chance(0.2) {
        let ask = rng.pick(&[
            "Add a test for it.",
            "Now write a test.",
            "Can you add a unit test?",
        ]);
        messages.push(ChatMessage::new("user", ask));
        messages.push(ChatMessage::new(
            "assistant",
            &format!("Here is a test that checks the example from above and a list with one element.\n```python\ndef test_{name}():\n    assert {name}({shown}) == {result}\n    assert {name}([{single}]) == {single_result}\n\n\ntest_{name}()\nprint(\"ok\")\n```\nRunning the file prints ok when both assertions hold. A list with one element is the smallest input `{name}` accepts, so it is a useful edge case."),
        ));
    }
    Exchange {
        family: Family::Code,
        messages,
        answer: Some(result),
    }
}

const CAPITALS: &[(&str, &str, &str)] = &[
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
    "mirror", "tunnel",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tas", "vo", "pel", "dor", "shi", "nu", "bra", "fen", "gol", "ri",
    "zan", "tu", "mer", "lin", "sko", "pa",
];

/// A real word half of the time, otherwise a made-up one of 2–3 syllables, so that
/// spelling prompts are rarely repeated (and the held-out split has single turns).
fn word(rng: &mut Rng) -> String {
    if rng.chance(0.5) {
        return rng.pick(WORDS).to_string();
    }
    (0..rng.range(2, 3)).map(|_| *rng.pick(SYLLABLES)).collect()
}

fn qa(rng: &mut Rng) -> Exchange {
    let (user, answer) = match rng.range(0, 5) {
        0 => {
            let (country, capital, continent) = *rng.pick(CAPITALS);
            let user = rng
                .pick(&[
                    format!("What is the capital of {country}?"),
                    format!("Tell me the capital city of {country}."),
                    format!("Which city is the capital of {country}?"),
                ])
                .clone();
            let others: Vec<&(&str, &str, &str)> = CAPITALS
                .iter()
                .filter(|c| c.2 == continent && c.0 != country)
                .take(4)
                .collect();
            let mut a =
                format!("The capital of {country} is {capital}. {country} is in {continent}.");
            if !others.is_empty() {
                a.push_str(&format!(
                    " Other countries in {continent} and their capitals:\n"
                ));
                for (c, cap, _) in others {
                    a.push_str(&format!("- {c}: {cap}\n"));
                }
                a.push_str(&format!("So the answer is {capital}."));
            }
            (user, a)
        }
        1 => {
            let (topic, items) = *rng.pick(LISTS);
            let n = rng.range(5, items.len().min(8) as i64) as usize;
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
            (user, a)
        }
        2 => {
            let w = word(rng);
            let rev: String = w.chars().rev().collect();
            let spelled: Vec<String> = w.chars().map(|c| c.to_string()).collect();
            let user = rng
                .pick(&[
                    format!("Reverse the word '{w}'."),
                    format!("Spell '{w}' backwards."),
                    format!("What is '{w}' written in reverse?"),
                ])
                .clone();
            let a = format!(
                "The letters of '{w}' are {}.\nRead from the end, they are {}.\nSo '{w}' reversed is '{rev}'.",
                spelled.join(", "),
                rev.chars().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
            );
            (user, a)
        }
        3 => {
            let w = word(rng);
            let letters: Vec<char> = w.chars().collect();
            let c = *rng.pick(&letters);
            let count = letters.iter().filter(|&&x| x == c).count();
            let user = rng
                .pick(&[
                    format!("How many times does the letter '{c}' appear in '{w}'?"),
                    format!("Count the letter '{c}' in the word '{w}'."),
                ])
                .clone();
            let mut a = format!("Let's check each letter of '{w}':\n");
            let mut seen = 0;
            for (i, x) in letters.iter().enumerate() {
                if *x == c {
                    seen += 1;
                    a.push_str(&format!("{}. '{x}' is a match ({seen} so far)\n", i + 1));
                } else {
                    a.push_str(&format!("{}. '{x}' is not a match\n", i + 1));
                }
            }
            a.push_str(&format!(
                "The letter '{c}' appears {count} time{} in '{w}'.",
                if count == 1 { "" } else { "s" }
            ));
            (user, a)
        }
        4 => {
            let n = rng.range(4, 6) as usize;
            let mut words: Vec<&str> = Vec::new();
            while words.len() < n {
                let w = *rng.pick(WORDS);
                if !words.contains(&w) {
                    words.push(w);
                }
            }
            let user = rng
                .pick(&[
                    format!("Sort these words alphabetically: {}.", words.join(", ")),
                    format!(
                        "Put these words in alphabetical order: {}.",
                        words.join(", ")
                    ),
                ])
                .clone();
            let mut sorted = words.clone();
            sorted.sort_unstable();
            let mut a = format!("There are {n} words. Sorted by their letters:\n");
            for (i, w) in sorted.iter().enumerate() {
                let first = w.chars().next().unwrap_or(' ');
                a.push_str(&format!("{}. {w} (starts with '{first}')\n", i + 1));
            }
            a.push_str(&format!(
                "The first word is {} and the last is {}.",
                sorted[0],
                sorted[n - 1]
            ));
            (user, a)
        }
        _ => {
            let (country, capital, continent) = *rng.pick(CAPITALS);
            let user = format!(
                "Answer in JSON with the keys country, capital and continent: where is {capital}?"
            );
            let a = format!("```json\n{{\n  \"country\": \"{country}\",\n  \"capital\": \"{capital}\",\n  \"continent\": \"{continent}\"\n}}\n```\n{capital} is the capital of {country}, a country in {continent}. The JSON object above has the three keys you asked for: country, capital and continent.");
            (user, a)
        }
    };
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer),
    ];
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
    }
    Exchange {
        family: Family::Qa,
        messages,
        answer: None,
    }
}

/// The `index`-th exchange of the stream for `seed` (families in rotation).
pub fn exchange(seed: u64, index: u64) -> Exchange {
    let mut rng = Rng::new(seed.wrapping_mul(0x100_0000_01B3) ^ index);
    match index % 3 {
        0 => math(&mut rng),
        1 => code(&mut rng),
        _ => qa(&mut rng),
    }
}

/// `n` exchanges for `seed`.
pub fn generate(seed: u64, n: usize) -> Vec<Exchange> {
    (0..n as u64).map(|i| exchange(seed, i)).collect()
}

/// A held-out prompt: the conversation up to the last user turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRecord {
    pub family: Family,
    /// The last user message (what `specscope run --prompt` would get).
    pub prompt: String,
    /// Earlier turns, for multi-turn prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ChatMessage>,
    /// The expected final answer (math and code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl PromptRecord {
    /// Messages to render: the history then the prompt.
    pub fn messages(&self) -> Vec<ChatMessage> {
        let mut m = self.history.clone();
        m.push(ChatMessage::new("user", &self.prompt));
        m
    }
}

/// Held-out prompts of one family from `seed`, none of whose texts occur in `exclude`.
pub fn heldout(
    seed: u64,
    family: Family,
    n: usize,
    exclude: &std::collections::HashSet<String>,
) -> Vec<PromptRecord> {
    heldout_exchanges(seed, family, n, exclude)
        .into_iter()
        .map(|e| {
            let last_user = last_user(&e);
            PromptRecord {
                family,
                prompt: e.messages[last_user].content.clone(),
                history: e.messages[..last_user].to_vec(),
                answer: e.answer.clone(),
            }
        })
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
            assert!(ex.iter().filter(|e| e.family == f).count() >= 99);
        }
        assert!(
            ex.iter().any(|e| e.messages.len() == 4),
            "multi-turn exchanges exist"
        );
    }

    #[test]
    fn math_answers_are_right() {
        for e in generate(3, 60).iter().filter(|e| e.family == Family::Math) {
            let last = &e.messages.last().unwrap().content;
            let line = last.lines().last().unwrap();
            assert_eq!(line, format!("Answer: {}", e.answer.as_ref().unwrap()));
        }
    }

    #[test]
    fn heldout_never_overlaps_training() {
        let train: std::collections::HashSet<String> =
            generate(1, 3000).iter().map(prompt_key).collect();
        for f in Family::ALL {
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
            generate(1234, 40_000).iter().map(prompt_key).collect();
        Family::ALL
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
