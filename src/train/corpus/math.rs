//! Arithmetic word problems. The answer restates the problem's person, objects and
//! every number before working each step, so the model learns to copy them from the
//! prompt (as a real model does, and as self-speculation exploits); the steps are small
//! (sums and differences under 1,000, products from the times table) so that a small
//! model can get them right.

use super::{Exchange, Family, Pick};
use crate::model::ChatMessage;
use crate::rng::Rng;

/// Names with the pronoun the story uses for them.
pub(super) const PEOPLE: &[(&str, &str)] = &[
    ("Maya", "she"),
    ("Liam", "he"),
    ("Ava", "she"),
    ("Noah", "he"),
    ("Zoe", "she"),
    ("Omar", "he"),
    ("Lena", "she"),
    ("Ivan", "he"),
    ("Sara", "she"),
    ("Ravi", "he"),
    ("Chen", "he"),
    ("Nina", "she"),
    ("Tom", "he"),
    ("Priya", "she"),
    ("Leo", "he"),
    ("Emma", "she"),
    ("Yuki", "she"),
    ("Marco", "he"),
    ("Aisha", "she"),
    ("Ben", "he"),
    ("Julia", "she"),
    ("Hugo", "he"),
    ("Mia", "she"),
    ("Felix", "he"),
    ("Rosa", "she"),
    ("Sam", "he"),
    ("Ella", "she"),
    ("Kofi", "he"),
    ("Ines", "she"),
    ("Oscar", "he"),
    ("Hana", "she"),
    ("Diego", "he"),
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
    ("buttons", "tins"),
    ("candles", "crates"),
    ("toys", "baskets"),
    ("flowers", "pots"),
];

/// One step of a story.
enum Op {
    Buy { n: i64, each: i64 },
    Give(i64),
    Find(i64),
    Lose(i64),
    Times(i64),
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn possessive(pronoun: &str) -> &'static str {
    if pronoun == "she" {
        "her"
    } else {
        "his"
    }
}

/// A worked word problem of 2–3 steps, sometimes with a follow-up turn.
#[allow(clippy::too_many_lines)] // one template per word problem shape
pub(super) fn exchange(rng: &mut Rng) -> Exchange {
    let (name, she) = *rng.pick(PEOPLE);
    let (item, holder) = *rng.pick(ITEMS);
    let start = rng.range(5, 60);
    let mut total = start;
    let mut ops = Vec::new();
    for _ in 0..rng.range(2, 3) {
        let op = match rng.range(0, 4) {
            0 => Op::Buy {
                n: rng.range(2, 6),
                each: rng.range(2, 9),
            },
            1 if total > 2 => Op::Give(rng.range(1, (total - 1).min(40))),
            3 if total > 2 => Op::Lose(rng.range(1, (total - 1).min(30))),
            4 if total <= 60 => Op::Times(rng.range(2, if total <= 30 { 3 } else { 2 })),
            _ => Op::Find(rng.range(2, 40)),
        };
        total = match op {
            Op::Buy { n, each } => total + n * each,
            Op::Give(k) | Op::Lose(k) => total - k,
            Op::Find(k) => total + k,
            Op::Times(k) => total * k,
        };
        ops.push(op);
    }
    let her = possessive(she);
    let mut story = vec![format!("{name} has {start} {item}.")];
    let mut expect = vec![name.to_string(), item.to_string(), start.to_string()];
    for (i, op) in ops.iter().enumerate() {
        let who = if i == 0 {
            capitalize(she)
        } else {
            rng.pick(&[
                format!("Then {she}"),
                capitalize(she),
                format!("After that, {she}"),
                format!("Next, {she}"),
            ])
            .clone()
        };
        story.push(match op {
            Op::Buy { n, each } => {
                expect.extend([n.to_string(), each.to_string()]);
                format!("{who} buys {n} {holder} with {each} {item} each.")
            }
            Op::Give(k) => {
                expect.push(k.to_string());
                rng.pick(&[
                    format!("{who} gives {k} {item} to a friend."),
                    format!("{who} gives away {k} {item}."),
                ])
                .clone()
            }
            Op::Lose(k) => {
                expect.push(k.to_string());
                rng.pick(&[
                    format!("{who} loses {k} {item}."),
                    format!("{who} sells {k} {item}."),
                ])
                .clone()
            }
            Op::Find(k) => {
                expect.push(k.to_string());
                rng.pick(&[
                    format!("{who} finds {k} more {item}."),
                    format!("{who} gets {k} more {item}."),
                ])
                .clone()
            }
            Op::Times(k) => {
                let verb = if *k == 2 { "doubles" } else { "triples" };
                format!("{who} {verb} {her} {item}.")
            }
        });
    }
    let question = rng
        .pick(&[
            format!("How many {item} does {name} have now?"),
            format!("How many {item} does {name} have at the end?"),
            format!("What is the final number of {item}?"),
            format!("How many {item} are there in the end?"),
        ])
        .clone();
    let lead = rng.pick(&[
        "",
        "",
        "Solve this step by step. ",
        "Word problem: ",
        "Please help: ",
        "Math question: ",
    ]);
    let user = format!("{lead}{} {question}", story.join(" "));

    let mut answer = format!("{name} starts with {start} {item}.\n");
    let mut t = start;
    for (i, op) in ops.iter().enumerate() {
        let step = match op {
            Op::Buy { n, each } => {
                let p = n * each;
                let s = format!(
                    "{name} buys {n} {holder} with {each} {item} each, which is {n} * {each} = {p} {item}. Now {name} has {t} + {p} = {} {item}.",
                    t + p
                );
                t += p;
                s
            }
            Op::Give(k) => {
                let s = format!(
                    "{name} gives away {k} {item}, so {t} - {k} = {} {item} are left.",
                    t - k
                );
                t -= k;
                s
            }
            Op::Lose(k) => {
                let s = format!(
                    "{name} loses {k} {item}, so {t} - {k} = {} {item} are left.",
                    t - k
                );
                t -= k;
                s
            }
            Op::Find(k) => {
                let s = format!(
                    "{name} finds {k} more {item}, so {t} + {k} = {} {item}.",
                    t + k
                );
                t += k;
                s
            }
            Op::Times(k) => {
                let verb = if *k == 2 { "Doubling" } else { "Tripling" };
                let s = format!("{verb} gives {t} * {k} = {} {item}.", t * k);
                t *= k;
                s
            }
        };
        answer.push_str(&format!("Step {}: {step}\n", i + 1));
    }
    answer.push_str(&format!(
        "So {name} has {total} {item} at the end.\nAnswer: {total}"
    ));
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer),
    ];
    let mut final_answer = total;
    if rng.chance(0.2) {
        let (ask, next, line) = match rng.range(0, 2) {
            0 => {
                let k = rng.range(2, 50);
                (
                    format!("Now add {k} to that."),
                    total + k,
                    format!("{total} + {k} = {}", total + k),
                )
            }
            1 if total > 2 => {
                let k = rng.range(1, (total - 1).min(50));
                (
                    format!("Now take away {k}."),
                    total - k,
                    format!("{total} - {k} = {}", total - k),
                )
            }
            _ => (
                "Now double that result.".to_string(),
                total * 2,
                format!("{total} * 2 = {}", total * 2),
            ),
        };
        messages.push(ChatMessage::new("user", &ask));
        messages.push(ChatMessage::new(
            "assistant",
            &format!(
                "The previous result was {total}.\nStep 1: {line}.\nSo the new result is {next}.\nAnswer: {next}"
            ),
        ));
        final_answer = next;
        expect = vec![total.to_string()];
    }
    Exchange {
        family: Family::Math,
        task: "word_problem",
        messages,
        answer: Some(final_answer.to_string()),
        expect,
    }
}
