//! Engine behaviour beyond losslessness: counting, TPF, bucketing, the engine thread
//! (cancel, resubmit) and bad input.

mod common;

use std::time::Duration;

use common::fixture_prompts;
use specscope::engine::events::{Rule, Tally};
use specscope::engine::{
    Blocks, Clock, DecodeEvent, DecodeOptions, EngineCommand, EngineHandle, EventSink, Mode,
    NullSink, Preset, Scheduler, StopReason, Submit, VecSink,
};
use specscope::trace::{Summary, TraceEvent};

fn opts(mode: Mode, block: usize) -> DecodeOptions {
    DecodeOptions {
        mode,
        blocks: Blocks::Fixed(block),
        cost_aware: false,
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
    let mut sched = Scheduler::new(model.clone(), None);
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
    pred: impl Fn(&DecodeEvent) -> bool,
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

/// Cancel mid-request, then submit again: the same output as a fresh run.
#[test]
fn cancel_then_resubmit_matches_a_fresh_run() {
    let (model, prompts) = fixture_prompts(1);
    let o = DecodeOptions {
        max_new_tokens: 64,
        cost_aware: false,
        ..DecodeOptions::default()
    };
    let mut fresh = Scheduler::new(model.clone(), None);
    let want = run_all(&mut fresh, &prompts[..1], &o).remove(0).tokens;

    let (engine, mut rx) = EngineHandle::spawn(Scheduler::new(model, None));
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

/// The throughput preset runs its whole policy whether or not the cost model learns:
/// packed rounds try AR steps (the measured regime) and sizes the joint rule did not
/// pick; learning only changes the prices. Either way the tokens are AR's.
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
        let mut sched = Scheduler::new(model.clone(), None)
            .with_cost_learning(learn)
            .with_clock(Clock::Priced);
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
        assert!(
            seen.contains_key(&Rule::ArRegime) || seen.contains_key(&Rule::ArTrial),
            "AR steps never tried: {seen:?}"
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
        let mut sched = Scheduler::new(model.clone(), None).with_clock(Clock::Priced);
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
