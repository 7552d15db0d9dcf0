//! The core invariant: at temperature 0 every decoding mode emits exactly AR greedy's
//! tokens, alone or with many requests at once.

mod common;

use common::{checkpoint, load, tokens};
use specscope::engine::overlap::RowTable;
use specscope::engine::{generate_ar, DecodeOptions, Mode, NullSink, Scheduler, Submit};
use specscope::model::synthetic::Spec;
use specscope::model::Model;

const MAX_NEW: usize = 40;

fn prompts(n: usize, vocab: usize) -> Vec<Vec<u32>> {
    (0..n).map(|i| tokens(3 + (i * 7) % 37, vocab, 100 + i as u64)).collect()
}

fn reference(model: &Model, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let eos = model.config().eos_token_ids();
    prompts
        .iter()
        .map(|p| generate_ar(model, p, MAX_NEW, &eos, |_| Ok(())).unwrap().tokens)
        .collect()
}

/// Decodes every prompt with `opts`, `concurrency` requests in flight at a time.
fn decode(model: &Model, prompts: &[Vec<u32>], opts: &DecodeOptions, concurrency: usize) -> (Vec<Vec<u32>>, f64) {
    let mut sched = Scheduler::new(model.clone(), None);
    let mut out = vec![Vec::new(); prompts.len()];
    let mut ids = Vec::new();
    let mut next = 0;
    let (mut tokens, mut rounds) = (0usize, 0usize);
    while next < prompts.len() || sched.active() > 0 {
        while sched.active() < concurrency && next < prompts.len() {
            let s = Submit { prompt: prompts[next].clone(), options: opts.clone(), family: None };
            ids.push(sched.submit(s, &mut NullSink).unwrap());
            next += 1;
        }
        sched.step(&mut NullSink).unwrap();
        for f in sched.take_finished() {
            let k = ids.iter().position(|&id| id == f.id).unwrap();
            tokens += f.stats.decode_tokens;
            rounds += f.stats.rounds;
            out[k] = f.tokens;
        }
    }
    (out, tokens as f64 / rounds.max(1) as f64)
}

fn opts(mode: Mode, block: usize, overlap: bool, adaptive: bool) -> DecodeOptions {
    DecodeOptions {
        mode,
        block,
        overlap,
        adaptive,
        cost_aware: false,
        max_new_tokens: MAX_NEW,
        ..DecodeOptions::default()
    }
}

#[test]
fn every_mode_is_lossless() {
    let spec = Spec { lora_rank: Some(4), ..Spec::toy() };
    let dir = checkpoint(&spec);
    let model = load(dir.path());
    let prompts = prompts(50, spec.vocab_size);
    let want = reference(&model, &prompts);
    let mut configs = vec![("ar".to_string(), opts(Mode::Ar, 1, false, false))];
    for b in [1, 4, 8, 16, 32] {
        configs.push((format!("linear B={b}"), opts(Mode::Linear, b, false, false)));
    }
    for (overlap, adaptive) in [(true, false), (false, true), (true, true)] {
        configs.push((format!("recguide overlap={overlap} adaptive={adaptive}"), opts(Mode::Recguide, 16, overlap, adaptive)));
    }
    for table in [RowTable::Multi, RowTable::NoP3, RowTable::P1ConditionalNew] {
        let mut o = opts(Mode::Recguide, 8, true, false);
        o.row_table = table;
        configs.push((format!("recguide {table:?}"), o));
    }
    for (name, o) in &configs {
        for c in [1, 4, 16] {
            let (got, per_round) = decode(&model, &prompts, o, c);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} C={c}: prompt {k} differs from AR");
            }
            eprintln!("{name} C={c}: {per_round:.2} tokens/round");
        }
    }
}
