//! Engine behaviour beyond losslessness: counting, TPF, bucketing, the engine thread
//! (cancel, resubmit) and bad input.

use std::time::Duration;

use crate::common::fixture_prompts;
use specscope::engine::events::{Rule, Tally};
use specscope::engine::{
    Ablation, Blocks, Clock, DecodeEvent, DecodeOptions, EngineCommand, EngineHandle, EventSink,
    Mode, NullSink, Preset, Pricing, Scheduler, StopReason, Submit, VecSink,
};
use specscope::trace::{Summary, TraceEvent};

fn opts(mode: Mode, block: usize) -> DecodeOptions {
    DecodeOptions {
        mode,
        blocks: Blocks::Fixed(block),
        max_new_tokens: 48,
        ..DecodeOptions::default()
    }
}

fn run_all(
    sched: &mut Scheduler,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
) -> Vec<specscope::engine::Finished> {
    run_all_into(sched, prompts, o, &mut NullSink)
}

/// `run_all`, its events into `sink`.
fn run_all_into(
    sched: &mut Scheduler,
    prompts: &[Vec<u32>],
    o: &DecodeOptions,
    sink: &mut dyn EventSink,
) -> Vec<specscope::engine::Finished> {
    for p in prompts {
        let s = Submit {
            prompt: p.clone(),
            options: o.clone(),
            family: None,
        };
        sched.submit(s, sink).unwrap();
    }
    sched.run_to_completion(sink).unwrap();
    let mut f = sched.take_finished();
    f.sort_by_key(|f| f.id);
    f
}

/// The built-in CPU profile, refitted from the run's forwards where `learn`, on the
/// priced clock: which rules run does not hang on this machine's load.
fn priced_clock(learn: bool) -> Pricing {
    Pricing {
        learn,
        clock: Clock::Priced,
        ..Pricing::builtin()
    }
}

/// Every block choice of a run: request, block size, rule.
fn block_choices(events: &[DecodeEvent]) -> Vec<(u64, usize, Rule)> {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::BlockChosen {
                req, block, reason, ..
            } => Some((*req, *block, reason.rule)),
            _ => None,
        })
        .collect()
}

/// Every round of a block mode drafts or reuses a branch; a hit saves exactly one draft
/// forward; TPF is decode tokens over decode forwards.
#[test]
fn reuse_saves_draft_forwards_and_tpf_is_as_defined() {
    let (model, prompts) = fixture_prompts(4);
    // Every row the table asks for rides, so branches hit.
    let mut sched = Scheduler::new(model.clone(), None).with_ablation(Ablation::EVERY_ROW);
    let with = run_all(&mut sched, &prompts, &opts(Mode::Recguide, 8));
    let mut sched = Scheduler::new(model.clone(), None);
    let without = run_all(&mut sched, &prompts, &opts(Mode::Linear, 8));
    let mut saved = 0;
    for (w, l) in with.iter().zip(&without) {
        assert_eq!(w.tokens, l.tokens);
        let s = &w.stats.tally;
        assert_eq!(
            s.draft_forwards + s.saved_drafts,
            s.rounds,
            "each round drafts or reuses"
        );
        let hits: usize = s.branches.values().map(|b| b.hits).sum();
        assert!(s.saved_drafts <= hits, "a saved draft needs a hit");
        assert_eq!(s.verify_forwards + s.fused_forwards, s.rounds);
        assert_eq!(
            s.decode_tokens,
            s.new_tokens - 1,
            "the prefill token is not a decode token"
        );
        let advanced: usize = s.accept_hist.iter().enumerate().map(|(a, n)| a * n).sum();
        assert_eq!(advanced, s.decode_tokens, "rounds advance what they commit");
        let tpf = s.decode_tokens as f64
            / (s.draft_forwards + s.verify_forwards + s.fused_forwards) as f64;
        assert!((s.tpf() - tpf).abs() < 1e-12);
        // LinearSS: exactly two forwards per round.
        assert_eq!(l.stats.tally.decode_forwards(), 2 * l.stats.tally.rounds);
        saved += s.saved_drafts;
    }
    assert!(saved > 0, "some branch was reused");
    let fwd = |f: &[specscope::engine::Finished]| {
        f.iter()
            .map(|x| x.stats.tally.decode_forwards())
            .sum::<usize>()
    };
    assert!(fwd(&with) < fwd(&without), "reuse saves forwards overall");

    // AR: TPF is exactly 1.
    let mut sched = Scheduler::new(model.clone(), None);
    for f in run_all(&mut sched, &prompts[..3], &opts(Mode::Ar, 1)) {
        assert_eq!(f.stats.tally.tpf(), 1.0);
        assert_eq!(f.stats.tally.verify_forwards, f.stats.tally.decode_tokens);
    }
}

/// Concurrent requests share physical forwards (one per bucket and phase).
#[test]
fn buckets_batch_requests_into_shared_forwards() {
    let (model, prompts) = fixture_prompts(2);
    let mut sched = Scheduler::new(model, None);
    let finished = run_all(&mut sched, &prompts, &opts(Mode::Linear, 16));
    let per_request: usize = finished
        .iter()
        .map(|f| f.stats.tally.decode_forwards())
        .sum();
    let c = sched.counts();
    let physical = c.draft + c.verify + c.fused;
    assert!(
        physical * 2 < per_request,
        "physical {physical} vs per-request {per_request}"
    );
    assert_eq!(c.prefill, 1, "all six prompts prefilled in one forward");
}

fn wait_for(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<specscope::engine::Timed>,
    mut pred: impl FnMut(&DecodeEvent) -> bool,
) -> DecodeEvent {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match rx.try_recv() {
            Ok(t) if pred(&t.event) => return t.event,
            Ok(_) => {}
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "timed out waiting for an event"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("engine channel closed: {e}"),
        }
    }
}

/// Paused, the engine runs a round per step and none otherwise: each step's verdict is
/// the next round's, and when the engine has shut down, every verdict it sent was a
/// step's. No clock: the worker answers each command in order, between rounds.
#[test]
fn a_paused_engine_runs_one_round_per_step() {
    let (model, prompts) = fixture_prompts(1);
    let (engine, mut rx) = EngineHandle::spawn(Scheduler::new(model, None));
    let paused = |e: &DecodeEvent| matches!(e, DecodeEvent::EngineState { paused: true });
    // A round's verdict (the first step's prefill commits a token without one), or the
    // answer's end, which would stop the steps early.
    let verdict = |e: &DecodeEvent| {
        matches!(
            e,
            DecodeEvent::Verified { .. } | DecodeEvent::RequestFinished { .. }
        )
    };
    engine.send(EngineCommand::Pause);
    wait_for(&mut rx, paused);
    engine.submit(Submit {
        prompt: prompts[0].clone(),
        options: DecodeOptions {
            max_new_tokens: 512,
            ..DecodeOptions::default()
        },
        family: None,
    });
    let mut verdicts = Vec::new();
    for step in 1..=3u64 {
        engine.send(EngineCommand::Step);
        match wait_for(&mut rx, verdict) {
            DecodeEvent::Verified { round, .. } => verdicts.push(round),
            e => panic!("step {step}: the answer ended: {e:?}"),
        }
    }
    engine.shutdown();
    // Whatever else the engine sent before it stopped.
    while let Ok(t) = rx.try_recv() {
        if let DecodeEvent::Verified { round, .. } = t.event {
            verdicts.push(round);
        }
    }
    assert_eq!(verdicts, [1, 2, 3], "rounds verified while paused");
}

/// Cancel mid-request, then submit again: the same output as a fresh run.
#[test]
fn cancel_then_resubmit_matches_a_fresh_run() {
    let (model, prompts) = fixture_prompts(1);
    let o = DecodeOptions {
        max_new_tokens: 64,
        ..DecodeOptions::default()
    };
    let mut fresh = Scheduler::new(model.clone(), None).with_ablation(Ablation::EVERY_ROW);
    let want = run_all(&mut fresh, &prompts[..1], &o).remove(0).tokens;

    let (engine, mut rx) =
        EngineHandle::spawn(Scheduler::new(model, None).with_ablation(Ablation::EVERY_ROW));
    engine.send(EngineCommand::Pause);
    let id = engine.submit(Submit {
        prompt: prompts[0].clone(),
        options: o.clone(),
        family: None,
    });
    for _ in 0..3 {
        engine.send(EngineCommand::Step);
        wait_for(&mut rx, |e| matches!(e, DecodeEvent::Committed { .. }));
    }
    engine.send(EngineCommand::Cancel(id));
    let e = wait_for(&mut rx, |e| {
        matches!(e, DecodeEvent::RequestFinished { .. })
    });
    assert!(matches!(
        e,
        DecodeEvent::RequestFinished {
            stop: StopReason::Cancelled,
            ..
        }
    ));
    engine.send(EngineCommand::Resume);
    let id2 = engine.submit(Submit {
        prompt: prompts[0].clone(),
        options: o,
        family: None,
    });
    let mut tokens = Vec::new();
    loop {
        match wait_for(&mut rx, |e| {
            matches!(
                e,
                DecodeEvent::Committed { .. } | DecodeEvent::RequestFinished { .. }
            )
        }) {
            DecodeEvent::Committed { req, tokens: t, .. } if req == id2 => tokens.extend(t),
            DecodeEvent::RequestFinished { req, .. } if req == id2 => break,
            _ => {}
        }
    }
    assert_eq!(tokens, want);
    engine.shutdown();
}

#[test]
fn events_follow_each_round_in_order() {
    let (model, prompts) = fixture_prompts(1);
    let mut sched = Scheduler::new(model, None);
    let mut sink = VecSink {
        detail: true,
        ..VecSink::default()
    };
    let o = DecodeOptions {
        max_new_tokens: 24,
        blocks: Blocks::Fixed(8),
        ..DecodeOptions::default()
    };
    sched
        .submit(
            Submit {
                prompt: prompts[0].clone(),
                options: o,
                family: Some("math".into()),
            },
            &mut sink,
        )
        .unwrap();
    sched.run_to_completion(&mut sink).unwrap();
    let kinds: Vec<String> = sink
        .events
        .iter()
        .filter(|e| !matches!(e, DecodeEvent::Forward { .. }))
        .map(|e| {
            serde_json::to_value(e).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(&kinds[..3], &["request_started", "prefilled", "committed"]);
    assert_eq!(kinds.last().unwrap(), "request_finished");
    let i = kinds.iter().position(|k| k == "drafted").unwrap();
    assert_eq!(kinds[i - 1], "block_chosen");
    let v = kinds[i..].iter().position(|k| k == "verified").unwrap() + i;
    assert!(kinds[v..].iter().position(|k| k == "committed").is_some());
    // Detail on: drafts carry per-position top-k; every event round-trips through JSON.
    for e in &sink.events {
        if let DecodeEvent::Drafted { detail, block, .. } = e {
            assert_eq!(detail.len(), block.len() - 1);
        }
        let back: DecodeEvent = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);
    }
}

#[test]
fn bad_options_and_prompts_are_named() {
    let (model, prompts) = fixture_prompts(1);
    let mut sched = Scheduler::new(model.clone(), None);
    let mut o = opts(Mode::Linear, 0);
    let err = sched
        .submit(
            Submit {
                prompt: prompts[0].clone(),
                options: o.clone(),
                family: None,
            },
            &mut NullSink,
        )
        .unwrap_err();
    assert!(err.to_string().contains("block size"), "{err}");
    o.blocks = Blocks::Fixed(8);
    let long = vec![20u32; model.config().max_position_embeddings + 1];
    let err = sched
        .submit(
            Submit {
                prompt: long,
                options: o.clone(),
                family: None,
            },
            &mut NullSink,
        )
        .unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
    let err = sched
        .submit(
            Submit {
                prompt: vec![],
                options: o,
                family: None,
            },
            &mut NullSink,
        )
        .unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn survival_rounds_cover_every_block_size() {
    let (model, prompts) = fixture_prompts(1);
    let blocks = [4, 8, 16, 32];
    let samples =
        specscope::engine::survival::collect(&model, &prompts[0], 48, 1, &blocks).unwrap();
    assert!(samples.len() > 2);
    for s in &samples {
        assert_eq!(s.advance.keys().copied().collect::<Vec<_>>(), blocks);
        for (&b, &a) in &s.advance {
            assert!((1..=b).contains(&a));
        }
    }
    assert!(
        samples[0].signal.is_none() && samples[1].signal.is_some(),
        "history starts empty"
    );
    let t = specscope::engine::policy::SurvivalTables::estimate(&samples, 2, 1, "test");
    assert!(t.value(32, None, None) >= 1.0);
    assert_eq!(t.blocks(), blocks, "every collected B is tabled");
    let err = specscope::engine::survival::collect(&model, &prompts[0], 48, 1, &[1]);
    assert!(err.unwrap_err().to_string().contains("at least 2"));
    // With AR steps among the canonical rounds, the rounds after them form `b1_full`.
    let mut samples = Vec::new();
    for (k, p) in prompts.iter().enumerate().take(4) {
        samples.extend(
            specscope::engine::survival::collect(&model, p, 48, k as u64, &[1, 8]).unwrap(),
        );
    }
    assert!(samples.iter().all(|s| s.advance.keys().eq([8].iter())));
    assert!(
        samples
            .iter()
            .any(|s| s.stratum.as_deref() == Some("b1_full")),
        "no round followed an AR step"
    );
}

/// The throughput preset runs its whole policy where the cost model learns: packed
/// rounds try AR steps (the measured regime) and sizes the joint rule did not pick;
/// under fixed prices neither trials nor exploration run (they would measure
/// nothing). Either way the tokens are AR's.
#[test]
fn the_throughput_policy_runs_every_rule_and_stays_lossless() {
    let (model, prompts) = fixture_prompts(8);
    let o = DecodeOptions {
        max_new_tokens: 96,
        ..Preset::Throughput.options()
    };
    let linear = run_all(
        &mut Scheduler::new(model.clone(), None),
        &prompts,
        &DecodeOptions {
            max_new_tokens: o.max_new_tokens,
            ..opts(Mode::Linear, 8)
        },
    );
    for learn in [true, false] {
        // Priced time: which rules run does not hang on this machine's load.
        let mut sched = Scheduler::new(model.clone(), None).with_pricing(priced_clock(learn));
        let mut sink = VecSink::default();
        let done = run_all_into(&mut sched, &prompts, &o, &mut sink);
        for (d, l) in done.iter().zip(&linear) {
            assert_eq!(d.tokens, l.tokens, "learning {learn}");
        }
        let rules: Vec<Rule> = block_choices(&sink.events)
            .into_iter()
            .map(|c| c.2)
            .collect();
        let mut seen = std::collections::BTreeMap::new();
        for r in &rules {
            *seen.entry(*r).or_insert(0) += 1;
        }
        assert!(seen.contains_key(&Rule::Round), "{seen:?}");
        // The measured regime (drafting against AR steps, by trials) only where the
        // costs are this machine's; under fixed prices the joint choice weighs AR steps.
        assert_eq!(
            seen.contains_key(&Rule::ArRegime) || seen.contains_key(&Rule::ArTrial),
            learn,
            "AR regime with learning {learn}: {seen:?}"
        );
        // Exploring measures costs: only where they are learned.
        assert_eq!(
            seen.contains_key(&Rule::Explore),
            learn,
            "explored with learning {learn}: {seen:?}"
        );
        assert_eq!(
            sched.cost().source.contains("forwards"),
            learn,
            "{}",
            sched.cost().source
        );
    }
}

/// On the priced clock the throughput policy's choices are a function of the prompts
/// alone: two runs choose the same block sizes by the same rules.
#[test]
fn the_priced_clock_makes_the_policy_repeatable() {
    let (model, prompts) = fixture_prompts(3);
    let o = DecodeOptions {
        max_new_tokens: 48,
        ..Preset::Throughput.options()
    };
    let choices = || {
        let mut sched = Scheduler::new(model.clone(), None).with_pricing(priced_clock(true));
        let mut sink = VecSink::default();
        run_all_into(&mut sched, &prompts, &o, &mut sink);
        block_choices(&sink.events)
    };
    let first = choices();
    assert!(first.len() > 10, "{first:?}");
    assert_eq!(first, choices());
}

/// The paper preset drafts every round (no AR steps: 1 is not in its sizes). Priced as
/// the default GPU profile it builds branch rows in most rounds of a request alone
/// (C = 1: a hit spares a whole memory-bound forward) and drops most of them with
/// eight in flight; every drafted round says which rows ride and why.
#[test]
fn the_paper_preset_drafts_and_prices_rows_by_the_load() {
    let (model, prompts) = fixture_prompts(2);
    let o = DecodeOptions {
        max_new_tokens: 64,
        ..DecodeOptions::default()
    };
    let pricing = specscope::engine::cost::Pricing::select(Some("b200-nld8b")).unwrap();
    // (rounds, rounds with rows, rounds with a row decision)
    let run = |together: bool| {
        let mut sched = Scheduler::new(model.clone(), None).with_pricing(pricing.clone());
        let mut sink = VecSink::default();
        for p in &prompts {
            sched
                .submit(
                    Submit {
                        prompt: p.clone(),
                        options: o.clone(),
                        family: None,
                    },
                    &mut NullSink,
                )
                .unwrap();
            if !together {
                sched.run_to_completion(&mut sink).unwrap();
            }
        }
        sched.run_to_completion(&mut sink).unwrap();
        let blocks: Vec<usize> = sink
            .events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::BlockChosen { block, .. } => Some(*block),
                _ => None,
            })
            .collect();
        assert!(!blocks.contains(&1), "no AR steps: {blocks:?}");
        let count = |f: &dyn Fn(&DecodeEvent) -> bool| sink.events.iter().filter(|e| f(e)).count();
        (
            blocks.len(),
            count(&|e| matches!(e, DecodeEvent::BranchesBuilt { .. })),
            count(&|e| matches!(e, DecodeEvent::Drafted { rows: Some(_), .. })),
        )
    };
    let (rounds, built, decided) = run(false);
    assert!(
        built > rounds / 2,
        "C = 1: rows in most rounds: {built} of {rounds}"
    );
    assert_eq!(decided, rounds, "every round's rows decided");
    let (rounds, built, decided) = run(true);
    assert!(
        built < rounds / 4,
        "C = 8: rows mostly dropped: {built} of {rounds}"
    );
    assert_eq!(decided, rounds);
}

/// One fold: the statistics rebuilt from a run's events are the engine's own,
/// request by request added up.
#[test]
fn statistics_from_events_equal_the_engines() {
    let (model, prompts) = fixture_prompts(3);
    for o in [
        DecodeOptions {
            max_new_tokens: 64,
            ..DecodeOptions::default()
        },
        DecodeOptions {
            max_new_tokens: 64,
            ..Preset::Throughput.options()
        },
        opts(Mode::Ar, 1),
        DecodeOptions {
            threshold: 0.7,
            ..opts(Mode::Diffusion, 8)
        },
    ] {
        let mut sched = Scheduler::new(model.clone(), None);
        let mut sink = VecSink::default();
        for p in &prompts {
            let s = Submit {
                prompt: p.clone(),
                options: o.clone(),
                family: None,
            };
            sched.submit(s, &mut sink).unwrap();
        }
        sched.run_to_completion(&mut sink).unwrap();
        let mut want = Tally::default();
        for f in sched.take_finished() {
            want += &f.stats.tally;
        }
        // Without the finishing events: the rounds as the events rebuild them.
        let events: Vec<TraceEvent> = sink
            .events
            .iter()
            .filter(|e| !matches!(e, DecodeEvent::RequestFinished { .. }))
            .cloned()
            .map(TraceEvent::from)
            .collect();
        assert_eq!(Summary::of(&events).tally, want, "{}", o.label());
        let all: Vec<TraceEvent> = sink.events.into_iter().map(TraceEvent::from).collect();
        assert_eq!(Summary::of(&all).tally, want);
    }
}

/// What a direct, unbatched block diffusion does on one prompt, written here from the
/// rule (not the engine's code): per block, the positions each step commits with
/// their probabilities, the block, and AR's argmax at each of its positions.
struct DirectBlock {
    steps: Vec<Vec<(usize, f32)>>,
    block: Vec<u32>,
    ar: Vec<u32>,
}

/// `(argmax, its probability)` of each row, the mask column left out.
fn top_of(logits: &candle_core::Tensor, mask: u32) -> Vec<(u32, f32)> {
    let rows: Vec<Vec<f32>> = logits
        .to_dtype(candle_core::DType::F32)
        .unwrap()
        .to_vec2()
        .unwrap();
    rows.iter()
        .map(|r| {
            let keep = |i: &usize| *i != mask as usize;
            let max = (0..r.len())
                .filter(keep)
                .map(|i| r[i])
                .fold(f32::MIN, f32::max);
            let z: f64 = (0..r.len())
                .filter(keep)
                .map(|i| f64::from(r[i] - max).exp())
                .sum();
            let arg = (0..r.len())
                .filter(keep)
                .fold(None::<usize>, |b, i| match b {
                    Some(j) if r[j] >= r[i] => Some(j),
                    _ => Some(i),
                })
                .unwrap();
            (arg as u32, (1.0 / z) as f32)
        })
        .collect()
}

fn direct_diffusion(
    model: &specscope::model::Model,
    prompt: &[u32],
    len: usize,
    tau: f32,
    max_new: usize,
) -> Vec<DirectBlock> {
    use specscope::model::{AttnRule, LogitSel, Row, RowBatch};
    let cfg = model.config();
    let (mask, eos) = (cfg.mask_token_id(), cfg.eos_token_ids());
    let mut cache = model.new_cache();
    let run = |cache: &mut specscope::model::KvCache, row: Row| {
        model
            .forward(&RowBatch::single(row), &mut [cache])
            .unwrap()
            .remove(0)
    };
    let first = run(
        &mut cache,
        Row::new(0, prompt.to_vec(), AttnRule::Causal)
            .commit()
            .logits(LogitSel::Last),
    );
    let mut ar_next = top_of(&first, mask)[0].0;
    let (mut out, mut blocks) = (0, Vec::new());
    while out < max_new {
        let n = len.min(max_new - out);
        let mut canvas: Vec<Option<u32>> = vec![None; n];
        let mut steps = Vec::new();
        while canvas.iter().any(Option::is_none) {
            let tokens: Vec<u32> = canvas.iter().map(|c| c.unwrap_or(mask)).collect();
            let logits = run(
                &mut cache,
                Row::new(0, tokens, AttnRule::Bidirectional)
                    .lora_from(0)
                    .logits(LogitSel::All),
            );
            let top = top_of(&logits, mask);
            let open: Vec<usize> = (0..n).filter(|&k| canvas[k].is_none()).collect();
            let mut now: Vec<usize> = open.iter().copied().filter(|&k| top[k].1 >= tau).collect();
            if now.is_empty() {
                let best = open
                    .iter()
                    .copied()
                    .fold(None::<usize>, |b, k| match b {
                        Some(j) if top[j].1 >= top[k].1 => Some(j),
                        _ => Some(k),
                    })
                    .unwrap();
                now.push(best);
            }
            for &k in &now {
                canvas[k] = Some(top[k].0);
            }
            steps.push(now.iter().map(|&k| (k, top[k].1)).collect());
        }
        let block: Vec<u32> = canvas.into_iter().map(Option::unwrap).collect();
        let logits = run(
            &mut cache,
            Row::new(0, block.clone(), AttnRule::Causal)
                .commit()
                .logits(LogitSel::All),
        );
        let top = top_of(&logits, mask);
        let mut ar = vec![ar_next];
        ar.extend(top[..n - 1].iter().map(|t| t.0));
        ar_next = top[n - 1].0;
        let end = block.iter().position(|t| eos.contains(t));
        out += end.map_or(n, |e| e + 1);
        blocks.push(DirectBlock { steps, block, ar });
        if end.is_some() {
            break;
        }
    }
    blocks
}

/// The engine's block diffusion equals the direct implementation above: the positions
/// each step commits (and their probabilities), every block, AR's argmax at each
/// position (which reads the cache the blocks wrote), and the committed answer.
#[test]
fn block_diffusion_matches_a_direct_implementation() {
    let (model, prompts) = fixture_prompts(1);
    for (len, tau) in [(8, 0.9), (16, 0.5), (4, 1.0)] {
        for p in &prompts {
            let o = DecodeOptions {
                threshold: tau,
                max_new_tokens: 40,
                ..opts(Mode::Diffusion, len)
            };
            let mut sched = Scheduler::new(model.clone(), None);
            let mut sink = VecSink::default();
            let f = run_all_into(&mut sched, std::slice::from_ref(p), &o, &mut sink);
            let want = direct_diffusion(&model, p, len, tau, 40);
            let mut steps: Vec<Vec<Vec<(usize, f32)>>> = Vec::new();
            let mut got = Vec::new();
            for e in &sink.events {
                match e {
                    DecodeEvent::Denoised {
                        round,
                        positions,
                        confidence,
                        ..
                    } => {
                        steps.resize(*round, Vec::new());
                        steps[round - 1].push(
                            positions
                                .iter()
                                .copied()
                                .zip(confidence.iter().copied())
                                .collect(),
                        );
                    }
                    DecodeEvent::BlockWritten { block, ar, .. } => {
                        got.push((block.clone(), ar.clone()))
                    }
                    _ => {}
                }
            }
            assert_eq!(got.len(), want.len(), "blocks (L={len}, τ={tau})");
            for (k, (w, (block, ar))) in want.iter().zip(&got).enumerate() {
                assert_eq!(&w.block, block, "block {k} (L={len}, τ={tau})");
                assert_eq!(&w.ar, ar, "AR at block {k}");
                assert_eq!(w.steps.len(), steps[k].len(), "steps of block {k}");
                for (ws, gs) in w.steps.iter().zip(&steps[k]) {
                    assert_eq!(
                        ws.iter().map(|x| x.0).collect::<Vec<_>>(),
                        gs.iter().map(|x| x.0).collect::<Vec<_>>(),
                        "positions of a step of block {k}"
                    );
                    for (a, b) in ws.iter().zip(gs) {
                        assert!((a.1 - b.1).abs() < 1e-4, "probability {} vs {}", a.1, b.1);
                    }
                }
            }
            let answer: Vec<u32> = want.iter().flat_map(|b| b.block.clone()).collect();
            let n = f[0].tokens.len();
            assert_eq!(f[0].tokens[..], answer[..n], "the committed answer");
            // The statistics: the reference's count, and the agreement marks.
            let t = &f[0].stats.tally;
            let denoise: usize = want.iter().map(|b| b.steps.len()).sum();
            assert_eq!(
                (t.denoise_forwards, t.refresh_forwards),
                (denoise, want.len())
            );
            let agree = f[0]
                .tokens
                .iter()
                .zip(want.iter().flat_map(|b| b.ar.clone()))
                .filter(|(a, b)| *a == b)
                .count();
            assert_eq!((t.ar_agree, t.ar_judged), (agree, n));
        }
    }
}

/// Several diffusing requests in flight share each step's forward and get the tokens
/// each gets alone, beside speculating requests in the same scheduler.
#[test]
fn block_diffusion_gives_each_request_its_tokens_at_any_concurrency() {
    let (model, prompts) = fixture_prompts(2);
    let o = DecodeOptions {
        threshold: 0.8,
        ..opts(Mode::Diffusion, 8)
    };
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            let mut s = Scheduler::new(model.clone(), None);
            run_all(&mut s, std::slice::from_ref(p), &o)[0]
                .tokens
                .clone()
        })
        .collect();
    let mut s = Scheduler::new(model.clone(), None);
    for p in &prompts {
        s.submit(
            Submit {
                prompt: p.clone(),
                options: o.clone(),
                family: None,
            },
            &mut NullSink,
        )
        .unwrap();
        // A LinearSS request in the same steps.
        s.submit(
            Submit {
                prompt: p.clone(),
                options: opts(Mode::Linear, 16),
                family: None,
            },
            &mut NullSink,
        )
        .unwrap();
    }
    s.run_to_completion(&mut NullSink).unwrap();
    let mut f = s.take_finished();
    f.sort_by_key(|f| f.id);
    let together: Vec<Vec<u32>> = f.iter().step_by(2).map(|f| f.tokens.clone()).collect();
    assert_eq!(together, alone);
    let c = s.counts();
    assert!(
        c.denoise > 0
            && c.denoise
                < f.iter()
                    .step_by(2)
                    .map(|f| f.stats.tally.denoise_forwards)
                    .sum::<usize>()
    );
}
