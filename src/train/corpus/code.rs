//! Small Python functions over a list, asked for in many phrasings. The answer defines
//! the function and runs it on the prompt's own example list (or one of its own when
//! the prompt gives none), with the printed result computed here.

use super::{Exchange, Family, Pick};
use crate::model::ChatMessage;
use crate::rng::Rng;

const VARS: &[&str] = &[
    "values", "items", "numbers", "nums", "data", "xs", "scores", "counts",
];

/// What one function does, in the forms a request can take.
struct Spec {
    /// "… a function that {that}".
    that: String,
    /// "… a function to {to}".
    to: String,
    names: [&'static str; 3],
    doc: String,
    body: Vec<String>,
    result: String,
    /// Its result on `[single]` (the follow-up test's edge case).
    single_result: String,
}

fn show(list: &[i64]) -> String {
    format!(
        "[{}]",
        list.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[allow(clippy::too_many_lines)] // one template per code task
fn spec(op: i64, var: &str, list: &[i64], k: i64, single: i64) -> Spec {
    match op {
        0 => Spec {
            that: "returns the sum of the squares of a list of numbers".into(),
            to: "sum the squares of a list of numbers".into(),
            names: ["sum_of_squares", "square_sum", "total_squares"],
            doc: format!("Return the sum of the squares of {var}."),
            body: vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                "    total += value * value".into(),
                "return total".into(),
            ],
            result: list.iter().map(|x| x * x).sum::<i64>().to_string(),
            single_result: (single * single).to_string(),
        },
        1 => Spec {
            that: format!("counts how many numbers in a list are greater than {k}"),
            to: format!("count the numbers in a list that are greater than {k}"),
            names: ["count_greater", "count_above", "how_many_above"],
            doc: format!("Count the elements of {var} greater than {k}."),
            body: vec![
                "count = 0".into(),
                format!("for value in {var}:"),
                format!("    if value > {k}:"),
                "        count += 1".into(),
                "return count".into(),
            ],
            result: list.iter().filter(|&&x| x > k).count().to_string(),
            single_result: i64::from(single > k).to_string(),
        },
        2 => Spec {
            that: format!("multiplies every number in a list by {k}"),
            to: format!("multiply every number in a list by {k}"),
            names: ["scale_all", "multiply_each", "times_each"],
            doc: format!("Return a new list with each element of {var} multiplied by {k}."),
            body: vec![
                "result = []".into(),
                format!("for value in {var}:"),
                format!("    result.append(value * {k})"),
                "return result".into(),
            ],
            result: show(&list.iter().map(|x| x * k).collect::<Vec<_>>()),
            single_result: format!("[{}]", single * k),
        },
        3 => Spec {
            that: "returns the largest number in a list".into(),
            to: "find the largest number in a list".into(),
            names: ["find_max", "largest", "max_value"],
            doc: format!("Return the largest element of {var}."),
            body: vec![
                format!("best = {var}[0]"),
                format!("for value in {var}:"),
                "    if value > best:".into(),
                "        best = value".into(),
                "return best".into(),
            ],
            result: list.iter().max().copied().unwrap_or(0).to_string(),
            single_result: single.to_string(),
        },
        4 => Spec {
            that: "keeps only the even numbers of a list".into(),
            to: "keep only the even numbers of a list".into(),
            names: ["only_even", "filter_even", "evens"],
            doc: format!("Return the even elements of {var}, in order."),
            body: vec![
                "result = []".into(),
                format!("for value in {var}:"),
                "    if value % 2 == 0:".into(),
                "        result.append(value)".into(),
                "return result".into(),
            ],
            result: show(
                &list
                    .iter()
                    .copied()
                    .filter(|x| x % 2 == 0)
                    .collect::<Vec<_>>(),
            ),
            single_result: if single % 2 == 0 {
                format!("[{single}]")
            } else {
                "[]".into()
            },
        },
        5 => Spec {
            that: format!("adds {k} to every number in a list and returns the total"),
            to: format!("add {k} to every number in a list and return the total"),
            names: ["shifted_total", "add_and_sum", "total_plus"],
            doc: format!("Add {k} to each element of {var} and return the sum."),
            body: vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                format!("    total += value + {k}"),
                "return total".into(),
            ],
            result: list.iter().map(|x| x + k).sum::<i64>().to_string(),
            single_result: (single + k).to_string(),
        },
        6 => Spec {
            that: "returns the average of a list of numbers".into(),
            to: "compute the average of a list of numbers".into(),
            names: ["average", "mean", "mean_value"],
            doc: format!("Return the arithmetic mean of {var}."),
            body: vec![
                "total = 0".into(),
                format!("for value in {var}:"),
                "    total += value".into(),
                format!("return total / len({var})"),
            ],
            result: {
                let s: i64 = list.iter().sum();
                let m = s as f64 / list.len().max(1) as f64;
                if m.fract() == 0.0 {
                    format!("{m:.1}")
                } else {
                    format!("{}", (m * 1e10).round() / 1e10)
                }
            },
            single_result: format!("{single}.0"),
        },
        _ => Spec {
            that: "reverses a list".into(),
            to: "reverse a list".into(),
            names: ["reverse_list", "backwards", "flip"],
            doc: format!("Return the elements of {var} in reverse order."),
            body: vec![
                "result = []".into(),
                format!("for index in range(len({var}) - 1, -1, -1):"),
                format!("    result.append({var}[index])"),
                "return result".into(),
            ],
            result: show(&list.iter().rev().copied().collect::<Vec<_>>()),
            single_result: format!("[{single}]"),
        },
    }
}

/// How a request for a function can be phrased (a spec form picked to fit).
fn request(rng: &mut Rng, s: &Spec) -> String {
    if rng.chance(0.6) {
        let ask = rng.pick(&[
            "Write a Python function that",
            "Write a function that",
            "Implement a Python function which",
            "Please write a small function that",
            "write a python function that",
            "Can you write a function that",
            "I need a Python function that",
            "Give me a function that",
        ]);
        format!("{ask} {}", s.that)
    } else {
        let ask = rng.pick(&[
            "Write a function to",
            "Write Python code to",
            "write a python function to",
            "How do I",
            "Show me how to",
            "Write a program to",
            "Can you write code to",
        ]);
        format!("{ask} {}", s.to)
    }
}

/// The function, run on `list`, and its explanation.
fn answer(s: &Spec, name: &str, var: &str, shown: &str) -> String {
    let mut a = format!("```python\ndef {name}({var}):\n    \"\"\"{}\"\"\"\n", s.doc);
    for line in &s.body {
        a.push_str(&format!("    {line}\n"));
    }
    a.push_str(&format!(
        "\n\nprint({name}({shown}))  # {}\n```\n",
        s.result
    ));
    a.push_str(&format!(
        "The function `{name}` takes a list called `{var}` and goes through it once, so it runs in linear time. For {shown} it prints {}.",
        s.result
    ));
    a
}

/// A function request; `with_list` makes the prompt give the example list.
pub(super) fn exchange_with(rng: &mut Rng, with_list: bool) -> Exchange {
    let var = *rng.pick(VARS);
    let list: Vec<i64> = (0..rng.range(3, 6)).map(|_| rng.range(1, 20)).collect();
    let shown = show(&list);
    let k = rng.range(2, 9);
    let op = rng.range(0, 7);
    let single = rng.range(1, 20);
    let s = spec(op, var, &list, k, single);
    let name = *rng.pick(&s.names);
    let ask = request(rng, &s);
    let (user, expect) = if with_list {
        let how = rng.pick(&[
            "Show it on {}.",
            "Use {} as the example.",
            "Try it with {}.",
            "Demonstrate it on {}.",
            "Test it on {}.",
        ]);
        let end = if ask.starts_with("How do I") || ask.starts_with("Can you") {
            "?"
        } else {
            "."
        };
        (
            format!("{ask}{end} {}", how.replace("{}", &shown)),
            vec![shown.clone()],
        )
    } else {
        let end = if ask.starts_with("How do I") || ask.starts_with("Can you") {
            rng.pick(&["?", " in Python?"])
        } else {
            rng.pick(&[".", ""])
        };
        (format!("{ask}{end}"), vec!["def ".to_string()])
    };
    let mut messages = vec![
        ChatMessage::new("user", &user),
        ChatMessage::new("assistant", &answer(&s, name, var, &shown)),
    ];
    let mut expect = expect;
    if rng.chance(0.2) {
        let ask = rng.pick(&[
            "Add a test for it.",
            "Now write a test.",
            "Can you add a unit test?",
        ]);
        messages.push(ChatMessage::new("user", ask));
        messages.push(ChatMessage::new(
            "assistant",
            &format!("Here is a test that checks the example from above and a list with one element.\n```python\ndef test_{name}():\n    assert {name}({shown}) == {}\n    assert {name}([{single}]) == {}\n\n\ntest_{name}()\nprint(\"ok\")\n```\nRunning the file prints ok when both assertions hold. A list with one element is the smallest input `{name}` accepts, so it is a useful edge case.", s.result, s.single_result),
        ));
        expect = vec![name.to_string()];
    }
    Exchange {
        family: Family::Code,
        task: "function",
        messages,
        answer: Some(s.result),
        expect,
    }
}

pub(super) fn exchange(rng: &mut Rng) -> Exchange {
    let with_list = rng.chance(0.8);
    exchange_with(rng, with_list)
}
