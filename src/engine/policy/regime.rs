//! Drafting or AR steps, decided by measured throughput. The cost model prices each
//! forward from its shape, but on a CPU a forward's time also depends on what ran
//! before it: an AR step inside a run of AR steps costs about half of one between
//! drafts (warm caches and clocks), so a rule that only ever tries isolated AR steps
//! never sees how fast a run of them is. Packed rounds therefore run in one of two
//! regimes, the joint rule (`Draft`) or every adaptive request taking an AR step
//! (`Ar`), and the regime that has delivered more tokens per ms at this concurrency
//! runs, drafting only when it is ahead by more than the noise (`DRAFT_MARGIN`).
//! The other one is tried for a span of rounds now and then, within the policy's
//! exploration budget (`super::overdue`), so a change in the machine or the text is
//! noticed. The clock is the policy's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::overdue;
use crate::engine::events::RegimeRates;

/// How adaptive requests of a packed round choose their block sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// The joint rule over the whole action space (`round_blocks::choose`).
    Draft,
    /// Every adaptive request takes an AR step.
    Ar,
}

impl Regime {
    fn index(self) -> usize {
        match self {
            Regime::Draft => 0,
            Regime::Ar => 1,
        }
    }

    fn other(self) -> Self {
        match self {
            Regime::Draft => Regime::Ar,
            Regime::Ar => Regime::Draft,
        }
    }
}

/// Rounds of a trial of the regime not running.
const SPAN: usize = 24;
/// Measured rounds of the running regime before the other is first tried.
const FIRST_TRIAL_AFTER: f64 = 8.0;
/// Rounds after a change of regime left out of its measure: on the development CPU
/// the first AR steps after drafts take 1.5–2 ms and settle near 1 ms by the fourth,
/// and the first draft round after AR steps is about twice the next ones.
const WARM: usize = 4;
/// Per-round decay of a regime's measured tokens and ms.
const DECAY: f64 = 0.98;
/// How much faster drafting must have measured to run instead of AR steps. The
/// rates are noisy (windows of the same regime differ by 10% and more on the
/// development CPU) and drafting's comes from short trials; within that noise AR
/// steps are the safer choice: no draft forward to waste, no transient. Where
/// drafting pays (a GPU) it wins by far more.
const DRAFT_MARGIN: f64 = 0.05;

/// Decayed tokens and ms of one regime's rounds.
#[derive(Debug, Clone, Copy, Default)]
struct Measure {
    tokens: f64,
    ms: f64,
    rounds: f64,
    /// Clock when it last ran.
    last_ran: f64,
}

impl Measure {
    fn rate(&self) -> Option<f64> {
        (self.rounds >= 1.0 && self.ms > 0.0).then(|| self.tokens / self.ms)
    }

    fn round_ms(&self) -> f64 {
        if self.rounds > 0.0 {
            self.ms / self.rounds
        } else {
            0.0
        }
    }
}

/// A packed round's regime, and where the chooser's trial stands once it runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegimeTurn {
    pub regime: Regime,
    /// The regime is on trial (the other one measured faster, or nothing yet).
    pub trial: bool,
    trial_left: usize,
}

/// Chooses the regime of each packed round and learns from what the rounds delivered.
#[derive(Debug, Clone)]
pub struct RegimeChooser {
    /// Per concurrency bucket (the rates of different concurrencies do not compare).
    measures: BTreeMap<usize, [Measure; 2]>,
    current: Regime,
    /// Whether the regime running is on trial, and its rounds left.
    trial: bool,
    trial_left: usize,
    /// Rounds run since the regime last changed.
    since_change: usize,
}

impl Default for RegimeChooser {
    fn default() -> Self {
        Self {
            measures: BTreeMap::new(),
            current: Regime::Draft,
            trial: false,
            trial_left: 0,
            since_change: 0,
        }
    }
}

/// Concurrencies 1, 2, 3–4, 5–8, … share a bucket.
fn bucket(concurrency: usize) -> usize {
    concurrency.max(1).next_power_of_two()
}

impl RegimeChooser {
    /// The regime of the next round at `concurrency`, at time `clock_ms` of the run
    /// (the chooser moves to it when the round is `begin`-ed).
    pub fn next(&self, concurrency: usize, clock_ms: f64) -> RegimeTurn {
        if self.trial_left > 0 {
            return RegimeTurn {
                regime: self.current,
                trial: self.trial,
                trial_left: self.trial_left - 1,
            };
        }
        let m = self
            .measures
            .get(&bucket(concurrency))
            .copied()
            .unwrap_or_default();
        // A concurrency not measured yet keeps the regime running (drafting at the
        // start: RecGuide's own rule goes first); one measured regime is the one that
        // has run, and the other is due for a trial.
        let best = match (m[0].rate(), m[1].rate()) {
            (Some(d), Some(a)) => {
                if d > a * (1.0 + DRAFT_MARGIN) {
                    Regime::Draft
                } else {
                    Regime::Ar
                }
            }
            (Some(_), None) => Regime::Draft,
            (None, Some(_)) => Regime::Ar,
            (None, None) => self.current,
        };
        let other = best.other();
        let o = m[other.index()];
        let own = m[best.index()].rounds >= FIRST_TRIAL_AFTER;
        let due =
            o.rate().is_none() || overdue(clock_ms - o.last_ran, SPAN as f64 * o.round_ms()) >= 1.0;
        if own && due {
            RegimeTurn {
                regime: other,
                trial: true,
                trial_left: SPAN - 1,
            }
        } else {
            RegimeTurn {
                regime: best,
                trial: false,
                trial_left: 0,
            }
        }
    }

    /// A round runs in the regime `next` chose.
    pub fn begin(&mut self, turn: RegimeTurn) {
        self.trial = turn.trial;
        self.trial_left = turn.trial_left;
        if turn.regime != self.current {
            self.current = turn.regime;
            self.since_change = 0;
        }
    }

    /// What a round at `concurrency` in `regime` delivered: `tokens` committed in `ms`,
    /// ending at `clock_ms` of the run.
    pub fn record(
        &mut self,
        concurrency: usize,
        regime: Regime,
        tokens: usize,
        ms: f64,
        clock_ms: f64,
    ) {
        self.since_change += 1;
        let clock = clock_ms;
        let m = self.measures.entry(bucket(concurrency)).or_default();
        m[regime.index()].last_ran = clock;
        if self.since_change <= WARM || !(ms.is_finite() && ms > 0.0) {
            return;
        }
        let r = &mut m[regime.index()];
        r.tokens = DECAY * r.tokens + tokens as f64;
        r.ms = DECAY * r.ms + ms;
        r.rounds = DECAY * r.rounds + 1.0;
    }

    /// Measured tokens per ms of each regime at `concurrency`.
    pub fn rates(&self, concurrency: usize) -> RegimeRates {
        let m = self.measures.get(&bucket(concurrency));
        RegimeRates {
            draft: m.and_then(|m| m[0].rate()),
            ar: m.and_then(|m| m[1].rate()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::policy::EXPLORE_SHARE;

    /// A chooser with the clock the policy would keep.
    #[derive(Default)]
    struct Clocked {
        c: RegimeChooser,
        clock: f64,
        trial: bool,
    }

    impl Clocked {
        fn next(&mut self, concurrency: usize) -> Regime {
            let t = self.c.next(concurrency, self.clock);
            self.c.begin(t);
            self.trial = t.trial;
            t.regime
        }
        fn record(&mut self, concurrency: usize, r: Regime, tokens: usize, ms: f64) {
            self.clock += ms;
            self.c.record(concurrency, r, tokens, ms, self.clock);
        }
        fn in_trial(&self) -> bool {
            self.trial
        }
        fn rates(&self, concurrency: usize) -> RegimeRates {
            self.c.rates(concurrency)
        }
    }

    /// Runs `rounds` rounds where drafting gives `draft` and AR steps `ar` tokens per
    /// ms (a drafting round commits 5 tokens, an AR round 1); returns the rounds per
    /// regime.
    fn run(draft: f64, ar: f64, rounds: usize) -> [usize; 2] {
        let mut c = Clocked::default();
        let mut n = [0; 2];
        for _ in 0..rounds {
            let r = c.next(1);
            n[r.index()] += 1;
            let (tokens, rate) = match r {
                Regime::Draft => (5, draft),
                Regime::Ar => (1, ar),
            };
            c.record(1, r, tokens, tokens as f64 / rate);
        }
        n
    }

    #[test]
    fn the_faster_regime_runs_and_the_other_is_tried_within_its_share() {
        // AR faster: after one span of drafting and a trial, AR steps run.
        let [d, a] = run(0.8, 1.0, 20_000);
        assert!(a > 19_200, "draft {d} ar {a}");
        // Trials of drafting take about EXPLORE_SHARE of the time (6.25 ms rounds).
        let draft_ms = 6.25 * d as f64;
        let share = draft_ms / (draft_ms + a as f64);
        assert!(share < 2.0 * EXPLORE_SHARE + 0.05, "share {share}");
        assert!(d >= 2 * SPAN, "drafting was not retried: {d}");
        // Drafting faster (the GPU case): it runs, and AR steps are tried within their
        // share of the time.
        let [d, a] = run(3.0, 1.0, 10_000);
        assert!(d > 8_000, "draft {d} ar {a}");
        assert!(a >= SPAN, "AR steps never tried: {a}");
        let share = a as f64 / (a as f64 + 5.0 / 3.0 * d as f64);
        assert!(share < 2.0 * EXPLORE_SHARE, "share {share}");
    }

    #[test]
    fn the_first_trial_of_ar_steps_comes_after_the_first_measured_rounds() {
        let mut c = Clocked::default();
        let mut seen = Vec::new();
        for _ in 0..40 {
            let r = c.next(1);
            seen.push((r, c.in_trial()));
            // AR steps slower here: after the trial drafting runs again.
            let (tokens, ms) = if r == Regime::Ar { (1, 2.0) } else { (5, 5.0) };
            c.record(1, r, tokens, ms);
        }
        // After the transient and FIRST_TRIAL_AFTER measured rounds (decayed: one more).
        let first = seen
            .iter()
            .position(|s| s.0 == Regime::Ar)
            .expect("a trial");
        assert_eq!(first, WARM + FIRST_TRIAL_AFTER as usize + 1, "{seen:?}");
        assert!(seen[..first].iter().all(|&s| s == (Regime::Draft, false)));
        assert!(seen[first..first + SPAN]
            .iter()
            .all(|&s| s == (Regime::Ar, true)));
        assert_eq!(seen[first + SPAN], (Regime::Draft, false));
        let r = c.rates(1);
        assert!(r.draft > r.ar && r.ar.is_some(), "{r:?}");
    }

    #[test]
    fn a_new_concurrency_starts_in_the_regime_running() {
        let mut c = Clocked::default();
        let mut r = Regime::Draft;
        for _ in 0..200 {
            r = c.next(4);
            let (tokens, ms) = if r == Regime::Ar { (4, 1.0) } else { (8, 4.0) };
            c.record(4, r, tokens, ms);
        }
        assert_eq!(r, Regime::Ar);
        // Requests finished: two left, a bucket never measured.
        assert_eq!(
            c.rates(2),
            RegimeRates {
                draft: None,
                ar: None
            }
        );
        assert_eq!(c.next(2), Regime::Ar);
    }

    #[test]
    fn drafting_must_beat_ar_steps_by_the_margin() {
        // Drafting 3% faster: within the noise, AR steps run after the first trial.
        let [d, a] = run(1.03, 1.0, 5_000);
        assert!(a > 4_500, "draft {d} ar {a}");
        // 10% faster: drafting runs.
        let [d, a] = run(1.10, 1.0, 5_000);
        assert!(d > 2 * a, "draft {d} ar {a}");
    }

    #[test]
    fn transients_after_a_change_are_not_measured() {
        let mut c = Clocked::default();
        for k in 0..10 {
            let r = c.next(1);
            assert_eq!(r, Regime::Draft);
            // The first rounds are slow (a switch); later ones are not.
            let ms = if k < WARM { 100.0 } else { 1.0 };
            c.record(1, r, 1, ms);
        }
        let r = c.rates(1);
        assert_eq!(r.ar, None);
        assert!((r.draft.unwrap_or(0.0) - 1.0).abs() < 1e-9, "{r:?}");
        // Concurrencies 3 and 4 share a bucket; 5 does not.
        c.record(3, Regime::Ar, 4, 1.0);
        assert_eq!(c.rates(4), c.rates(3));
        assert_eq!(
            c.rates(5),
            RegimeRates {
                draft: None,
                ar: None
            }
        );
    }
}
