//! The scheduler without a checkpoint: a scripted backbone whose AR choice and draft at
//! every absolute position are given, so each case (whole blocks accepted, a reject,
//! a branch that hits, an answer ending inside a block, the token budget, the context
//! window, block diffusion) is set up exactly and its outcome known in advance.

use std::sync::Arc;

use anyhow::Result;
use candle_core::{Device, Tensor};

use super::{ForwardCounts, Scheduler, Submit};
use crate::engine::ablation::Ablation;
use crate::engine::backbone::Backbone;
use crate::engine::events::assemble::Assembler;
use crate::engine::events::{BranchOutcome, DecodeEvent, Mode, Phase, StopReason, VecSink};
use crate::engine::options::{Batching, Blocks, DecodeOptions};
use crate::engine::overlap::BranchKind;
use crate::model::synthetic::Spec;
use crate::model::{AttnRule, Config, KvCache, RowBatch};

/// Logit of the scripted top token (the rest are 0): p ≈ 0.997 over 288 tokens.
const TOP: f32 = 10.0;
/// Logit of a scripted runner-up: p1 − p2 ≈ 0.25, a risky margin.
const SECOND: f32 = 9.5;

type Script = Arc<dyn Fn(usize) -> u32 + Send + Sync>;

/// AR's token at each absolute position, and the draft's (with a runner-up where one
/// is scripted). A causal logit at row index i predicts position p0 + i + 1; a draft
/// (bidirectional or branch block) logit at i predicts position p0 + i (no shift). A
/// row causal up to `causal_len` and a block after it (a branch, or a verify row the
/// continuation extends) is each of those in its part.
struct Scripted {
    cfg: Config,
    ar: Script,
    draft: Arc<dyn Fn(usize) -> (u32, Option<u32>) + Send + Sync>,
}

impl Backbone for Scripted {
    fn config(&self) -> &Config {
        &self.cfg
    }

    fn new_cache(&self) -> KvCache {
        KvCache::new(0)
    }

    fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>> {
        let v = self.cfg.vocab_size;
        let mut out = Vec::with_capacity(batch.rows.len());
        for row in &batch.rows {
            let p0 = caches[row.cache].len();
            // What the real model's position tables allow.
            anyhow::ensure!(
                p0 + row.tokens.len() <= self.cfg.max_position_embeddings,
                "a row past the context window: {} + {}",
                p0,
                row.tokens.len()
            );
            let idx = row.logits.indices(row.tokens.len());
            let mut data = vec![0f32; idx.len() * v];
            for (k, &i) in idx.iter().enumerate() {
                let causal = match row.rule {
                    AttnRule::Causal => true,
                    AttnRule::CausalThenBlock { causal_len } => i < causal_len,
                    AttnRule::Bidirectional => false,
                };
                let (top, second) = if causal {
                    ((self.ar)(p0 + i + 1), None)
                } else {
                    (self.draft)(p0 + i)
                };
                data[k * v + top as usize] = TOP;
                if let Some(s) = second {
                    data[k * v + s as usize] = SECOND;
                }
            }
            out.push(Tensor::from_vec(data, (idx.len(), v), &Device::Cpu)?);
        }
        for row in batch.rows.iter().filter(|r| r.commit) {
            caches[row.cache].advance(row.tokens.len());
        }
        Ok(out)
    }
}

const PROMPT: usize = 10;

fn config(context: usize) -> Config {
    let mut cfg: Config = serde_json::from_value(Spec::toy().config_json()).unwrap();
    cfg.max_position_embeddings = context;
    cfg
}

/// AR's answer: ordinary tokens, never the mask or eos.
fn answer(p: usize) -> u32 {
    40 + (p % 50) as u32
}

fn scripted(
    context: usize,
    ar: Script,
    draft: impl Fn(usize) -> (u32, Option<u32>) + Send + Sync + 'static,
) -> Scheduler {
    Scheduler::new(
        Scripted {
            cfg: config(context),
            ar,
            draft: Arc::new(draft),
        },
        None,
    )
}

fn linear(b: usize, max_new: usize) -> DecodeOptions {
    DecodeOptions {
        mode: Mode::Linear,
        blocks: Blocks::Fixed(b),
        max_new_tokens: max_new,
        ..DecodeOptions::default()
    }
}

/// One request to the end: its tokens, stop reason, statistics and events.
fn decode(s: &mut Scheduler, o: DecodeOptions) -> (crate::engine::Finished, Vec<DecodeEvent>) {
    let mut sink = VecSink::default();
    let s_in = Submit {
        prompt: (1..=PROMPT as u32).map(|t| t + 20).collect(),
        options: o,
        family: None,
    };
    s.submit(s_in, &mut sink).unwrap();
    s.run_to_completion(&mut sink).unwrap();
    (s.take_finished().remove(0), sink.events)
}

fn verdicts(events: &[DecodeEvent]) -> Vec<(usize, Option<usize>)> {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::Verified {
                accepted,
                first_reject,
                ..
            } => Some((*accepted, *first_reject)),
            _ => None,
        })
        .collect()
}

fn ar_answer(n: usize) -> Vec<u32> {
    (PROMPT..PROMPT + n).map(answer).collect()
}

#[test]
fn a_right_draft_is_accepted_whole() {
    let mut s = scripted(4096, Arc::new(answer), |p| (answer(p), None));
    let (f, ev) = decode(&mut s, linear(8, 33));
    assert_eq!(f.tokens, ar_answer(33));
    // 1 prefill token, then rounds of 7 accepted + the bonus: 8, 8, 8, then 8 cut to 8.
    assert!(verdicts(&ev).iter().all(|&(a, r)| (a, r) == (7, None)));
    assert_eq!(f.stats.tally.rounds, 4);
    assert_eq!(f.stop, StopReason::MaxTokens);
}

#[test]
fn a_wrong_draft_token_is_rejected_there_and_the_answer_stays_ar() {
    // The draft is wrong at the answer's 4th and 13th positions.
    let wrong = [PROMPT + 3, PROMPT + 12];
    let mut s = scripted(4096, Arc::new(answer), move |p| {
        (
            if wrong.contains(&p) {
                answer(p) + 1
            } else {
                answer(p)
            },
            None,
        )
    });
    let (f, ev) = decode(&mut s, linear(8, 24));
    assert_eq!(f.tokens, ar_answer(24));
    // Round 1's block holds answer positions 0..8: rejected at block position 3.
    assert_eq!(verdicts(&ev)[0], (2, Some(3)));
    // Round 2 starts at answer position 3 (the bonus): 12 is its block position 9 > 7,
    // so it is accepted whole; round 3 starts at 11 and rejects at 12 − 11 = 1.
    assert_eq!(verdicts(&ev)[1], (7, None));
    assert_eq!(verdicts(&ev)[2], (0, Some(1)));
}

#[test]
fn a_correction_branch_hits_and_spares_the_next_draft() {
    // Unsure at the answer's 4th position: the draft's first choice is wrong, its
    // runner-up is AR's token, a risky margin; the P1 row tries the runner-up.
    let at = PROMPT + 3;
    let mut s = scripted(4096, Arc::new(answer), move |p| {
        if p == at {
            (answer(p) + 1, Some(answer(p)))
        } else {
            (answer(p), None)
        }
    })
    .with_ablation(Ablation::EVERY_ROW); // every row the table asks for
    let o = DecodeOptions {
        blocks: Blocks::Fixed(8),
        max_new_tokens: 24,
        ..DecodeOptions::default()
    };
    let (f, ev) = decode(&mut s, o);
    assert_eq!(f.tokens, ar_answer(24));
    // Round 1's P1 row hits; the rounds after it, drafted right, reuse continuation
    // rows too.
    let first = ev.iter().find_map(|e| match e {
        DecodeEvent::BranchResolved {
            round: 1, outcome, ..
        } => Some(*outcome),
        _ => None,
    });
    assert!(
        matches!(
            first,
            Some(BranchOutcome::Hit {
                kind: BranchKind::Correction { rank: 1 },
                ..
            })
        ),
        "{first:?}"
    );
    assert!(f.stats.tally.saved_drafts >= 1);
}

/// Two requests at once (prompts of 10 and 13), RecGuide B = 8 with every row the
/// table asks for, the draft wrong at every 20th position: the requests' continuation
/// rows hit and miss out of step.
fn two_at_once(
    batching: Batching,
) -> (
    Vec<crate::engine::Finished>,
    Vec<DecodeEvent>,
    ForwardCounts,
) {
    let mut s = scripted(4096, Arc::new(answer), |p| {
        (
            if p % 20 == 0 {
                answer(p) + 1
            } else {
                answer(p)
            },
            None,
        )
    })
    .with_batching(batching)
    .with_ablation(Ablation::EVERY_ROW);
    let o = DecodeOptions {
        blocks: Blocks::Fixed(8),
        max_new_tokens: 40,
        ..DecodeOptions::default()
    };
    let mut sink = VecSink::default();
    for len in [PROMPT, PROMPT + 3] {
        let s_in = Submit {
            prompt: (1..=len as u32).map(|t| t + 20).collect(),
            options: o.clone(),
            family: None,
        };
        s.submit(s_in, &mut sink).unwrap();
    }
    s.run_to_completion(&mut sink).unwrap();
    let mut f = s.take_finished();
    f.sort_by_key(|f| f.id);
    (f, sink.events, s.counts().clone())
}

#[test]
fn a_fresh_draft_rides_the_forward_of_a_held_block() {
    let (ride, ev, rc) = two_at_once(Batching::Packed);
    let (lock, _, lc) = two_at_once(Batching::Lockstep);
    for (f, len) in ride.iter().zip([PROMPT, PROMPT + 3]) {
        assert_eq!(f.tokens, (len..len + 40).map(answer).collect::<Vec<_>>());
    }
    let tokens =
        |f: &[crate::engine::Finished]| f.iter().map(|f| f.tokens.clone()).collect::<Vec<_>>();
    assert_eq!(tokens(&ride), tokens(&lock));
    // Drafts alone took fewer forwards, and the whole run fewer.
    let total = |c: &ForwardCounts| c.draft + c.verify + c.fused;
    assert!(
        rc.draft < lc.draft && total(&rc) < total(&lc),
        "{rc:?} {lc:?}"
    );
    // Some fresh draft came from a forward that verified others (not a draft forward).
    let mut last = None;
    let mut rode = 0;
    for e in &ev {
        match e {
            DecodeEvent::Forward { phase, .. } => last = Some(*phase),
            DecodeEvent::Drafted { reused: None, .. } if last != Some(Phase::Draft) => rode += 1,
            _ => {}
        }
    }
    assert!(rode > 0);
    // Every event in its round's order; every round drafted, judged and committed.
    let mut a = Assembler::default();
    let mut rounds = 0;
    for e in &ev {
        if let Some(r) = a.push(e).expect("events in round order") {
            assert!(r.draft.is_some() && r.verdict.is_some() && !r.committed.is_empty());
            rounds += 1;
        }
    }
    assert_eq!(
        rounds,
        ride.iter().map(|f| f.stats.tally.rounds).sum::<usize>()
    );
}

#[test]
fn an_answer_that_ends_inside_a_block_stops_at_its_eos() {
    let eos = config(4096).eos_token_ids()[0];
    let ar: Script = Arc::new(move |p| if p == PROMPT + 5 { eos } else { answer(p) });
    let ar2 = ar.clone();
    let mut s = scripted(4096, ar, move |p| (ar2(p), None));
    let (f, _) = decode(&mut s, linear(8, 64));
    let mut want = ar_answer(5);
    want.push(eos);
    assert_eq!((f.tokens, f.stop), (want, StopReason::Eos));
    // The round counts what the answer kept: 5 tokens after the prefill's.
    assert_eq!(f.stats.tally.accept_hist.iter().sum::<usize>(), 1);
}

#[test]
fn the_token_budget_cuts_a_block() {
    let mut s = scripted(4096, Arc::new(answer), |p| (answer(p), None));
    let (f, _) = decode(&mut s, linear(8, 10));
    assert_eq!((f.tokens, f.stop), (ar_answer(10), StopReason::MaxTokens));
}

#[test]
fn the_context_window_stops_a_request() {
    let context = PROMPT + 12;
    let mut s = scripted(context, Arc::new(answer), |p| (answer(p), None));
    let (f, _) = decode(&mut s, linear(8, 64));
    // No row went past the window (the fake refuses one), and the answer is AR's up
    // to the last position the window predicts: the one after its last slot.
    assert_eq!(f.stop, StopReason::Context);
    assert_eq!(f.tokens, ar_answer(context + 1 - PROMPT));
}

#[test]
fn block_diffusion_fills_a_sure_canvas_in_one_step() {
    let mut s = scripted(4096, Arc::new(answer), |p| (answer(p), None));
    let o = DecodeOptions {
        mode: Mode::Diffusion,
        blocks: Blocks::Fixed(8),
        max_new_tokens: 16,
        ..DecodeOptions::default()
    };
    let (f, _) = decode(&mut s, o);
    // No prefill token: the first canvas starts right after the prompt.
    assert_eq!(f.tokens, ar_answer(16));
    let t = &f.stats.tally;
    assert_eq!((t.denoise_forwards, t.refresh_forwards), (2, 2));
    assert_eq!((t.ar_agree, t.ar_judged), (16, 16));
}

#[test]
fn block_diffusion_shortens_its_last_canvas_to_the_window() {
    let context = PROMPT + 12;
    let mut s = scripted(context, Arc::new(answer), |p| (answer(p), None));
    let o = DecodeOptions {
        mode: Mode::Diffusion,
        blocks: Blocks::Fixed(8),
        max_new_tokens: 64,
        ..DecodeOptions::default()
    };
    let (f, ev) = decode(&mut s, o);
    // Canvases of 8 and 4 fill the window; nothing is committed past it.
    let canvases: Vec<usize> = ev
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::BlockWritten { block, .. } => Some(block.len()),
            _ => None,
        })
        .collect();
    assert_eq!(canvases, [8, 4]);
    assert_eq!((f.tokens, f.stop), (ar_answer(12), StopReason::Context));
}

/// The survival tables and the pricing are each set once, in either order, before the
/// first round: the same beliefs, the same decisions.
#[test]
fn the_builders_order_does_not_matter() {
    use crate::engine::cost::{CostModel, Pricing};
    use crate::engine::policy::SurvivalTables;
    let tables = SurvivalTables::marginal_reference();
    let pricing = Pricing::fixed(CostModel::builtin());
    let run = |tables_first: bool| {
        // A draft wrong at every 7th position: rounds of several lengths.
        let s = scripted(4096, Arc::new(answer), |p| {
            (answer(p) + u32::from(p % 7 == 0), None)
        });
        let mut s = if tables_first {
            s.with_tables(tables.clone()).with_pricing(pricing.clone())
        } else {
            s.with_pricing(pricing.clone()).with_tables(tables.clone())
        };
        let o = DecodeOptions {
            max_new_tokens: 64,
            ..DecodeOptions::default()
        };
        let (f, ev) = decode(&mut s, o);
        assert_eq!(f.tokens, ar_answer(64));
        assert_eq!(s.beliefs().tables(), &tables);
        assert_eq!(s.cost(), &pricing.cost);
        // Every decision but the AR rate, timed by this machine's wall clock.
        ev.iter()
            .filter_map(|e| match e {
                DecodeEvent::BlockChosen { block, reason, .. } => Some(format!(
                    "{block} {:?}",
                    crate::engine::events::BlockDecision {
                        ar_rate: None,
                        ..reason.clone()
                    }
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let first = run(true);
    assert!(first.len() > 3, "{first:?}");
    assert_eq!(first, run(false));
}
