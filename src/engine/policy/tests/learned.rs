//! Row pricing, hit rates, calibration and measured prices: what the beliefs learn,
//! and the decisions that weigh it.

use super::*;

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
