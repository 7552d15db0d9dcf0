//! The core invariant: at temperature 0 every decoding mode emits exactly AR greedy's
//! tokens, alone or with many requests at once. Run on a trained checkpoint whose drafts
//! are often accepted and whose branches sometimes hit, so every path is exercised.

use crate::common;

use crate::common::fixture_prompts;
use specscope::engine::cost::CostModel;
use specscope::engine::options::THROUGHPUT_BLOCKS;
use specscope::engine::overlap::RowTable;
use specscope::engine::policy::{stratum, SurvivalTables};
use specscope::engine::Ablation;
use specscope::engine::{
    generate_ar, Batching, Blocks, DecodeOptions, Mode, NullSink, Preset, RequestStats, Scheduler,
    Submit,
};
use specscope::model::Model;

const MAX_NEW: usize = 40;
/// Every branch row the table asks for rides, so branches are built and hit.
const ROWS: Ablation = Ablation::EVERY_ROW;

fn reference(model: &Model, prompts: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let eos = model.config().eos_token_ids();
    prompts
        .iter()
        .map(|p| {
            generate_ar(model, p, MAX_NEW, &eos, |_| Ok(()))
                .unwrap()
                .tokens
        })
        .collect()
}

/// Decodes every prompt with `opts` and `ablation`, `concurrency` requests in flight
/// at a time.
fn decode(
    model: &Model,
    prompts: &[Vec<u32>],
    opts: &DecodeOptions,
    ablation: Ablation,
    concurrency: usize,
) -> (Vec<Vec<u32>>, Vec<RequestStats>) {
    let sched = scheduler(model, Batching::Packed, gpu_like(), ablation);
    decode_with(sched, prompts, opts, concurrency, |_| {})
}

/// Costs nearly flat in B, as on a GPU, so the adaptive policy uses the large sizes
/// (and the tests do not depend on this machine's saved profile).
fn gpu_like() -> CostModel {
    CostModel {
        fixed_ms: 1.0,
        per_row_ms: 0.1,
        per_token_ms: 0.005,
        per_token_ctx_ms: 0.0,
        per_row_ctx_ms: 0.0,
        per_draft_token_ms: 0.0,
        per_round_ms: 0.0,
        source: "test: GPU-like".into(),
        sweep: None,
    }
}

/// Costs that grow with every token, as on the development CPU (its fitted profile),
/// so the adaptive policy takes small blocks and AR steps.
fn cpu_like() -> CostModel {
    CostModel {
        fixed_ms: 1.07,
        per_row_ms: 0.344,
        per_token_ms: 0.146,
        per_token_ctx_ms: 2.4e-4,
        per_row_ctx_ms: 0.0,
        per_draft_token_ms: 0.05,
        per_round_ms: 0.0,
        source: "test: CPU-like".into(),
        sweep: None,
    }
}

/// A scheduler with a batching choice, an ablation and fixed costs.
fn scheduler(model: &Model, batching: Batching, cost: CostModel, ablation: Ablation) -> Scheduler {
    Scheduler::new(model.clone(), None)
        .with_batching(batching)
        .with_ablation(ablation)
        .with_pricing(specscope::engine::Pricing::fixed(cost))
}

/// `decode` on a given scheduler; `after_step` sees it after every round.
pub(crate) fn decode_with(
    mut sched: Scheduler,
    prompts: &[Vec<u32>],
    opts: &DecodeOptions,
    concurrency: usize,
    mut after_step: impl FnMut(&Scheduler),
) -> (Vec<Vec<u32>>, Vec<RequestStats>) {
    let mut out = vec![Vec::new(); prompts.len()];
    let mut stats = Vec::new();
    let mut ids = Vec::new();
    let mut next = 0;
    while next < prompts.len() || sched.active() > 0 {
        while sched.active() < concurrency && next < prompts.len() {
            let s = Submit {
                prompt: prompts[next].clone(),
                options: opts.clone(),
                family: None,
            };
            ids.push(sched.submit(s, &mut NullSink).unwrap());
            next += 1;
        }
        sched.step(&mut NullSink).unwrap();
        after_step(&sched);
        for f in sched.take_finished() {
            let k = ids.iter().position(|&id| id == f.id).unwrap();
            stats.push(f.stats.clone());
            out[k] = f.tokens;
        }
    }
    (out, stats)
}

/// `adaptive`: the widest action space, {1, 4, 8, 16, 32} (AR steps and small drafts
/// mixed with large ones), else a fixed `block`. Decoded with [`ROWS`], every branch
/// row the table asks for rides.
fn opts(mode: Mode, block: usize, overlap: bool, adaptive: bool) -> DecodeOptions {
    DecodeOptions {
        mode,
        blocks: if adaptive {
            Blocks::Adaptive(THROUGHPUT_BLOCKS.to_vec())
        } else {
            Blocks::Fixed(block)
        },
        overlap,
        max_new_tokens: MAX_NEW,
        ..DecodeOptions::default()
    }
}

#[test]
fn every_mode_is_lossless() {
    let (model, prompts) = fixture_prompts(17);
    assert!(prompts.len() >= 50);
    let want = reference(&model, &prompts);
    let mut configs = vec![(
        "ar".to_string(),
        opts(Mode::Ar, 1, false, false),
        ROWS,
        vec![1, 4, 16],
    )];
    for b in [1, 4, 8, 16, 32] {
        configs.push((
            format!("linear B={b}"),
            opts(Mode::Linear, b, false, false),
            ROWS,
            vec![1, 4, 16],
        ));
    }
    for (overlap, adaptive) in [(true, false), (false, true), (true, true)] {
        let name = format!("recguide overlap={overlap} adaptive={adaptive}");
        configs.push((
            name,
            opts(Mode::Recguide, 16, overlap, adaptive),
            ROWS,
            vec![1, 4, 16],
        ));
    }
    for &preset in <Preset as clap::ValueEnum>::value_variants() {
        let o = DecodeOptions {
            max_new_tokens: MAX_NEW,
            ..preset.options()
        };
        configs.push((
            format!("preset {preset:?}"),
            o,
            Ablation::SHIPPED,
            vec![1, 4, 16],
        ));
    }
    for table in [
        RowTable::Multi,
        RowTable::TwoPlusNew,
        RowTable::NoP3,
        RowTable::P1ConditionalNew,
    ] {
        configs.push((
            format!("recguide {table:?}"),
            opts(Mode::Recguide, 8, true, false),
            Ablation {
                row_table: table,
                ..ROWS
            },
            vec![1, 16],
        ));
    }
    let (mut accepted_drafts, mut hits) = (0, 0);
    for (name, o, ablation, concurrencies) in &configs {
        for &c in concurrencies {
            let (got, stats) = decode(&model, &prompts, o, *ablation, c);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} C={c}: prompt {k} differs from AR");
            }
            accepted_drafts += stats
                .iter()
                .map(|s| s.tally.decode_tokens.saturating_sub(s.tally.rounds))
                .sum::<usize>();
            hits += stats
                .iter()
                .flat_map(|s| s.tally.branches.values())
                .map(|b| b.hits)
                .sum::<usize>();
        }
    }
    // The test means something only if drafts were accepted and branches were reused.
    assert!(accepted_drafts > 1000, "accepted drafts: {accepted_drafts}");
    assert!(hits > 20, "branch hits: {hits}");
}

/// Under CPU-like costs the adaptive policy mixes small blocks and AR steps (B = 1) with
/// drafting requests, in packed rounds (chosen together; drafts riding or in lockstep)
/// and in buckets (per request): still AR's tokens.
#[test]
fn adaptive_small_blocks_and_ar_steps_are_lossless() {
    let (model, prompts) = fixture_prompts(17);
    let prompts = &prompts[..24];
    let want = reference(&model, prompts);
    let o = opts(Mode::Recguide, 16, true, true);
    let mut sizes = std::collections::BTreeSet::new();
    for c in [1, 4, 16] {
        for batching in [Batching::Packed, Batching::Lockstep, Batching::ByBlock] {
            let (got, stats) = decode_with(
                scheduler(&model, batching, cpu_like(), Ablation::SHIPPED),
                prompts,
                &o,
                c,
                |_| {},
            );
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "C={c} {batching:?}: prompt {k} differs from AR");
            }
            sizes.extend(stats.iter().flat_map(|s| s.tally.blocks.keys().cloned()));
        }
    }
    for b in [1, 4] {
        assert!(sizes.contains(&b), "B = {b} never chosen: {sizes:?}");
    }
}

/// Survival tables under which a request's block size follows its last round: after a
/// full block every draft survives long (B = 32 pays), after a rejection survival drops
/// at once (B = 8 is cheapest). The test below needs requests that plan different
/// sizes in one round, whatever the shipped tables (measured on the bundled model, not
/// this fixture) happen to say.
fn follow_the_last_round() -> SurvivalTables {
    let mut t = SurvivalTables::marginal_reference();
    let bins = t.edges.len() + 1;
    for last in [1usize, 4, 8, 16, 32] {
        for (full, q) in [(true, 0.97f64), (false, 0.3)] {
            let by_b = t.strata.entry(stratum(last, full)).or_default();
            for b in [8usize, 16, 32] {
                let curve: Vec<f64> = (0..b).map(|k| q.powi(k as i32)).collect();
                by_b.insert(b, vec![curve; bins]);
            }
        }
    }
    t
}

/// Requests that planned different block sizes share one draft and one verify forward
/// per round (packed rows), and the reference's per-block-size buckets give the same
/// tokens with more forwards.
#[test]
fn packed_rounds_share_forwards_and_match_buckets() {
    let (model, prompts) = fixture_prompts(17);
    let prompts = &prompts[..12];
    let want = reference(&model, prompts);
    let o = opts(Mode::Recguide, 16, true, true);
    let mut last = (0, 0);
    let mut worst = 0;
    let tables = follow_the_last_round();
    let sched = scheduler(&model, Batching::Packed, gpu_like(), ROWS).with_tables(tables.clone());
    let (packed, _) = decode_with(sched, prompts, &o, 4, |s| {
        let c = s.counts();
        let now = (c.draft, c.verify + c.fused);
        worst = worst.max((now.0 - last.0).max(now.1 - last.1));
        last = now;
    });
    assert_eq!(packed, want);
    assert_eq!(worst, 1, "a round ran more than one forward per phase");
    let mut by_block_forwards = 0;
    let sched = scheduler(&model, Batching::ByBlock, gpu_like(), ROWS).with_tables(tables);
    let (buckets, stats) = decode_with(sched, prompts, &o, 4, |s| {
        let c = s.counts();
        by_block_forwards = c.draft + c.verify + c.fused;
    });
    assert_eq!(buckets, want);
    let sizes: std::collections::BTreeSet<&usize> =
        stats.iter().flat_map(|s| s.tally.blocks.keys()).collect();
    assert!(
        sizes.len() > 1,
        "the adaptive policy chose one size only: {sizes:?}"
    );
    assert!(
        by_block_forwards > last.0 + last.1,
        "buckets {by_block_forwards} forwards, packed {}",
        last.0 + last.1
    );
}

/// The same invariant on the bundled model, whose acceptance is realistic.
#[test]
fn bundled_model_is_lossless() {
    use specscope::model::{self as m, ModelSource};
    use specscope::train::corpus::{self, Family};
    let files = ModelSource::Bundled.resolve().expect("bundled model");
    let (model, _) = m::load(&files, &common::device(), m::LoadOptions::default()).unwrap();
    let tok = m::load_tokenizer(&files, model.config()).unwrap();
    let none = std::collections::HashSet::new();
    let prompts: Vec<Vec<u32>> = Family::ALL
        .iter()
        .flat_map(|&f| corpus::heldout(4242, f, 4, &none))
        .map(|p| tok.encode_chat(&p.messages(), false).unwrap())
        .collect();
    let want = reference(&model, &prompts);
    let adaptive = opts(Mode::Recguide, 16, true, true);
    let paper = DecodeOptions {
        max_new_tokens: MAX_NEW,
        ..DecodeOptions::default()
    };
    for (name, o, ablation) in [
        ("paper preset", paper, Ablation::SHIPPED),
        ("linear B=8", opts(Mode::Linear, 8, false, false), ROWS),
        ("linear B=32", opts(Mode::Linear, 32, false, false), ROWS),
        (
            "recguide overlap B=16",
            opts(Mode::Recguide, 16, true, false),
            ROWS,
        ),
        ("recguide", adaptive, Ablation::SHIPPED),
    ] {
        for c in [1, 4] {
            let (got, _) = decode(&model, &prompts, &o, ablation, c);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} C={c}: prompt {k} differs from AR");
            }
        }
    }
}

/// A model whose head is larger than the caches streams forwards of up to
/// `matvec::max_rows()` rows through `matvec` and takes gemm's layouts for more rows:
/// AR's tokens (one row a forward) and the verifier's (a block's rows, past
/// `max_rows()` with four requests at a time, or at B = 16 without AVX-512) still agree: linear, RecGuide
/// with overlap and adaptive, alone and four at a time.
#[test]
fn streamed_projections_are_lossless() {
    use specscope::model::{matvec, synthetic};
    let spec = synthetic::Spec::small_4m();
    let model = synthetic::build_model(&spec, &candle_core::Device::Cpu).unwrap();
    let cfg = model.config();
    assert!(
        matvec::streams(1, cfg.vocab_size * cfg.hidden_size)
            && !matvec::streams(matvec::max_rows() + 1, cfg.vocab_size * cfg.hidden_size),
        "the head streams one row and not max_rows() + 1: the test would compare nothing"
    );
    let mut rng = synthetic::Rng::new(5);
    let prompts: Vec<Vec<u32>> = (0..6)
        .map(|k| {
            (0..8 + k)
                .map(|_| (rng.next_u64() % 200) as u32 + 10)
                .collect()
        })
        .collect();
    let want = reference(&model, &prompts);
    for (name, o) in [
        ("linear B=16", opts(Mode::Linear, 16, false, false)),
        ("recguide B=8 overlap", opts(Mode::Recguide, 8, true, false)),
        ("adaptive", opts(Mode::Recguide, 8, true, true)),
    ] {
        for c in [1, 4] {
            let (got, _) = decode(&model, &prompts, &o, ROWS, c);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} C={c}: prompt {k} differs from AR");
            }
        }
    }
}
