//! What newcomers type first: greetings and "what can you do", short arithmetic,
//! function requests without an example, capitals, and anything else, which gets a
//! polite "I can only …" naming what the model does.

use super::{code, qa, Exchange, Family, Pick};
use crate::model::ChatMessage;
use crate::rng::Rng;

/// The self-description every greeting and "what can you do" ends with.
pub const SELF_DESCRIPTION: &str = "I am the bundled drill model of specscope: a model of about 4 million parameters, trained from scratch on generated practice exchanges. I can solve short arithmetic and word problems, write small Python functions on lists, name the capitals of 30 countries, and reverse, count letters in or sort words. Try \"What is 12 plus 7?\" or \"Write a Python function that reverses a list.\"";

/// The start of every out-of-scope answer (what eval checks for).
pub const ONLY: &str = "I can only";

const OPENERS: &[&str] = &[
    "Hello! ",
    "Hi! ",
    "Hi, ",
    "Hey, ",
    "Hello, ",
    "Hi there. ",
    "Good morning! ",
    "Hey! ",
];

fn greeting(rng: &mut Rng) -> (String, String) {
    let (user, lead) = *rng.pick(&[
        ("Hello!", "Hello!"),
        ("Hi", "Hi!"),
        ("hi", "Hi!"),
        ("Hello! How are you?", "Hello! I am fine, thank you."),
        ("How are you?", "I am fine, thank you."),
        ("Hey there!", "Hello!"),
        ("Good morning!", "Good morning!"),
        ("Good evening.", "Good evening!"),
        ("Who are you?", "Hello!"),
        ("What can you do?", "Here is what I can do."),
        ("What are you?", "Hello!"),
        ("What can I ask you?", "Here is what you can ask."),
        ("help", "Here is what I can do."),
        (
            "What kind of questions can you answer?",
            "Here is what I can do.",
        ),
        ("Are you an AI?", "Yes."),
        ("Tell me about yourself.", "Hello!"),
        ("What do you know?", "Here is what I know."),
        ("Hi, what can you do?", "Hi! Here is what I can do."),
        ("Hello, who are you?", "Hello!"),
        ("hey", "Hello!"),
        ("Thanks!", "You are welcome!"),
        ("Thank you.", "You are welcome!"),
    ]);
    (user.to_string(), format!("{lead} {SELF_DESCRIPTION}"))
}

/// "What is 12 plus 7?" and its kin, with an `Answer:` line.
fn arithmetic(rng: &mut Rng) -> (String, String, String, Vec<String>) {
    let (a, b, c, word, sym) = match rng.range(0, 3) {
        0 => {
            let (a, b) = (rng.range(1, 99), rng.range(1, 99));
            (a, b, a + b, "plus", "+")
        }
        1 => {
            let a = rng.range(10, 99);
            let b = rng.range(1, a);
            (a, b, a - b, "minus", "-")
        }
        2 => {
            let (mut a, mut b) = (rng.range(2, 20), rng.range(2, 9));
            if rng.chance(0.5) {
                std::mem::swap(&mut a, &mut b);
            }
            (a, b, a * b, "times", "*")
        }
        _ => {
            let (b, c) = (rng.range(2, 9), rng.range(2, 12));
            (b * c, b, c, "divided by", "/")
        }
    };
    let user = rng
        .pick(&[
            format!("What is {a} {word} {b}?"),
            format!("What's {a} {sym} {b}?"),
            format!("{a} {word} {b}"),
            format!("How much is {a} {word} {b}?"),
            format!("Compute {a} {sym} {b}."),
            format!("what is {a}{sym}{b}"),
            format!("Calculate {a} {word} {b}."),
            format!("{a} {sym} {b} = ?"),
        ])
        .clone();
    let answer = format!("{a} {sym} {b} = {c}.\nSo {a} {word} {b} is {c}.\nAnswer: {c}");
    (
        user,
        answer,
        c.to_string(),
        vec![a.to_string(), b.to_string()],
    )
}

/// Topics of out-of-scope requests. None of them is a held-out prompt's topic, so eval
/// measures whether the refusal generalises past the requests it was drilled on.
const TOPICS: &[&str] = &[
    "cats",
    "the sea",
    "love",
    "winter",
    "robots",
    "coffee",
    "the moon",
    "football",
    "music",
    "my dog",
    "spring",
    "the ocean",
    "dragons",
    "friendship",
    "the city",
    "rain",
    "trains",
    "my mother",
    "space",
    "a lost key",
    "birds",
    "the forest",
    "pizza",
    "summer",
    "the stars",
    "a rainy day",
    "horses",
    "the mountains",
    "school",
    "chocolate",
    "a robot",
    "the night",
];

/// Things to explain, invent or buy in out-of-scope requests.
const THINGS: &[&str] = &[
    "a bicycle",
    "a computer",
    "the internet",
    "a rocket",
    "a fridge",
    "a plane",
    "a battery",
    "a camera",
    "a phone",
    "a clock",
    "the telephone",
    "a microwave",
    "a light bulb",
    "a washing machine",
    "a radio",
    "a train",
];

/// Requests outside what the model does, and the refusal naming what it does. Many
/// shapes (writing, opinions, how things work, predictions, advice, translation, the
/// world today) over many topics: with only a few shapes the model answered unseen
/// ones ("Write a haiku …", "Who will win …") with a word reversal.
#[allow(clippy::too_many_lines)] // one template per out-of-scope request shape
fn out_of_scope(rng: &mut Rng) -> (String, String) {
    let topic = *rng.pick(TOPICS);
    let thing = *rng.pick(THINGS);
    let form = *rng.pick(&[
        "poem",
        "story",
        "song",
        "limerick",
        "joke",
        "riddle",
        "letter",
        "short essay",
        "rhyme",
        "speech",
    ]);
    // `range` includes both ends: twelve kinds, one draw in twelve each.
    let user = match rng.range(0, 11) {
        0 => rng
            .pick(&[
                format!("Write a {form} about {topic}."),
                format!("Can you write a {form} about {topic}?"),
                format!("Compose a {form} about {topic}."),
                format!("Make up a {form} about {topic}"),
                format!("Tell me a {form} about {topic}."),
            ])
            .clone(),
        1 => rng
            .pick(&[
                format!("What do you think about {topic}?"),
                format!("Do you like {topic}?"),
                format!("Why do people love {topic}?"),
                format!("Give me some facts about {topic}."),
                format!("Tell me something interesting about {topic}."),
            ])
            .clone(),
        2 => rng
            .pick(&[
                format!("How does {thing} work?"),
                format!("Can you explain how {thing} works?"),
                format!("Who invented {thing}?"),
                format!("Explain {thing} to me."),
                format!("Where can I buy {thing}?"),
                format!("How do I fix {thing}?"),
            ])
            .clone(),
        3 => rng
            .pick(&[
                "Who won the game last night?",
                "Who will win the World Cup?",
                "Who will win the next match?",
                "Will it snow tomorrow?",
                "Which team will win the final?",
                "What will happen next year?",
                "Who is going to be the next champion?",
            ])
            .to_string(),
        4 => rng
            .pick(&[
                "What's the weather like today?",
                "What is the weather in Paris?",
                "Is it going to rain in Tokyo?",
                "What time is it?",
                "What is the news today?",
                "What day is it today?",
                "How hot is it in Cairo right now?",
            ])
            .to_string(),
        5 => {
            let phrase = *rng.pick(&[
                "good morning",
                "hello",
                "good night",
                "I love you",
                "please",
            ]);
            let language = *rng.pick(&["French", "German", "Italian", "Japanese", "Chinese"]);
            rng.pick(&[
                format!("Translate '{phrase}' into {language}."),
                format!("How do you say '{phrase}' in {language}?"),
                format!("What is '{phrase}' in {language}?"),
            ])
            .clone()
        }
        6 => rng
            .pick(&[
                "How do I cook rice?",
                "How do I bake bread?",
                "How can I sleep better?",
                "How do I learn to swim?",
                "How can I get rich?",
                "Should I buy a new phone?",
                "What should I eat for dinner?",
                "Give me some advice about my job.",
            ])
            .to_string(),
        7 => rng
            .pick(&[
                "Recommend a good movie.",
                "Recommend a good book.",
                "What is the best programming language?",
                "What is the best phone to buy?",
                "Which music should I listen to?",
                "Suggest a name for my cat.",
            ])
            .to_string(),
        8 => rng
            .pick(&[
                "What is the meaning of life?",
                "Explain quantum physics.",
                "Why is the sky blue?",
                "How big is the universe?",
                "What is a black hole?",
                "How do plants grow?",
                "Why do we dream?",
            ])
            .to_string(),
        9 => rng
            .pick(&[
                "Can you help me with my homework?",
                "Summarize this article for me.",
                "Write an email to my boss.",
                "Check my essay for mistakes.",
                "Plan a trip for me.",
                "Book a table for two.",
            ])
            .to_string(),
        10 => rng
            .pick(&[
                "Who is the president?",
                "Who is the richest person in the world?",
                "Who wrote Hamlet?",
                "When was the first moon landing?",
                "How old is the Earth?",
            ])
            .to_string(),
        _ => rng
            .pick(&[
                "Tell me a joke.",
                "Sing me a song.",
                "Tell me a story.",
                "Let's play a game.",
            ])
            .to_string(),
    };
    let (country, _, _) = *rng.pick(qa::CAPITALS);
    let tries = rng
        .pick(&[
            format!("\"What is the capital of {country}?\""),
            "\"What is 12 plus 7?\"".to_string(),
            "\"Reverse the word 'planet'.\"".to_string(),
            "\"Write a Python function that reverses a list.\"".to_string(),
        ])
        .clone();
    let answer = format!(
        "{ONLY} help with a few kinds of practice tasks: short arithmetic and word problems, small Python functions on lists, the capitals of 30 countries, and reversing, counting letters in or sorting words. I am a tiny drill model, so this question is beyond what I was trained on. Try {tries}"
    );
    (user, answer)
}

pub(super) fn exchange(rng: &mut Rng) -> Exchange {
    let opener = if rng.chance(0.3) {
        *rng.pick(OPENERS)
    } else {
        ""
    };
    let (task, user, answer, exact, expect) = match rng.range(0, 9) {
        0 | 1 => {
            let (u, a) = greeting(rng);
            ("greeting", u, a, None, vec!["drill model".to_string()])
        }
        2..=4 => {
            let (u, a, c, e) = arithmetic(rng);
            ("arithmetic", format!("{opener}{u}"), a, Some(c), e)
        }
        5 => {
            let mut e = code::exchange_with(rng, false);
            e.family = Family::First;
            if let Some(first) = e.messages.first_mut() {
                first.content = format!("{opener}{}", first.content);
            }
            return e;
        }
        6 => {
            let (country, capital, continent) = *rng.pick(qa::CAPITALS);
            let u = qa::capital_question(rng, country);
            (
                "capital",
                format!("{opener}{u}"),
                qa::capital_answer(country, capital, continent),
                Some(capital.to_string()),
                vec![country.to_string()],
            )
        }
        _ => {
            let (u, a) = out_of_scope(rng);
            (
                "out_of_scope",
                format!("{opener}{u}"),
                a,
                None,
                vec![ONLY.to_string()],
            )
        }
    };
    Exchange {
        family: Family::First,
        task,
        messages: vec![
            ChatMessage::new("user", &user),
            ChatMessage::new("assistant", &answer),
        ],
        answer: exact,
        expect,
    }
}

/// The held-out first prompts: written as a newcomer would type them, in phrasings
/// the generator is meant to cover but never produces verbatim (a test checks). Each
/// with what an on-topic answer contains and, for arithmetic, the exact answer.
pub const HELDOUT: &[(&str, &str, &[&str], Option<&str>)] = &[
    (
        "greeting",
        "Hello! How are you doing?",
        &["drill model"],
        None,
    ),
    ("greeting", "hi there", &["drill model"], None),
    (
        "greeting",
        "What can you help me with?",
        &["drill model"],
        None,
    ),
    (
        "greeting",
        "Hey! What are you able to do?",
        &["drill model"],
        None,
    ),
    (
        "greeting",
        "Who are you and what can you do?",
        &["drill model"],
        None,
    ),
    (
        "greeting",
        "good morning, how are you?",
        &["drill model"],
        None,
    ),
    (
        "arithmetic",
        "What is 12 plus 7?!",
        &["12", "7"],
        Some("19"),
    ),
    ("arithmetic", "15 times 3?", &["15", "3"], Some("45")),
    ("arithmetic", "what is 25 + 17?", &["25", "17"], Some("42")),
    (
        "arithmetic",
        "How much is 9 times 8",
        &["9", "8"],
        Some("72"),
    ),
    (
        "arithmetic",
        "Please compute 64 minus 28.",
        &["64", "28"],
        Some("36"),
    ),
    ("arithmetic", "what's 48 + 35", &["48", "35"], Some("83")),
    (
        "arithmetic",
        "Calculate 7 * 6 please.",
        &["7", "6"],
        Some("42"),
    ),
    (
        "arithmetic",
        "What is 56 divided by 8?!",
        &["56", "8"],
        Some("7"),
    ),
    (
        "arithmetic",
        "Hi! What's 33 minus 14?",
        &["33", "14"],
        Some("19"),
    ),
    ("arithmetic", "11 + 22 = ", &["11", "22"], Some("33")),
    (
        "function",
        "Write a python function that reverses a list!",
        &["def "],
        None,
    ),
    (
        "function",
        "write a function to find the largest number in a list please",
        &["def "],
        None,
    ),
    (
        "function",
        "Can you write Python code to sum the squares of a list of numbers?",
        &["def "],
        None,
    ),
    (
        "function",
        "How do I keep only the even numbers of a list in python",
        &["def "],
        None,
    ),
    (
        "function",
        "Python function that returns the average of a list of numbers.",
        &["def "],
        None,
    ),
    (
        "function",
        "I want a function that multiplies every number in a list by 3.",
        &["def "],
        None,
    ),
    (
        "capital",
        "What is the capital of Japan??",
        &["Japan"],
        Some("Tokyo"),
    ),
    (
        "capital",
        "whats the capital of France?",
        &["France"],
        Some("Paris"),
    ),
    (
        "capital",
        "Hi! Which city is the capital of Kenya",
        &["Kenya"],
        Some("Nairobi"),
    ),
    (
        "capital",
        "Tell me the capital of Peru, please.",
        &["Peru"],
        Some("Lima"),
    ),
    (
        "capital",
        "What's the capital city of Germany?",
        &["Germany"],
        Some("Berlin"),
    ),
    (
        "capital",
        "capital of Australia",
        &["Australia"],
        Some("Canberra"),
    ),
    (
        "out_of_scope",
        "Tell me a joke about penguins.",
        &[ONLY],
        None,
    ),
    ("out_of_scope", "Write a haiku about autumn.", &[ONLY], None),
    (
        "out_of_scope",
        "What's the weather in London?",
        &[ONLY],
        None,
    ),
    (
        "out_of_scope",
        "Who will win the next election?",
        &[ONLY],
        None,
    ),
    (
        "out_of_scope",
        "Can you explain how a car engine works?",
        &[ONLY],
        None,
    ),
    (
        "out_of_scope",
        "Translate 'thank you' into Spanish.",
        &[ONLY],
        None,
    ),
];
