//! The policy driven with synthetic histories and costs (no model): each rule
//! (`learned`: what the beliefs learn and how the decisions weigh it).

use std::collections::BTreeMap;

use super::beliefs::UNMEASURED_DISCOUNT;
use super::*;
use crate::engine::cost::Pricing;
use crate::engine::events::Mode;
use crate::engine::options::{Batching, Blocks, Preset, REFERENCE_BLOCKS, THROUGHPUT_BLOCKS};

/// A GPU-like price list: a forward costs about the same whatever its size.
fn flat() -> CostModel {
    CostModel {
        fixed_ms: 5.0,
        per_row_ms: 0.05,
        per_token_ms: 0.001,
        ..CostModel::zero("flat")
    }
}

/// A CPU-like one: every token costs.
fn steep() -> CostModel {
    CostModel {
        fixed_ms: 0.3,
        per_row_ms: 0.1,
        per_token_ms: 0.4,
        ..CostModel::zero("steep")
    }
}

/// NLD-8B on a B200, from the roofline profile the policy decides by.
fn b200() -> CostModel {
    let p = crate::engine::cost::roofline::named("b200-nld8b").unwrap();
    CostModel::fit(&p, "b200").unwrap()
}

fn history(entropy: f32, block: usize, advance: usize) -> History {
    let mut h = History::default();
    h.push(RoundOutcome {
        block,
        advance,
        full: advance == block,
        verify_entropy: entropy,
    });
    h
}

fn member<'a>(o: &'a DecodeOptions, h: &'a History) -> Member<'a> {
    Member {
        options: o,
        history: h,
        ctx: 100,
        room: 1000,
        reused: None,
        carried: None,
    }
}

/// Beliefs whose prices learn, on the clock the rounds are told by.
fn learning(tables: SurvivalTables, cost: CostModel) -> Beliefs {
    Beliefs::new(tables, &Pricing::new(cost, true, "test"))
}

/// Beliefs held to a fixed profile's prices.
fn fixed_prices(tables: SurvivalTables, cost: CostModel) -> Beliefs {
    Beliefs::new(tables, &Pricing::fixed(cost))
}

/// A round decided as the scheduler decides one: the decision, then the beliefs
/// observe it.
fn decide(b: &mut Beliefs, members: &[Member], batching: Batching) -> Vec<Decision> {
    let plan = super::decide(b, members, batching, &crate::engine::Ablation::SHIPPED);
    if let Some(o) = Observation::decided(&plan) {
        b.observe(&o);
    }
    plan.decisions
}

/// A round of `concurrency` requests committed `tokens` in `ms`.
fn end_round(b: &mut Beliefs, concurrency: usize, tokens: usize, ms: f64) {
    b.observe(&Observation::RoundEnded {
        concurrency,
        tokens,
        wall_ms: ms,
        modeled_ms: ms,
    });
}

/// A judged draft of `block` from history `h` advanced `advance` tokens.
fn advance(b: &mut Beliefs, block: usize, h: &History, advance: usize) {
    b.observe(&Observation::advanced(block, h, advance));
}

fn rules(d: &[Decision]) -> Vec<Option<Rule>> {
    d.iter().map(|x| x.1.as_ref().map(|w| w.rule)).collect()
}

#[test]
fn fixed_ar_and_reused() {
    let mut p = learning(SurvivalTables::marginal_reference(), steep());
    let h = History::default();
    let lin = DecodeOptions {
        mode: Mode::Linear,
        blocks: Blocks::Fixed(16),
        ..DecodeOptions::default()
    };
    let ar = DecodeOptions {
        mode: Mode::Ar,
        ..DecodeOptions::default()
    };
    let mut reused = member(&lin, &h);
    reused.reused = Some(16);
    let d = decide(
        &mut p,
        &[member(&lin, &h), member(&ar, &h), reused],
        Batching::Lockstep,
    );
    assert_eq!(
        d.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![16, 1, 16],
        "{d:?}"
    );
    assert_eq!(rules(&d), vec![Some(Rule::Fixed), None, Some(Rule::Reused)]);
    // A round whose draft rode the last forward keeps its size, adaptive or not.
    let o = DecodeOptions::default();
    let mut carried = member(&o, &h);
    carried.carried = Some(32);
    let d = decide(&mut p, &[carried, member(&o, &h)], Batching::Packed);
    assert_eq!((d[0].0, d[0].1.is_none()), (32, true), "{d:?}");
}

#[test]
fn cold_start_then_the_joint_rule_on_gpu_like_costs() {
    let mut p = learning(SurvivalTables::marginal_reference(), flat());
    let o = DecodeOptions::default();
    let empty = History::default();
    // No history at C = 1: the reference's cap (32), and with flat costs, 32.
    let d = decide(&mut p, &[member(&o, &empty)], Batching::Lockstep);
    assert_eq!((d[0].0, rules(&d)), (32, vec![Some(Rule::ColdStart)]));
    // With history, the round rule; flat costs still favour the largest block.
    let h = history(0.5, 32, 10);
    let d = decide(&mut p, &[member(&o, &h)], Batching::Lockstep);
    assert_eq!((d[0].0, rules(&d)), (32, vec![Some(Rule::Round)]));
    let why = d[0].1.as_ref().unwrap();
    assert_eq!(why.candidates.len(), 3);
    assert!(why.rate.unwrap() > 0.0);
    // At C = 64 the cold start caps at 8.
    let many: Vec<Member> = (0..64).map(|_| member(&o, &empty)).collect();
    assert!(decide(&mut p, &many, Batching::Lockstep)
        .iter()
        .all(|d| d.0 == 8));
}

#[test]
fn per_request_rule_when_rounds_do_not_share_forwards() {
    let mut p = learning(SurvivalTables::marginal_reference(), flat());
    let o = DecodeOptions::default();
    let h = history(0.5, 16, 4);
    let d = decide(&mut p, &[member(&o, &h)], Batching::ByBlock);
    assert_eq!(rules(&d), vec![Some(Rule::Ratio)]);
}

/// The reference's tables with a row for B = 4 (the throughput preset's).
fn tables_with_b4() -> SurvivalTables {
    let mut tables = SurvivalTables::marginal_reference();
    tables
        .strata
        .get_mut("all")
        .unwrap()
        .insert(4, vec![vec![1.0, 0.9, 0.8, 0.7]]);
    tables
}

#[test]
fn the_throughput_preset_takes_ar_steps_on_a_cpu_and_explores() {
    let mut p = learning(tables_with_b4(), steep());
    let o = Preset::Throughput.options();
    let h = history(1.0, 8, 2);
    let members: Vec<Member> = (0..16).map(|_| member(&o, &h)).collect();
    let mut seen: BTreeMap<Rule, usize> = BTreeMap::new();
    for _ in 0..400 {
        let d = decide(&mut p, &members, Batching::Lockstep);
        for r in rules(&d).into_iter().flatten() {
            *seen.entry(r).or_default() += 1;
        }
        // AR steps measure 2 tokens per ms here, drafting less.
        let tokens = d
            .iter()
            .map(|x| if x.0 == 1 { 1 } else { 2 })
            .sum::<usize>();
        let ms = d.iter().map(|x| 0.5 * x.0 as f64).sum::<f64>();
        end_round(&mut p, 16, tokens, ms);
    }
    assert!(
        seen.get(&Rule::ArRegime).copied().unwrap_or(0) > 3000,
        "{seen:?}"
    );
    assert!(
        seen.contains_key(&Rule::ArTrial) || seen.contains_key(&Rule::Round),
        "{seen:?}"
    );
}

/// Under a fixed profile's prices the throughput preset runs no measured regime (no
/// trials timed by the profile's clock): each request's AR step is weighed by the
/// joint choice at those prices, and taken where they favour it.
#[test]
fn under_fixed_prices_the_throughput_preset_weighs_ar_steps_in_the_joint_choice() {
    for (cost, ar_expected) in [(steep(), true), (flat(), false)] {
        let mut p = fixed_prices(SurvivalTables::marginal_reference(), cost);
        let o = Preset::Throughput.options();
        let h = history(1.0, 8, 2);
        let members: Vec<Member> = (0..16).map(|_| member(&o, &h)).collect();
        let mut ar_steps = 0;
        for _ in 0..50 {
            let d = decide(&mut p, &members, Batching::Lockstep);
            for r in rules(&d).into_iter().flatten() {
                assert!(!matches!(r, Rule::ArRegime | Rule::ArTrial), "{r:?}");
            }
            ar_steps += d.iter().filter(|x| x.0 == 1).count();
            end_round(&mut p, 16, 32, 5.0);
        }
        assert_eq!(ar_steps > 0, ar_expected, "{ar_steps}");
    }
}

/// The throughput preset's sizes below the reference's (4, and 1: an AR step) are
/// offered only where the forward is compute-bound at them.
#[test]
fn short_blocks_only_where_forwards_are_compute_bound() {
    // NLD-8B on a B200, 100 positions of context: rows of 4 tokens turn a forward
    // compute-bound from 60–90 of them, single tokens not within the paper's loads.
    let cost = b200();
    let knee = |t| (1..=1024).find(|&c| cost.compute_bound(c, t, 100));
    assert!(
        knee(4).is_some_and(|c| (60..=90).contains(&c)),
        "{:?}",
        knee(4)
    );
    assert!(knee(1).is_none_or(|c| c > 128), "{:?}", knee(1));
    let tables = tables_with_b4();
    let o = Preset::Throughput.options();
    let h = history(1.0, 8, 2);
    let offered = |cost: &CostModel, c: usize| -> Vec<usize> {
        let mut p = fixed_prices(tables.clone(), cost.clone());
        let members: Vec<Member> = (0..c).map(|_| member(&o, &h)).collect();
        let d = decide(&mut p, &members, Batching::Packed);
        let why = d[0].1.as_ref().expect("an adaptive decision");
        why.candidates.iter().map(|x| x.block).collect()
    };
    assert_eq!(offered(&cost, 1), REFERENCE_BLOCKS);
    assert_eq!(offered(&cost, 16), REFERENCE_BLOCKS);
    assert_eq!(offered(&cost, 128), [4, 8, 16, 32]);
    // Where every token costs (a CPU) each size is offered from one request.
    assert_eq!(offered(&steep(), 1), THROUGHPUT_BLOCKS);
    // The development CPU's built-in profile: 4-token blocks from one request, AR
    // steps from two (one token alone is still mostly a forward's fixed price there).
    let cpu = CostModel::builtin();
    assert!(cpu.compute_bound(1, 4, 100));
    assert!(!cpu.compute_bound(1, 1, 100) && cpu.compute_bound(2, 1, 100));
}

#[test]
fn exploration_runs_sizes_the_rule_does_not_pick() {
    // Flat costs make 32 the pick; 8 and 16 are measured now and then.
    let mut p = learning(SurvivalTables::marginal_reference(), flat());
    let o = DecodeOptions::default();
    let h = history(0.5, 32, 10);
    let mut explored = BTreeMap::new();
    for _ in 0..2000 {
        let d = decide(&mut p, &[member(&o, &h)], Batching::Lockstep);
        if rules(&d)[0] == Some(Rule::Explore) {
            *explored.entry(d[0].0).or_insert(0) += 1;
        }
        end_round(&mut p, 1, 10, 10.0);
    }
    let n: usize = explored.values().sum();
    assert!(
        explored.contains_key(&8) && explored.contains_key(&16),
        "{explored:?}"
    );
    // Within the budget: a few percent of the rounds.
    assert!(n > 5 && n < 200, "{n} explorations: {explored:?}");
}

#[test]
fn blocks_are_clipped_to_the_context() {
    let mut p = learning(SurvivalTables::marginal_reference(), flat());
    let lin = DecodeOptions {
        mode: Mode::Linear,
        blocks: Blocks::Fixed(32),
        ..DecodeOptions::default()
    };
    let h = History::default();
    let mut m = member(&lin, &h);
    m.room = 5;
    let d = decide(&mut p, &[m], Batching::Lockstep);
    assert_eq!((d[0].0, rules(&d)), (5, vec![Some(Rule::Context)]));
}

#[test]
fn the_policys_clock_is_the_rounds_it_was_told_of() {
    // Regime trials and exploration read `clock_ms`, never the wall clock: a replay
    // or a profile's prices give the same decisions at any speed.
    let mut p = learning(SurvivalTables::marginal_reference(), steep());
    end_round(&mut p, 1, 3, 12.5);
    end_round(&mut p, 1, 3, 7.5);
    assert_eq!(p.clock_ms(), 20.0);
}

#[test]
fn ratio_rule_weighs_value_against_cost() {
    let mut t = SurvivalTables::marginal_reference();
    let cost = CostModel {
        fixed_ms: 0.0,
        per_row_ms: 1.0,
        per_token_ms: 0.1,
        per_token_ctx_ms: 0.0,
        per_row_ctx_ms: 0.0,
        per_draft_token_ms: 0.0,
        per_round_ms: 0.0,
        source: "test".into(),
        sweep: None,
    };
    let mut h = History::default();
    // Cold start: with flat costs, the reference's mapping (32 up to C = 4, 16 up to
    // C = 32, then 8); with costs that grow with B, the rule within that cap.
    let flat = CostModel {
        per_token_ms: 0.0,
        ..cost.clone()
    };
    let rb = &REFERENCE_BLOCKS;
    for (c, want) in [(1, 32), (4, 32), (16, 16), (64, 8)] {
        let (b, why) = ratio_rule(&h, &t, &flat, rb, c, 0, &Learned::NONE);
        assert_eq!((b, why.rule), (want, Rule::ColdStart), "C = {c}");
    }
    let steep = CostModel {
        per_token_ms: 1.0,
        ..cost.clone()
    };
    assert_eq!(ratio_rule(&h, &t, &steep, rb, 1, 0, &Learned::NONE).0, 8);
    assert_eq!(
        ratio_rule(&h, &t, &steep, rb, 16, 0, &Learned::NONE)
            .1
            .candidates
            .len(),
        2
    );
    h.push(RoundOutcome {
        block: 16,
        advance: 3,
        full: false,
        verify_entropy: 0.5,
    });
    // V: 5.78 / 8.53 / 11.36; T ∝ 1 + 0.1·B: 1.8, 2.6, 4.2 -> ratios 3.21, 3.28, 2.70.
    let (b, why) = ratio_rule(&h, &t, &cost, rb, 1, 0, &Learned::NONE);
    assert_eq!((b, why.rule), (16, Rule::Ratio));
    assert_eq!(why.candidates.len(), 3);
    // The order of the action space does not matter.
    assert_eq!(
        ratio_rule(&h, &t, &cost, &[32, 16, 8], 1, 0, &Learned::NONE).0,
        16
    );
    // Make B = 32 worth much more: it wins.
    t.strata
        .get_mut("all")
        .unwrap()
        .insert(32, vec![vec![1.0; 32]]);
    assert_eq!(ratio_rule(&h, &t, &cost, rb, 1, 0, &Learned::NONE).0, 32);
}

#[test]
fn small_blocks_and_ar_steps_win_only_where_tokens_are_expensive() {
    let mut t = SurvivalTables::marginal_reference();
    // V_4 = 3.7 against the geometric V_8 = 5.78.
    t.strata
        .get_mut("all")
        .unwrap()
        .insert(4, vec![vec![1.0, 0.95, 0.9, 0.85]]);
    let mut h = History::default();
    h.push(RoundOutcome {
        block: 8,
        advance: 3,
        full: false,
        verify_entropy: 0.5,
    });
    let all = [1, 4, 8, 16, 32];
    assert!(t.covers(1) && t.covers(4) && !t.covers(64));
    assert_eq!(t.value(1, None, None), 1.0, "an AR step advances one token");
    // GPU-like: a forward costs about the same whatever its size; the largest wins.
    let flat = CostModel {
        fixed_ms: 1.0,
        per_row_ms: 0.1,
        per_token_ms: 0.001,
        per_token_ctx_ms: 0.0,
        per_row_ctx_ms: 0.0,
        per_draft_token_ms: 0.0,
        per_round_ms: 0.0,
        source: "test".into(),
        sweep: None,
    };
    assert_eq!(ratio_rule(&h, &t, &flat, &all, 1, 0, &Learned::NONE).0, 32);
    // Per-token costs: at C = 1 the fixed cost still pays for a small draft.
    // V / T: B = 1 1 / 1.5 = 0.667, B = 4 3.7 / 5.4 = 0.685, B = 8 5.78 / 8.6 = 0.672.
    let cpu = CostModel {
        fixed_ms: 1.0,
        per_row_ms: 0.1,
        per_token_ms: 0.4,
        per_token_ctx_ms: 0.0,
        per_row_ctx_ms: 0.0,
        per_draft_token_ms: 0.0,
        per_round_ms: 0.0,
        source: "test".into(),
        sweep: None,
    };
    let (b, why) = ratio_rule(&h, &t, &cpu, &all, 1, 0, &Learned::NONE);
    assert_eq!(b, 4, "{why:?}");
    // One forward, no draft: T(1) is one 1-token forward.
    assert_eq!(why.candidates[0].cost_ms, cpu.forward_ms(1, 1, 0));
    // With many requests the fixed cost is shared and the AR step wins.
    assert_eq!(ratio_rule(&h, &t, &cpu, &all, 32, 0, &Learned::NONE).0, 1);
    // Sizes the tables cannot value are left out; none left: the smallest asked.
    let (b, why) = ratio_rule(&h, &t, &cpu, &[64, 48], 1, 0, &Learned::NONE);
    assert_eq!((b, why.rule, why.candidates.len()), (48, Rule::Untabled, 0));
}

mod learned;
