//! Block sizes for one packed round, chosen together (`Rule::Round`). Every request's rows share the
//! round's draft forward and its verify forward, so what a block costs is the rows it
//! adds; the forwards' fixed costs are paid once, the draft forward's only if some
//! request drafts. The round takes the choices that maximise expected tokens advanced
//! per ms of the round (Dinkelbach's iteration on the ratio). For one request this is
//! the reference's ratio rule; with many, a request may take an AR step (B = 1) for
//! the price of one verify row while others draft, and the whole round skips its
//! draft forward only when no request gains enough from drafting. Where fresh drafts
//! ride the shared forward (`Batching::Packed`) there is no draft forward to skip: a
//! drafting request is charged a C-th of a forward, the step it waits for its verdict,
//! and the policy prices a request holding a block as drafting too, so that each
//! request costs a whole draft → verify cycle (`strategy`).

use super::overdue;
use crate::engine::cost::CostModel;

/// One way a request can take part in the round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundOption {
    pub block: usize,
    /// Expected tokens advanced, V_B.
    pub value: f64,
    /// Its row in the draft forward (0 when it does not draft).
    pub draft_ms: f64,
    /// Its row in the verify forward.
    pub verify_ms: f64,
    /// What the branch rows it is expected to carry change the round's price by
    /// (negative: they spare more than they cost; `rows::expected_rows_ms`).
    pub rows_ms: f64,
}

impl RoundOption {
    /// What it adds to the round.
    pub fn cost(&self) -> f64 {
        self.draft_ms + self.verify_ms + self.rows_ms
    }

    pub fn drafts(&self) -> bool {
        self.draft_ms > 0.0
    }
}

/// The round's choice: an option index per request, and the expected tokens per ms.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundChoice {
    pub picks: Vec<usize>,
    pub rate: f64,
}

/// What drafting adds to the round where fresh drafts ride the shared forward: a
/// forward's fixed price shared by the `n` requests, since a drafting request advances
/// one forward later than one verifying a block it holds (with every request drafting,
/// the round's two forwards; with one of C, a C-th of one).
pub(super) fn ride_share(cost: &CostModel, n: usize) -> f64 {
    cost.fixed_ms / n.max(1) as f64
}

/// Best options for the round; each request's list must be non-empty. Ties go to the
/// earlier option. `ride`: fresh drafts ride the shared forward (`Batching::Packed`), so
/// a drafting option costs its share of a forward (`ride_share`) rather than costing
/// the round a draft forward.
pub fn choose(options: &[Vec<RoundOption>], cost: &CostModel, ride: bool) -> RoundChoice {
    if ride {
        let share = ride_share(cost, options.len());
        let all: Vec<Vec<(usize, RoundOption)>> = options
            .iter()
            .map(|opts| {
                opts.iter()
                    .map(|o| RoundOption {
                        draft_ms: o.draft_ms + if o.drafts() { share } else { 0.0 },
                        ..*o
                    })
                    .enumerate()
                    .collect()
            })
            .collect();
        let mut best = dinkelbach(&all, cost.round_fixed_ms(false));
        best.rate = rate_of(options, &best.picks, cost, ride);
        return best;
    }
    // Every request skipping the draft (when each can), against the best with a draft.
    let no_draft: Option<Vec<Vec<(usize, RoundOption)>>> = options
        .iter()
        .map(|opts| {
            let kept: Vec<(usize, RoundOption)> = opts
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, o)| !o.drafts())
                .collect();
            (!kept.is_empty()).then_some(kept)
        })
        .collect();
    let all: Vec<Vec<(usize, RoundOption)>> = options
        .iter()
        .map(|opts| opts.iter().copied().enumerate().collect())
        .collect();
    let mut best = dinkelbach(&all, cost.round_fixed_ms(true));
    if let Some(nd) = no_draft {
        let skip = dinkelbach(&nd, cost.round_fixed_ms(false));
        if skip.rate > rate_of(options, &best.picks, cost, ride) + 1e-12 {
            best = skip;
        }
    }
    best.rate = rate_of(options, &best.picks, cost, ride);
    best
}

/// The option to explore instead of `pick`, if one is due. Each option may spend the
/// exploration budget's share of the run's time on being measured (`overdue` of the
/// ms since it last ran, `since` of its block size, against what it costs to run). So
/// a cheap option (an AR step) is measured often and a dear one (a 32-token draft at
/// C = 1) seldom. The most overdue wins.
pub fn explore(
    options: &[RoundOption],
    pick: usize,
    cost: &CostModel,
    since: impl Fn(usize) -> f64,
) -> Option<usize> {
    let due = |k: usize| {
        let o = options[k];
        // What measuring it costs: its forwards (the rows' expected saving is not time).
        overdue(
            since(o.block),
            cost.round_fixed_ms(o.drafts()) + o.draft_ms + o.verify_ms,
        )
    };
    (0..options.len())
        .filter(|&k| k != pick && due(k) >= 1.0)
        .max_by(|&a, &b| due(a).total_cmp(&due(b)))
}

/// Expected tokens per ms of the round the picks make (`ride`: see `choose`).
pub fn rate_of(options: &[Vec<RoundOption>], picks: &[usize], cost: &CostModel, ride: bool) -> f64 {
    let chosen = || options.iter().zip(picks).map(|(o, &k)| o[k]);
    let value: f64 = chosen().map(|o| o.value).sum();
    let drafting = chosen().filter(|o| o.drafts()).count();
    let fixed = if ride {
        cost.round_fixed_ms(false) + drafting as f64 * ride_share(cost, options.len())
    } else {
        cost.round_fixed_ms(drafting > 0)
    };
    let ms = fixed + chosen().map(|o| o.cost()).sum::<f64>();
    if ms > 1e-9 {
        value / ms
    } else {
        0.0
    }
}

/// max Σ v / (fixed + Σ c) over one option per request: repeat λ ← ratio of the picks
/// maximising Σ (v − λ c) until λ stops rising (exact for separable choices).
fn dinkelbach(options: &[Vec<(usize, RoundOption)>], fixed: f64) -> RoundChoice {
    let ratio = |picks: &[(usize, RoundOption)]| {
        let v: f64 = picks.iter().map(|(_, o)| o.value).sum();
        let c: f64 = fixed + picks.iter().map(|(_, o)| o.cost()).sum::<f64>();
        if c > 1e-9 {
            v / c
        } else {
            0.0
        }
    };
    let pick = |lambda: f64| -> Vec<(usize, RoundOption)> {
        options
            .iter()
            .map(|opts| {
                let mut best = opts[0];
                for &o in &opts[1..] {
                    let gain = |x: &RoundOption| x.value - lambda * x.cost();
                    if gain(&o.1) > gain(&best.1) + 1e-12 {
                        best = o;
                    }
                }
                best
            })
            .collect()
    };
    let mut picks = pick(0.0);
    let mut lambda = ratio(&picks);
    for _ in 0..64 {
        let next = pick(lambda);
        let r = ratio(&next);
        if r <= lambda + 1e-12 {
            break;
        }
        picks = next;
        lambda = r;
    }
    RoundChoice {
        picks: picks.into_iter().map(|(k, _)| k).collect(),
        rate: lambda,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cost model with only the costs a round pays whatever its blocks.
    fn fixed(forward_ms: f64, per_round_ms: f64) -> CostModel {
        CostModel {
            fixed_ms: forward_ms,
            per_round_ms,
            ..CostModel::zero("test")
        }
    }

    /// Options for B ∈ {1, 4, 8} with per-token row costs.
    fn opts(values: [f64; 3], per_token: f64) -> Vec<RoundOption> {
        let row = |t: usize| 0.3 + per_token * t as f64;
        vec![
            RoundOption {
                block: 1,
                value: 1.0,
                draft_ms: 0.0,
                verify_ms: row(1),
                rows_ms: 0.0,
            },
            RoundOption {
                block: 4,
                value: values[1],
                draft_ms: row(4),
                verify_ms: row(4),
                rows_ms: 0.0,
            },
            RoundOption {
                block: 8,
                value: values[2],
                draft_ms: row(8),
                verify_ms: row(8),
                rows_ms: 0.0,
            },
        ]
    }

    /// Every combination, for checking the iteration.
    fn brute_force(options: &[Vec<RoundOption>], fixed: &CostModel, ride: bool) -> f64 {
        let mut best = 0f64;
        let mut picks = vec![0; options.len()];
        loop {
            best = best.max(rate_of(options, &picks, fixed, ride));
            let mut i = 0;
            loop {
                if i == picks.len() {
                    return best;
                }
                picks[i] += 1;
                if picks[i] < options[i].len() {
                    break;
                }
                picks[i] = 0;
                i += 1;
            }
        }
    }

    #[test]
    fn matches_brute_force_on_mixed_rounds() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for _ in 0..200 {
            let n = 1 + (next() * 5.0) as usize;
            let per_token = 0.01 + next() * 0.5;
            let fixed = &fixed(next() * 4.0, next() * 2.0);
            let options: Vec<Vec<RoundOption>> = (0..n)
                .map(|_| {
                    let v4 = 1.0 + next() * 3.0;
                    opts([1.0, v4, v4 + next() * 4.0], per_token)
                })
                .collect();
            for ride in [false, true] {
                let got = choose(&options, fixed, ride);
                let want = brute_force(&options, fixed, ride);
                assert!(
                    (got.rate - want).abs() < 1e-9,
                    "got {} want {want} ({options:?}, {fixed:?}, ride {ride})",
                    got.rate
                );
                assert_eq!(got.rate, rate_of(&options, &got.picks, fixed, ride));
            }
        }
    }

    #[test]
    fn flat_costs_draft_and_steep_costs_take_ar_steps() {
        // Flat: drafting 8 costs little more than one token; everyone drafts 8.
        let flat: Vec<_> = (0..4).map(|_| opts([1.0, 3.5, 5.5], 0.001)).collect();
        assert_eq!(choose(&flat, &fixed(2.0, 0.0), false).picks, vec![2; 4]);
        // Steep, many requests: the draft forward never pays; the round is AR.
        let steep: Vec<_> = (0..16).map(|_| opts([1.0, 3.0, 4.5], 0.6)).collect();
        assert_eq!(choose(&steep, &fixed(1.0, 0.0), false).picks, vec![0; 16]);
        // One easy request among hard ones drafts while the others take AR steps.
        let mut mixed: Vec<_> = (0..3).map(|_| opts([1.0, 1.2, 1.3], 0.05)).collect();
        mixed.push(opts([1.0, 4.0, 8.0], 0.05));
        assert_eq!(
            choose(&mixed, &fixed(1.0, 0.0), false).picks,
            vec![0, 0, 0, 2]
        );
    }

    #[test]
    fn work_per_round_favours_fewer_rounds() {
        // A token costs about as much drafted as stepped: with no work between forwards
        // AR steps win; the same forwards with 1 ms of scheduler work per round draft.
        let o = vec![opts([1.0, 3.4, 5.2], 0.4)];
        assert_eq!(choose(&o, &fixed(0.7, 0.0), false).picks, vec![0]);
        assert_ne!(choose(&o, &fixed(0.7, 1.0), false).picks, vec![0]);
    }

    #[test]
    fn exploration_measures_cheap_options_often_and_dear_ones_seldom() {
        // An AR step costs 1.2 ms with its forward's fixed cost, B = 4 4.8 ms; B = 8 is
        // the pick. The budget's share is 3%.
        let o = opts([1.0, 3.5, 5.5], 0.4);
        let fixed = &fixed(0.5, 0.0);
        // Every size last ran 20 ms ago: nothing is due (20 · 0.03 = 0.6 < 1.2).
        assert_eq!(explore(&o, 2, fixed, |_| 20.0), None);
        // 50 ms: the AR step (1.5 ≥ 1.2), not yet B = 4 (due after 160 ms).
        assert_eq!(explore(&o, 2, fixed, |_| 50.0), Some(0));
        // B = 4 not run for a long time and the AR step just now: B = 4.
        let since = |b: usize| if b == 1 { 0.0 } else { 200.0 };
        assert_eq!(explore(&o, 2, fixed, since), Some(1));
        // The pick itself is never explored.
        assert_eq!(explore(&o[..1], 0, fixed, |_| 1e9), None);
    }

    #[test]
    fn a_request_that_must_draft_forces_the_draft_forward() {
        let fixed_only = vec![RoundOption {
            block: 8,
            value: 5.0,
            draft_ms: 1.0,
            verify_ms: 1.0,
            rows_ms: 0.0,
        }];
        let options = vec![fixed_only, opts([1.0, 3.0, 4.5], 0.6)];
        let fixed = &fixed(1.0, 0.0);
        let c = choose(&options, fixed, false);
        assert_eq!(c.picks[0], 0);
        assert!((c.rate - rate_of(&options, &c.picks, fixed, false)).abs() < 1e-12);
    }

    #[test]
    fn a_riding_draft_costs_a_share_of_a_forward() {
        let prices = &fixed(4.0, 0.0);
        // Everyone drafts: riding or not, the round pays two forwards' fixed price.
        let all: Vec<_> = (0..4).map(|_| opts([1.0, 3.0, 4.5], 0.01)).collect();
        let picks = vec![2; 4];
        let (lock, ride) = (
            rate_of(&all, &picks, prices, false),
            rate_of(&all, &picks, prices, true),
        );
        assert!((lock - ride).abs() < 1e-12, "{lock} {ride}");
        // One of four holds its block: in lockstep the others' drafts still cost a
        // draft forward; riding, each costs a quarter of one.
        let mut held = all.clone();
        held[0] = vec![RoundOption {
            draft_ms: 0.0,
            ..held[0][2]
        }];
        let picks = vec![0, 2, 2, 2];
        let (lock, ride) = (
            rate_of(&held, &picks, prices, false),
            rate_of(&held, &picks, prices, true),
        );
        assert!(ride > 1.1 * lock, "{lock} {ride}");
        // Riding, a steep round still takes AR steps where drafting does not pay.
        let steep: Vec<_> = (0..16).map(|_| opts([1.0, 3.0, 4.5], 0.6)).collect();
        assert_eq!(choose(&steep, &fixed(1.0, 0.0), true).picks, vec![0; 16]);
    }
}
