//! The compute dtype: bf16 on the CPU agrees with f32 on the bundled model (top-1 at
//! the great majority of positions), and every mode stays exactly AR greedy within
//! bf16. The device comes from `SPECSCOPE_TEST_DEVICE` (`cuda` on a GPU machine; the
//! CPU otherwise).

use crate::common;

use candle_core::{DType, IndexOp};
use specscope::engine::{
    generate_ar, Blocks, DecodeOptions, Mode, NullSink, Preset, Scheduler, Submit,
};
use specscope::model::{self, AttnRule, LoadOptions, LogitSel, ModelSource, Row, RowBatch};
use specscope::train::corpus::{self, Family};

fn bundled(dtype: DType) -> (model::Model, model::TextTokenizer) {
    let files = ModelSource::Bundled.resolve().unwrap();
    let opts = LoadOptions {
        dtype,
        ..LoadOptions::default()
    };
    let (m, _) = model::load(&files, &common::device(), opts).unwrap();
    let tok = model::load_tokenizer(&files, m.config()).unwrap();
    (m, tok)
}

fn prompts(tok: &model::TextTokenizer, n: usize) -> Vec<Vec<u32>> {
    let none = Default::default();
    [Family::Math, Family::Code, Family::Qa]
        .iter()
        .flat_map(|&f| corpus::heldout(4242, f, n, &none))
        .map(|p| tok.encode_chat(&p.messages(), false).unwrap())
        .collect()
}

#[test]
fn bf16_agrees_with_f32_on_the_bundled_model() {
    let (m32, tok) = bundled(DType::F32);
    let (m16, _) = bundled(DType::BF16);
    let eos = m32.config().eos_token_ids();
    let (mut same, mut total) = (0usize, 0usize);
    for p in prompts(&tok, 4) {
        // Teacher-forced: the f32 answer, every position's next-token argmax in both.
        let answer = generate_ar(&m32, &p, 96, &eos, |_| Ok(())).unwrap().tokens;
        let seq: Vec<u32> = p.iter().chain(&answer).copied().collect();
        let top = |m: &model::Model| -> Vec<u32> {
            let mut cache = m.new_cache();
            let row = Row::new(0, seq.clone(), AttnRule::Causal).logits(LogitSel::All);
            let logits = m
                .forward(&RowBatch::single(row), &mut [&mut cache])
                .unwrap()
                .remove(0);
            (p.len() - 1..seq.len())
                .map(|i| m.argmax_no_mask(&logits.i(i).unwrap()).unwrap())
                .collect()
        };
        let (a, b) = (top(&m32), top(&m16));
        same += a.iter().zip(&b).filter(|(x, y)| x == y).count();
        total += a.len();
    }
    let share = same as f64 / total as f64;
    eprintln!(
        "bf16 top-1 agrees with f32 at {same} of {total} positions ({:.1}%)",
        100.0 * share
    );
    assert!(share >= 0.9, "{share}");
}

#[test]
fn every_mode_is_ar_greedy_within_bf16() {
    let (m, tok) = bundled(DType::BF16);
    let eos = m.config().eos_token_ids();
    let ps = prompts(&tok, 2);
    let want: Vec<Vec<u32>> = ps
        .iter()
        .map(|p| generate_ar(&m, p, 64, &eos, |_| Ok(())).unwrap().tokens)
        .collect();
    let base = DecodeOptions {
        max_new_tokens: 64,
        ..DecodeOptions::default()
    };
    for o in [
        DecodeOptions {
            mode: Mode::Linear,
            blocks: Blocks::Fixed(16),
            ..base.clone()
        },
        base.clone(),
        DecodeOptions {
            max_new_tokens: 64,
            ..Preset::Throughput.options()
        },
    ] {
        let mut sched = Scheduler::new(m.clone(), None);
        for p in &ps {
            let s = Submit {
                prompt: p.clone(),
                options: o.clone(),
                family: None,
            };
            sched.submit(s, &mut NullSink).unwrap();
        }
        sched.run_to_completion(&mut NullSink).unwrap();
        let mut done = sched.take_finished();
        done.sort_by_key(|f| f.id);
        for (d, w) in done.iter().zip(&want) {
            assert_eq!(&d.tokens, w, "{}", o.label());
        }
    }
}
