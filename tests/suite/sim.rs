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

/// A run's `learned` events, read back as a recording reads them, rebuild the beliefs
/// the engine ended with: under a fixed GPU profile's prices (the paper preset) and
/// where the prices learn from this machine's wall clock (the throughput preset, AR
/// steps and regimes included); every third request diffuses (its forwards are
/// observed in steps of their own, the last ones included).
#[test]
fn a_runs_learned_events_rebuild_its_beliefs() {
    use specscope::engine::{Pricing, Submit, VecSink};
    use specscope::trace::beliefs::{rebuild, rebuild_until};
    let model = sim();
    let prompts = prompts(10);
    for (preset, pricing) in [
        (
            Preset::Paper,
            Pricing::select(Some("b200-nld8b-measured")).unwrap(),
        ),
        (Preset::Throughput, Pricing::builtin()),
    ] {
        let mut sched = Scheduler::new(model.clone(), None)
            .with_tables(specscope::sim::survival_tables())
            .with_pricing(pricing);
        let mut sink = VecSink::default();
        let o = DecodeOptions {
            max_new_tokens: 64,
            ..preset.options()
        };
        let diffusing = DecodeOptions {
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(8),
            ..o.clone()
        };
        let mut next = 0;
        while next < prompts.len() || sched.active() > 0 {
            while sched.active() < 4 && next < prompts.len() {
                let s = Submit {
                    prompt: prompts[next].clone(),
                    options: if next % 3 == 1 || next + 1 == prompts.len() {
                        diffusing.clone()
                    } else {
                        o.clone()
                    },
                    family: None,
                };
                sched.submit(s, &mut sink).unwrap();
                next += 1;
            }
            sched.step(&mut sink).unwrap();
        }
        // Through JSON, as a recording holds them.
        let events: Vec<specscope::engine::DecodeEvent> = sink
            .events
            .iter()
            .map(|e| serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap())
            .collect();
        let r = rebuild(&events).unwrap().expect("learned events");
        let want = format!("{:?}", sched.beliefs());
        assert_eq!(format!("{:?}", r.beliefs), want, "{preset:?}");
        let packed = r.loads.iter().any(|&c| c >= 3);
        assert!(r.steps > 10 && packed, "{preset:?}: {:?}", r.loads);
        // Stopped after step 5: the beliefs of a run of 5 steps, which differ.
        let five = rebuild_until(&events, Some(5)).unwrap().unwrap();
        assert_eq!(five.steps, 5);
        assert_ne!(format!("{:?}", five.beliefs), want);
        let past = rebuild_until(&events, Some(r.steps + 1)).unwrap_err();
        assert!(past.to_string().contains("not"), "{past}");
        let report = r.report();
        assert!(report.contains("branch rows: hits"), "{report}");
        // Without step 1 the start is missing; without a later step, what it taught.
        let learned: Vec<usize> = (0..events.len())
            .filter(|&i| matches!(events[i], specscope::engine::DecodeEvent::Learned { .. }))
            .collect();
        for (cut, says) in [
            (learned[0], "starts at the engine's step 2"),
            (learned[3], "step 5 follows step 3"),
        ] {
            let mut fewer = events.clone();
            fewer.remove(cut);
            let e = rebuild(&fewer).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
