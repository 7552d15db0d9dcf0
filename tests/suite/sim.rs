//! The simulated NLD-8B backbone (`--model sim:nld-8b`): every mode stays AR greedy's
//! tokens on it, and its observation statistics sit within the stated tolerance of the
//! published ones (`specscope sim check` prints the same table).

use std::sync::Arc;

use specscope::engine::options::THROUGHPUT_BLOCKS;
use specscope::engine::{
    generate_ar, Backbone, Blocks, DecodeOptions, Mode, Preset, Scheduler, SharedBackbone,
};
use specscope::model::{self, ModelSource};
use specscope::rng::Rng;
use specscope::sim::check::{statistics, DEFAULT_REQUESTS, TOLERANCE};
use specscope::sim::SimBackbone;

const MAX_NEW: usize = 96;

fn sim() -> SharedBackbone {
    let files = ModelSource::Bundled.resolve().unwrap();
    let cfg = model::load_config(&files).unwrap();
    let tok = model::load_tokenizer(&files, &cfg).unwrap();
    Arc::new(SimBackbone::new("nld-8b", cfg, tok).unwrap())
}

fn prompts(n: usize) -> Vec<Vec<u32>> {
    let mut rng = Rng::new(3);
    (0..n)
        .map(|_| {
            (0..12)
                .map(|_| 20 + (rng.next_u64() % 1500) as u32)
                .collect()
        })
        .collect()
}

fn decode(
    model: &SharedBackbone,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
    c: usize,
) -> Vec<Vec<u32>> {
    let sched = Scheduler::new(model.clone(), None);
    crate::lossless::decode_with(sched, prompts, o, c, |_| {}).0
}

#[test]
fn every_mode_is_ar_greedy_on_the_simulator() {
    let model = sim();
    let prompts = prompts(16);
    let eos = model.config().eos_token_ids();
    let want: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            generate_ar(model.as_ref(), p, MAX_NEW, &eos, |_| Ok(()))
                .unwrap()
                .tokens
        })
        .collect();
    assert!(
        want.iter().all(|w| w.len() == MAX_NEW),
        "answers run to the budget"
    );
    let with = |mode: Mode, blocks: Blocks, overlap: bool| DecodeOptions {
        mode,
        blocks,
        overlap,
        max_new_tokens: MAX_NEW,
        ..DecodeOptions::default()
    };
    let mut configs = vec![("ar".to_string(), with(Mode::Ar, Blocks::Fixed(1), false))];
    for b in [4, 8, 16, 32] {
        configs.push((
            format!("linear B={b}"),
            with(Mode::Linear, Blocks::Fixed(b), false),
        ));
        configs.push((
            format!("recguide fixed B={b}"),
            with(Mode::Recguide, Blocks::Fixed(b), true),
        ));
    }
    configs.push((
        "recguide adaptive {1..32}".into(),
        with(
            Mode::Recguide,
            Blocks::Adaptive(THROUGHPUT_BLOCKS.to_vec()),
            true,
        ),
    ));
    for &preset in <Preset as clap::ValueEnum>::value_variants() {
        let o = DecodeOptions {
            max_new_tokens: MAX_NEW,
            ..preset.options()
        };
        configs.push((format!("preset {preset:?}"), o));
    }
    for (name, o) in &configs {
        for c in [1, 8] {
            let got = decode(&model, &prompts, o, c);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} C={c}: prompt {k} differs from AR");
            }
        }
    }
}

/// The table of `specscope sim check` at its defaults, every row within ±5%.
#[test]
fn the_simulator_accepts_like_nld_8b() {
    let stats = statistics(sim().as_ref(), DEFAULT_REQUESTS, None).unwrap();
    assert_eq!(stats.len(), 20);
    let outside: Vec<String> = stats
        .iter()
        .filter(|s| !s.within(TOLERANCE))
        .map(|s| format!("{}: {:.3} vs {:.3}", s.name, s.simulated, s.published))
        .collect();
    assert!(outside.is_empty(), "outside ±5%: {outside:?}");
}
