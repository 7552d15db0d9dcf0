//! The policy driven with synthetic histories and costs (no model): each rule.

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
    let plan = super::decide(b, members, batching);
    b.observe(Observation::Decided(&plan));
    plan.decisions
}

/// A round of `concurrency` requests committed `tokens` in `ms`.
fn end_round(b: &mut Beliefs, concurrency: usize, tokens: usize, ms: f64) {
    b.observe(Observation::RoundEnded {
        concurrency,
        tokens,
        wall_ms: ms,
        modeled_ms: ms,
    });
}

/// A judged draft of `block` from history `h` advanced `advance` tokens.
fn advance(b: &mut Beliefs, block: usize, h: &History, advance: usize) {
    b.observe(Observation::Advanced {
        block,
        history: h,
        advance,
    });
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

/// NLD-8B on a B200, from the roofline profile the policy decides by.
fn b200() -> CostModel {
    let p = crate::engine::cost::roofline::named("b200-nld8b").unwrap();
    CostModel::fit(&p, "b200").unwrap()
}

fn row_keys() -> Vec<(usize, RowKey)> {
    use crate::engine::events::BranchKind;
    vec![
        (
            48,
            RowKey::of(BranchKind::Correction { rank: 1 }, 32, Some(0.1), 2),
        ),
        (32, RowKey::of(BranchKind::Continuation, 32, None, 2)),
    ]
}

#[test]
fn rows_kept_at_c1_on_a_gpu() {
    // One request: a forward is memory-bound, a row's tokens nearly free against the
    // whole draft forward a hit spares.
    let load = RowLoad {
        concurrency: 1,
        ctx: 300,
        block: 32,
        rides: false,
    };
    let (keep, d) = price_rows(&row_keys(), &HitRates::default(), &b200(), load, true);
    assert_eq!(keep, vec![true, true], "{d:?}");
    assert_eq!((d.kept.rows, d.dropped.rows), (2, 0));
    assert!(d.kept.added_ms < 0.5 * d.share_ms, "{d:?}");
    assert!(
        d.describe(&d.kept).starts_with('+'),
        "{}",
        d.describe(&d.kept)
    );
}

#[test]
fn rows_dropped_at_high_load() {
    // 64 requests: the draft forward runs for the others anyway, so a hit spares only
    // this request's draft row, and a row of 48–64 tokens costs more than that.
    let load = RowLoad {
        concurrency: 64,
        ctx: 300,
        block: 32,
        rides: false,
    };
    let (keep, d) = price_rows(&row_keys(), &HitRates::default(), &b200(), load, true);
    assert_eq!(keep, vec![false, false], "{d:?}");
    assert_eq!((d.kept.rows, d.dropped.rows), (0, 2));
    assert!(d.dropped.saves > 0.0 && d.dropped.added_ms > 0.0);
    // The all-rows ablation keeps them and says they were not priced.
    let (keep, d) = price_rows(&row_keys(), &HitRates::default(), &b200(), load, false);
    assert_eq!(keep, vec![true, true]);
    assert!(d.unpriced);
    // On a CPU-like price list every token costs: rows do not pay even alone.
    let load = RowLoad {
        concurrency: 1,
        ..load
    };
    let (keep, _) = price_rows(&row_keys(), &HitRates::default(), &steep(), load, true);
    assert_eq!(keep, vec![false, false]);
}

#[test]
fn rows_kept_at_c4_where_drafts_ride() {
    // Four requests on a GPU. Where fresh drafts ride the shared forward, a hit spares
    // this request a forward's share (a quarter of its fixed price) whatever the
    // others do; in lockstep the draft forward is spared only when all four hold a
    // block, which the prior reuse rate makes rare.
    let load = RowLoad {
        concurrency: 4,
        ctx: 300,
        block: 32,
        rides: true,
    };
    let hits = HitRates::default();
    let (ride_keep, ride) = price_rows(&row_keys(), &hits, &b200(), load, true);
    let lockstep = RowLoad {
        rides: false,
        ..load
    };
    let (lock_keep, lock) = price_rows(&row_keys(), &hits, &b200(), lockstep, true);
    assert!(ride.saving_ms > 3.0 * lock.saving_ms, "{ride:?} {lock:?}");
    // The continuation, which extends the verify row, rides either way at its prior
    // rate; the 48-token correction row at its prior rate does not.
    assert_eq!(ride_keep, vec![false, true], "{ride:?}");
    assert_eq!(lock_keep, vec![false, true], "{lock:?}");
    // A correction row that hits often (a close margin) rides where drafts ride and
    // is dropped in lockstep.
    let mut often = HitRates::default();
    let p1 = row_keys()[0].1;
    for k in 0..40 {
        often.record(&[p1], (k % 5 < 3).then_some(0));
    }
    let (ride_keep, _) = price_rows(&row_keys()[..1], &often, &b200(), load, true);
    let (lock_keep, _) = price_rows(&row_keys()[..1], &often, &b200(), lockstep, true);
    assert_eq!((ride_keep, lock_keep), (vec![true], vec![false]));
    // At 64 requests a forward's share is small: riding, that correction is dropped,
    // and so is a continuation that seldom hits.
    let busy = RowLoad {
        concurrency: 64,
        ..load
    };
    let (keep, d) = price_rows(&row_keys()[..1], &often, &b200(), busy, true);
    assert_eq!(keep, vec![false], "{d:?}");
    let cont = row_keys()[1].1;
    let mut seldom = HitRates::default();
    for k in 0..40 {
        seldom.record(&[cont], (k % 5 == 0).then_some(0));
    }
    let (keep, d) = price_rows(&row_keys()[1..], &seldom, &b200(), busy, true);
    assert_eq!(keep, vec![false], "{d:?}");
}

#[test]
fn hit_rates_learn_per_kind_block_and_band_and_stay_open() {
    use crate::engine::events::BranchKind;
    let p1 = |margin| RowKey::of(BranchKind::Correction { rank: 1 }, 16, Some(margin), 3);
    let mut h = HitRates::default();
    let prior = h.rate(p1(0.1));
    for _ in 0..40 {
        h.record(&[p1(0.1)], Some(0));
        h.record(&[p1(0.4)], None);
    }
    // Two rows of one kind in a round, the second hit: only it is credited.
    let mut two = HitRates::default();
    for _ in 0..40 {
        two.record(&[p1(0.1), p1(0.1).next_alternative()], Some(1));
    }
    assert!(two.rate(p1(0.1)) < 0.2, "{two:?}");
    assert!(two.rate(p1(0.1).next_alternative()) > 0.8, "{two:?}");
    // The close-margin band hits, the other does not; the estimates part.
    assert!(h.rate(p1(0.1)) > 0.8 && h.rate(p1(0.4)) < 0.2, "{h:?}");
    assert!(prior > 0.1 && prior < 0.5);
    // Optimism: a key with little evidence is priced above its estimate, one with
    // much evidence close to it.
    let fresh = RowKey::of(BranchKind::Continuation, 8, None, 0);
    assert!(h.optimistic(fresh) > h.rate(fresh) + 0.1);
    assert!(h.optimistic(p1(0.4)) - h.rate(p1(0.4)) < 0.07);
}

#[test]
fn the_block_size_is_priced_with_its_rows() {
    // With rows that pay (C = 1 on a GPU) a block's round is expected to cost less
    // than its forwards; at C = 64 the rows are dropped and change nothing.
    let hits = HitRates::default();
    let cost = b200();
    let at = |concurrency| RowLoad {
        concurrency,
        ctx: 300,
        block: 16,
        rides: false,
    };
    assert!(expected_rows_ms(&hits, &cost, at(1), true) < 0.0);
    assert_eq!(expected_rows_ms(&hits, &cost, at(64), true), 0.0);
    // Every row at every load (the ablation) is a cost at C = 64.
    assert!(expected_rows_ms(&hits, &cost, at(64), false) > 0.0);
    // And the policy weighs it: the default preset's options carry it.
    let mut p = learning(SurvivalTables::marginal_reference(), cost);
    let o = DecodeOptions::default();
    let h = history(0.5, 16, 4);
    let d = decide(&mut p, &[member(&o, &h)], Batching::Lockstep);
    let why = d[0].1.as_ref().unwrap();
    let forwards = |b: usize| {
        let c = p.cost();
        c.draft_row_ms(b, 100) + c.row_ms(b, 100)
    };
    for c in &why.candidates {
        assert!(c.total_ms() < forwards(c.block), "{c:?}");
        assert!(c.cost_ms > 0.0 && c.rows_ms < 0.0, "{c:?}");
    }
}

#[test]
fn an_overrated_cell_is_scaled_by_what_its_rounds_advanced() {
    let mut p = learning(SurvivalTables::marginal_reference(), b200());
    let h = history(0.5, 8, 8);
    let other = history(0.5, 8, 3);
    assert_eq!(p.calibration(16, &h), 1.0);
    let v16 = p.tables().value(16, h.signal(), h.stratum().as_deref());
    // Rounds of B = 16 from this cell advance half what the tables say.
    for _ in 0..40 {
        advance(&mut p, 16, &h, (v16 / 2.0).round() as usize);
    }
    let c = p.calibration(16, &h);
    assert!((0.45..0.6).contains(&c), "{c}");
    // Another cell of the same size moves with it, less; other sizes not at all.
    let o = p.calibration(16, &other);
    assert!(o < 1.0 && o > c, "{o}");
    // A larger size is not inferred from them; a smaller one is (see the next test).
    assert_eq!(p.calibration(32, &h), 1.0);
    // The decision sees it: the overrated size's candidate value drops.
    let opts = DecodeOptions::default();
    let d = decide(&mut p, &[member(&opts, &h)], Batching::Lockstep);
    let cand = d[0]
        .1
        .as_ref()
        .unwrap()
        .candidates
        .iter()
        .find(|c| c.block == 16)
        .unwrap()
        .clone();
    // B = 16 is the best-measured size (40 rounds, B = 8 as many): no discount.
    assert!((cand.value - v16 * c).abs() < 1e-9, "{cand:?}");
}

/// A round of B = 32 says what B = 16 and B = 8 would have advanced from the same
/// state (min(advance, B)): the rule learns a smaller size it does not pick, and not a
/// larger one (a full round says nothing past its end).
#[test]
fn a_round_measures_the_smaller_sizes_too() {
    let mut p = learning(SurvivalTables::marginal_reference(), b200());
    let h = history(0.5, 8, 8);
    let t = |b: usize| p.tables().value(b, h.signal(), h.stratum().as_deref());
    let (v8, v16) = (t(8), t(16));
    // Every B = 32 round rejects at its 4th position: 4 tokens.
    for _ in 0..200 {
        advance(&mut p, 32, &h, 4);
    }
    for (b, v) in [(8, v8), (16, v16)] {
        let c = p.calibration(b, &h);
        // Shrunk toward the prior a little; close to 4 / V_B.
        assert!(
            (c - 4.0 / v).abs() < 0.1 * 4.0 / v,
            "B = {b}: {c} vs {}",
            4.0 / v
        );
    }
    // Full rounds of B = 8 say B = 8 is worth 8 and leave B = 16 unmeasured.
    let mut q = learning(SurvivalTables::marginal_reference(), b200());
    for _ in 0..200 {
        advance(&mut q, 8, &h, 8);
    }
    assert!(q.calibration(8, &h) > 1.0);
    assert_eq!(q.calibration(16, &h), 1.0);
}

/// A size no round has measured is discounted against the best-measured one: the rule
/// does not switch to it on the tables' word alone, and before any round every size
/// stands on the tables.
#[test]
fn an_unmeasured_size_is_discounted_until_rounds_measure_it() {
    let mut p = learning(SurvivalTables::marginal_reference(), b200());
    let h = history(0.5, 8, 8);
    let value = |p: &Beliefs, b: usize| p.value(&h, b);
    let raw = |p: &Beliefs, b: usize| {
        p.tables().value(b, h.signal(), h.stratum().as_deref()) * p.calibration(b, &h)
    };
    // Nothing measured: the tables alone, every size alike.
    for b in [8, 16, 32] {
        assert!((value(&p, b) - raw(&p, b)).abs() < 1e-9);
    }
    for _ in 0..99 {
        advance(&mut p, 16, &h, 6);
    }
    // B = 8 and 16 measured by 99 rounds (no discount), B = 32 by none:
    // UNMEASURED_DISCOUNT × (1 − 1/10).
    for b in [8, 16] {
        assert!((value(&p, b) - raw(&p, b)).abs() < 1e-9, "B = {b}");
    }
    let d = 1.0 - value(&p, 32) / raw(&p, 32);
    assert!((d - UNMEASURED_DISCOUNT * 0.9).abs() < 1e-9, "{d}");
}

/// Under the measured B200 sweep each decision is priced at its load: the ratio rule's
/// T_C(B) is the tangent model's at C (the sweep's, within its 10%), and a packed
/// round of C requests decides on it.
#[test]
fn a_measured_profile_prices_each_load_by_its_tangent() {
    use crate::engine::cost::{measured, roofline};
    let cost = measured::b200_nld8b().unwrap();
    let mut p = fixed_prices(SurvivalTables::marginal_reference(), cost.clone());
    let o = DecodeOptions::default();
    let h = history(0.5, 16, 8);
    let m = Member {
        ctx: roofline::PAPER_CONTEXT,
        ..member(&o, &h)
    };
    for &(c, paper) in roofline::PAPER_B200_8B {
        // Each request apart (the reference's buckets): the ratio rule at C.
        let round: Vec<Member> = (0..c).map(|_| m.clone()).collect();
        let d = decide(&mut p, &round, Batching::ByBlock);
        let why = d[0].1.as_ref().expect("a ratio decision");
        assert_eq!(why.rule, Rule::Ratio);
        let tangent = cost.at_load(c);
        for (cand, want) in why.candidates.iter().zip(paper) {
            let ms = tangent.round_ms(c, cand.block, m.ctx);
            assert_eq!(cand.cost_ms, ms, "C = {c}, B = {}", cand.block);
            assert!((ms / want - 1.0).abs() < 0.1, "C = {c}: {ms} vs {want}");
        }
        assert_eq!(decide(&mut p, &round, Batching::Packed).len(), c);
    }
}

#[test]
fn where_drafts_ride_a_holder_is_priced_as_a_drafter() {
    // A member verifying a block it holds paid no draft this round, but its rows are
    // credited with the draft a hit spares next round. Charged nothing for a draft
    // now, the round's rate would count that saving twice (on average over a
    // request's rounds a hit spares one draft, not two) and overrate tokens per ms,
    // which pushed the joint choice to small blocks (issue 52: B = 8 in 88% of rounds
    // at C = 16, below fixed B = 16). So the rate the open member is judged by is
    // the same whether the other member drafts this round or holds its block.
    let mut p = learning(SurvivalTables::marginal_reference(), b200());
    let o = DecodeOptions::default();
    let fixed = DecodeOptions {
        blocks: Blocks::Fixed(16),
        ..DecodeOptions::default()
    };
    let (h, g) = (history(0.5, 16, 9), history(0.5, 16, 16));
    let mut holder = member(&fixed, &g);
    holder.reused = Some(16);
    let rate = |p: &mut Beliefs, other: Member| {
        let d = decide(p, &[member(&o, &h), other], Batching::Packed);
        d[0].1.as_ref().and_then(|w| w.rate).unwrap()
    };
    let drafting = rate(&mut p, member(&fixed, &g));
    let holding = rate(&mut p, holder);
    assert!((drafting - holding).abs() < 1e-9, "{drafting} {holding}");
    // At C = 16, fifteen holders or fifteen drafters: the open member chooses the same
    // block at the same rate (charged nothing, the holders made the round look twice
    // as productive per ms, and λ · T outweighed what a larger block adds).
    let choice = |others_hold: bool| {
        let mut p = learning(SurvivalTables::marginal_reference(), b200());
        let mut round = vec![member(&o, &h)];
        for _ in 0..15 {
            let mut m = member(&fixed, &g);
            m.reused = others_hold.then_some(16);
            round.push(m);
        }
        let d = decide(&mut p, &round, Batching::Packed);
        (d[0].0, d[0].1.as_ref().and_then(|w| w.rate).unwrap())
    };
    let (held, drafted) = (choice(true), choice(false));
    assert_eq!(held.0, drafted.0, "{held:?} {drafted:?}");
    assert!((held.1 - drafted.1).abs() < 1e-9, "{held:?} {drafted:?}");
}
