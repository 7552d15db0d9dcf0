//! The cost model refitted from this run's own forwards. A profile times isolated
//! forwards of equal rows; decoding runs ragged rows back to back, draft rows through
//! the LoRA, on a machine whose speed drifts. Each forward (with its signals) is one
//! more point of a decayed, relative-error least-squares fit, pulled toward the
//! profile's coefficients (a ridge prior) so that directions the run never explores
//! (a block size never chosen) keep the profile's prices. The scheduler's own work
//! between forwards is a running mean per round.

use super::{solve, CostModel, ForwardShape};

/// Coefficients learned online: all but the per-row context price, which stays the
/// profile's (a run's contexts grow with its tokens, so a run cannot tell it from the
/// per-token context price).
const LEARNED: usize = 5;

/// Weight of the profile prior, in forwards' worth of evidence per coefficient.
const PRIOR_FORWARDS: f64 = 1.0;
/// Per-forward decay of old evidence (about the last 300 forwards count).
const DECAY: f64 = 0.997;
/// Forwards before the fit replaces the profile.
const WARMUP: usize = 8;
/// Per-round decay of the running mean of the work outside the forwards.
const ROUND_DECAY: f64 = 0.97;

/// A cost model that learns from measured forwards.
#[derive(Debug, Clone)]
pub struct OnlineCost {
    prior: CostModel,
    current: CostModel,
    learn: bool,
    ata: [[f64; LEARNED]; LEARNED],
    atb: [f64; LEARNED],
    observed: usize,
    rounds: usize,
}

impl OnlineCost {
    pub fn new(prior: CostModel) -> Self {
        Self {
            current: prior.clone(),
            prior,
            learn: true,
            ata: [[0.0; LEARNED]; LEARNED],
            atb: [0.0; LEARNED],
            observed: 0,
            rounds: 0,
        }
    }

    /// With `false` the profile is used as it is (reproducible choices, for tests).
    pub fn learning(mut self, on: bool) -> Self {
        self.learn = on;
        self
    }

    /// The model decisions use now.
    pub fn model(&self) -> &CostModel {
        &self.current
    }

    /// Whether it learns (and so whether exploring other choices tells it anything).
    pub fn is_learning(&self) -> bool {
        self.learn
    }

    /// Forwards learned from.
    pub fn observed(&self) -> usize {
        self.observed
    }

    /// One measured forward.
    pub fn observe(&mut self, shape: &ForwardShape, ms: f64) {
        if !(self.learn && ms.is_finite() && ms > 0.0) {
            return;
        }
        let x = shape.features();
        let w = 1.0 / (ms * ms);
        // What the fixed per-row context price explains is taken out first.
        let y = ms - self.prior.per_row_ctx_ms * x[LEARNED];
        for i in 0..LEARNED {
            for j in 0..LEARNED {
                self.ata[i][j] = DECAY * self.ata[i][j] + w * x[i] * x[j];
            }
            self.atb[i] = DECAY * self.atb[i] + w * x[i] * y;
        }
        self.observed += 1;
        if self.observed >= WARMUP {
            if let Some(m) = self.refit() {
                self.current = m;
            }
        }
    }

    /// One round's time outside its forwards (the forwards are `observe`d apart).
    pub fn observe_round(&mut self, outside_ms: f64) {
        if !(self.learn && outside_ms.is_finite() && outside_ms >= 0.0) {
            return;
        }
        let m = &mut self.current.per_round_ms;
        *m = if self.rounds == 0 {
            outside_ms
        } else {
            ROUND_DECAY * *m + (1.0 - ROUND_DECAY) * outside_ms
        };
        self.rounds += 1;
    }

    /// Ridge toward the prior: each coefficient's deviation is weighed relative to its
    /// own scale.
    fn refit(&self) -> Option<CostModel> {
        let theta0 = self.prior.coefficients();
        let typical = self.prior.forward_ms(1, 8, 256).max(1e-3);
        let scale = |j: usize| {
            // The draft surcharge, 0 in a profile, against the per-token price.
            let s = if j == 4 { theta0[2] } else { theta0[j] };
            s.max(typical * 1e-3)
        };
        let mut a = self.ata;
        let mut b = self.atb;
        for j in 0..LEARNED {
            let k = PRIOR_FORWARDS / (scale(j) * scale(j));
            a[j][j] += k;
            b[j] += k * theta0[j];
        }
        let w = solve(a, b)?;
        if w.iter().any(|x| !x.is_finite()) {
            return None;
        }
        Some(CostModel {
            fixed_ms: w[0].max(0.0),
            per_row_ms: w[1].max(0.0),
            per_token_ms: w[2].max(0.0),
            per_token_ctx_ms: w[3].max(0.0),
            per_draft_token_ms: w[4].max(0.0),
            per_row_ctx_ms: self.prior.per_row_ctx_ms,
            per_round_ms: self.current.per_round_ms,
            source: format!("{} + {} forwards", self.prior.source, self.observed),
            // Learned prices are this run's, linear at every load.
            sweep: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prior() -> CostModel {
        CostModel {
            fixed_ms: 1.0,
            per_row_ms: 0.5,
            per_token_ms: 0.2,
            per_token_ctx_ms: 1e-4,
            per_row_ctx_ms: 0.0,
            per_draft_token_ms: 0.0,
            per_round_ms: 0.0,
            source: "test".into(),
            sweep: None,
        }
    }

    fn shape(rows: usize, t: usize, ctx: usize, draft: bool) -> ForwardShape {
        ForwardShape {
            rows,
            tokens: rows * t,
            token_ctx: rows * t * ctx,
            row_ctx: rows * ctx,
            draft_tokens: if draft { rows * t } else { 0 },
        }
    }

    #[test]
    fn learns_the_machine_it_runs_on() {
        // The machine: cheaper rows than the profile says, and drafts cost extra.
        let truth = CostModel {
            fixed_ms: 0.8,
            per_row_ms: 0.2,
            per_token_ms: 0.25,
            per_token_ctx_ms: 1e-4,
            per_row_ctx_ms: 0.0,
            per_draft_token_ms: 0.1,
            per_round_ms: 0.0,
            source: "truth".into(),
            sweep: None,
        };
        let mut c = OnlineCost::new(prior());
        // A run's forwards: AR steps of 16 requests, drafts and verifies of 4 and of 1.
        let shapes = [
            (16, 1, false),
            (4, 8, true),
            (4, 8, false),
            (1, 8, true),
            (1, 8, false),
        ];
        for k in 0..400 {
            let (rows, t, draft) = shapes[k % shapes.len()];
            let s = shape(rows, t, 100 + k, draft);
            c.observe(&s, truth.predict(&s));
        }
        let m = c.model();
        for &(rows, t, draft) in &shapes {
            let s = shape(rows, t, 300, draft);
            let (got, want) = (m.predict(&s), truth.predict(&s));
            assert!((got - want).abs() / want < 0.05, "{s:?}: {got} vs {want}");
        }
        assert!(m.per_draft_token_ms > 0.05, "{m:?}");
        assert!(m.source.ends_with("+ 400 forwards"), "{}", m.source);
    }

    #[test]
    fn unexplored_directions_keep_the_profile() {
        let mut c = OnlineCost::new(prior());
        // Only 1-token rows at one concurrency: nothing says what 32 tokens cost.
        for _ in 0..100 {
            let s = shape(8, 1, 200, false);
            c.observe(&s, prior().predict(&s));
        }
        let wide = shape(1, 32, 200, false);
        let (got, want) = (c.model().predict(&wide), prior().predict(&wide));
        assert!((got - want).abs() / want < 0.05, "{got} vs {want}");
    }

    #[test]
    fn work_between_forwards_is_a_running_mean_per_round() {
        let mut c = OnlineCost::new(prior());
        assert_eq!(c.model().per_round_ms, 0.0);
        c.observe_round(2.0);
        assert_eq!(c.model().per_round_ms, 2.0);
        for _ in 0..300 {
            c.observe_round(0.5);
        }
        assert!((c.model().per_round_ms - 0.5).abs() < 1e-3);
        // A refit from forwards keeps it, and it is part of every round's cost.
        for k in 0..20 {
            let s = shape(1, 8, 100 + k, false);
            c.observe(&s, prior().predict(&s));
        }
        let m = c.model();
        assert!((m.per_round_ms - 0.5).abs() < 1e-3);
        let mut without = m.clone();
        without.per_round_ms = 0.0;
        for b in [1, 8] {
            let extra = m.round_ms(1, b, 100) - without.round_ms(1, b, 100);
            assert!((extra - m.per_round_ms).abs() < 1e-9);
        }
        let mut off = OnlineCost::new(prior()).learning(false);
        off.observe_round(3.0);
        assert_eq!(off.model().per_round_ms, 0.0);
    }

    #[test]
    fn off_or_bad_times_change_nothing() {
        let mut c = OnlineCost::new(prior()).learning(false);
        for _ in 0..50 {
            c.observe(&shape(1, 8, 10, false), 100.0);
        }
        assert_eq!(c.model(), &prior());
        let mut c = OnlineCost::new(prior());
        for ms in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
            c.observe(&shape(1, 8, 10, false), ms);
        }
        assert_eq!((c.observed(), c.model()), (0, &prior()));
    }
}
