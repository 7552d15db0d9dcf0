//! The strategies: how each request's block size is chosen, as a value
//! ([`Strategy`]) and one pure decision function of the beliefs, the members of the
//! round being planned, the batching and the ablation ([`decide`]). What the decision
//! changes in the beliefs (the sizes it ran, the regime's trial) comes back as a
//! [`RoundPlan`] the scheduler reports with `Observation::Decided`.

use super::beliefs::Beliefs;
use super::joint::{self, RoundOption};
use super::regime::{Regime, RegimeTurn};
use super::rows::RowLoad;
use super::tables::cold_start;
use super::{ratio_rule, Decision, Learned, Member};
use crate::engine::ablation::Ablation;
use crate::engine::events::{BlockCandidate, BlockDecision, Mode, Rule};
use crate::engine::options::{Batching, Blocks};

/// How a request's block size is chosen, from its options and the round's batching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy<'a> {
    /// AR greedy: a block of 1, no decision to show.
    Ar,
    /// A fixed block: LinearSS, and RecGuide without adaptive blocks.
    Fixed(usize),
    /// The reference's per-request ratio rule over these sizes: requests in their own
    /// buckets (`Batching::ByBlock`), or a non-RecGuide mode given adaptive blocks.
    Ratio(&'a [usize]),
    /// The adaptive requests of a packed round choose together over these sizes: the
    /// paper preset (8, 16, 32), the throughput preset (with AR steps and 4).
    Joint(&'a [usize]),
}

impl<'a> Strategy<'a> {
    /// The strategy of a request with `options` in a round batched as `batching`.
    pub fn of(options: &'a crate::engine::options::DecodeOptions, batching: Batching) -> Self {
        if options.mode == Mode::Ar {
            return Strategy::Ar;
        }
        match (&options.blocks, options.adaptive_blocks()) {
            (Blocks::Fixed(b), _) => Strategy::Fixed(*b),
            (Blocks::Adaptive(_), Some(set)) if batching.packs() => Strategy::Joint(set),
            (Blocks::Adaptive(set), _) => Strategy::Ratio(set),
        }
    }
}

/// A round's decisions, with what they change in the beliefs.
#[derive(Debug, Clone)]
pub struct RoundPlan {
    /// Each member's block size and why, in the members' order.
    pub decisions: Vec<Decision>,
    /// The joint choice of a packed round, if one was made.
    pub(super) joint: Option<JointTurn>,
}

/// What a jointly chosen round ran.
#[derive(Debug, Clone)]
pub(super) struct JointTurn {
    /// The sizes its adaptive members run (their last run is now).
    pub(super) blocks: Vec<usize>,
    /// The measured regime's turn, where it was asked.
    pub(super) regime: Option<RegimeTurn>,
}

/// Block sizes for every member of a round. Where the round shares its forwards
/// (`batching` packs) adaptive requests choose together; otherwise each by the
/// per-request rule (the reference's buckets). A carried round keeps its size.
/// `ablation` says what of RecGuide is turned off (bench's ablations; shipped
/// otherwise).
pub fn decide(
    beliefs: &Beliefs,
    members: &[Member],
    batching: Batching,
    ablation: &Ablation,
) -> RoundPlan {
    let p = Planner {
        b: beliefs,
        batching,
        ablation,
        concurrency: members.len(),
        rides: batching == Batching::Packed,
    };
    let mut out: Vec<Option<Decision>> = vec![None; members.len()];
    // Adaptive requests without a held block choose among their action space.
    let mut open: Vec<(usize, Vec<RoundOption>)> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        match Strategy::of(m.options, batching) {
            Strategy::Joint(set) if !m.holds() => {
                let opts = p.options_of(m, set);
                if opts.is_empty() {
                    out[i] = Some(p.per_request(m));
                } else {
                    open.push((i, opts));
                }
            }
            _ => out[i] = Some(p.per_request(m)),
        }
    }
    let joint = (!open.is_empty()).then(|| {
        let (chosen, turn) = p.choose_jointly(members, &open);
        for (i, d) in chosen {
            out[i] = Some(d);
        }
        turn
    });
    // What an AR step makes here, on this machine's costs (not a GPU profile's).
    let here = beliefs.machine().at_load(p.concurrency);
    let decisions = out
        .into_iter()
        .zip(members)
        .map(|(d, m)| {
            let (b, why) = d.unwrap_or((1, None));
            let (b, why) = if b > m.room {
                (m.room.max(1), Some(BlockDecision::plain(Rule::Context)))
            } else {
                (b, why)
            };
            let ar_rate = Some(here.ar_rate(p.concurrency, m.ctx));
            (b, why.map(|w| BlockDecision { ar_rate, ..w }))
        })
        .collect();
    RoundPlan { decisions, joint }
}

/// One round's decision in progress: the beliefs and the load.
struct Planner<'a> {
    b: &'a Beliefs,
    batching: Batching,
    ablation: &'a Ablation,
    concurrency: usize,
    /// Fresh drafts ride the shared forward (`Batching::Packed`): a row's hit spares
    /// this request a forward's share whatever the others do.
    rides: bool,
}

impl Planner<'_> {
    fn load(&self, m: &Member, block: usize) -> RowLoad {
        RowLoad {
            concurrency: self.concurrency,
            ctx: m.ctx,
            block,
            rides: self.rides,
        }
    }

    fn option(&self, m: &Member, b: usize, drafts: bool) -> RoundOption {
        let o = m.options;
        let rows = (o.overlap_on(), self.ablation.prices_rows(o));
        self.b.option(m.history, rows, self.load(m, b), drafts)
    }

    /// An option per size of the action space offered at this load that the tables
    /// can value and the window holds, capped by the reference's concurrency mapping
    /// before any history.
    fn options_of(&self, m: &Member, set: &[usize]) -> Vec<RoundOption> {
        let cap = if m.history.is_empty() {
            cold_start(self.concurrency)
        } else {
            usize::MAX
        };
        let mut blocks = self.b.offered(set, self.concurrency, m.ctx);
        blocks.sort_unstable();
        blocks.dedup();
        blocks
            .into_iter()
            .filter(|&b| b <= cap && b <= m.room && self.b.tables().covers(b))
            .map(|b| self.option(m, b, b > 1))
            .collect()
    }

    /// The per-request block size: a held block's, fixed, or the ratio rule.
    fn per_request(&self, m: &Member) -> Decision {
        if let Some(len) = m.carried {
            return (len, None);
        }
        if let Some(len) = m.reused {
            // A reused block cost no draft forward: verify it rather than drop it for
            // an AR step. In lockstep the adaptive rule may shorten it; where drafts
            // ride, verifying it whole costs this round only its verify tokens, so it
            // is verified whole.
            if self.rides {
                return (len, Some(BlockDecision::plain(Rule::Reused)));
            }
            let want = match m.options.adaptive_blocks() {
                Some(set) => self.ratio(m, set).0,
                None => m.options.fixed_block().unwrap_or(len),
            };
            let b = if want == 1 { len } else { len.min(want) };
            return (b, Some(BlockDecision::plain(Rule::Reused)));
        }
        match Strategy::of(m.options, self.batching) {
            Strategy::Ar => (1, None),
            Strategy::Fixed(b) => (b, Some(BlockDecision::plain(Rule::Fixed))),
            Strategy::Ratio(set) | Strategy::Joint(set) => {
                let (b, why) = self.ratio(m, set);
                (b, Some(why))
            }
        }
    }

    /// The ratio rule ([`ratio_rule`]) over the sizes of `blocks` offered at this load,
    /// with what the run has learned.
    fn ratio(&self, m: &Member, blocks: &[usize]) -> (usize, BlockDecision) {
        let offered = self.b.offered(blocks, self.concurrency, m.ctx);
        let o = m.options;
        ratio_rule(
            m.history,
            self.b.tables(),
            &self.b.cost_at(self.concurrency),
            if offered.is_empty() { blocks } else { &offered },
            self.concurrency,
            m.ctx,
            &Learned {
                rows_ms: &|b| {
                    self.b.rows_ms(
                        o.overlap_on(),
                        self.ablation.prices_rows(o),
                        self.load(m, b),
                    )
                },
                calibration: &|b| self.b.calibration(b, m.history),
            },
        )
    }

    /// The joint choice of a packed round's open members, the regime, exploration.
    fn choose_jointly(
        &self,
        members: &[Member],
        open: &[(usize, Vec<RoundOption>)],
    ) -> (Vec<(usize, Decision)>, JointTurn) {
        let concurrency = self.concurrency;
        // Everyone in the round counts in its cost, the members with one option too.
        let mut options: Vec<Vec<RoundOption>> = Vec::with_capacity(members.len());
        let mut slot = vec![None; members.len()];
        for (k, (i, opts)) in open.iter().enumerate() {
            slot[*i] = Some(k);
            options.push(opts.clone());
        }
        for (i, m) in members.iter().enumerate() {
            if slot[i].is_none() {
                let (b, _) = self.per_request(m);
                // Where drafts ride, every member is priced for a whole draft → verify
                // cycle, holding a block this round or not: its rows' expected saving
                // (`rows_ms`) already credits the draft a hit spares, so leaving out
                // the draft a held block spared now counts that saving twice and
                // overrates the round's tokens per ms, which favoured small blocks
                // (issue 52). In lockstep a holder still sits out the round's draft
                // forward, which the joint choice's skip path weighs; the ablation
                // keeps its pricing.
                let drafts = b > 1 && (self.rides || !m.holds());
                options.push(vec![self.option(m, b.min(m.room.max(1)), drafts)]);
            }
        }
        let cost = self.b.cost_at(concurrency).into_owned();
        let ride = self.rides;
        let mut choice = joint::choose(&options, &cost, ride);
        let can_step = |k: usize| options[k].iter().position(|o| o.block == 1);
        let steppers: Vec<usize> = (0..open.len()).filter(|&k| can_step(k).is_some()).collect();
        // The measured regime (drafting against AR steps, whichever measured more
        // tokens per ms) only where the costs are this machine's: under a fixed
        // profile's prices the joint choice already weighs each request's AR step at
        // those prices, and trials timed by the profile's clock only cost rounds.
        let turn = (!steppers.is_empty() && self.b.learns())
            .then(|| self.b.regimes().next(concurrency, self.b.clock_ms()));
        let regime = turn.map_or(Regime::Draft, |t| t.regime);
        let mut explored = None;
        if regime == Regime::Ar {
            for &k in &steppers {
                if let Some(j) = can_step(k) {
                    choice.picks[k] = j;
                }
            }
            choice.rate = joint::rate_of(&options, &choice.picks, &cost, ride);
        } else {
            let multi: Vec<usize> = (0..open.len()).filter(|&k| options[k].len() > 1).collect();
            if !multi.is_empty() && self.b.learns() {
                // One request (in turn) measures the most overdue size.
                let k = multi[self.b.rounds() as usize % multi.len()];
                let since = |b: usize| self.b.since_ran(b);
                if let Some(j) = joint::explore(&options[k], choice.picks[k], &cost, since) {
                    choice.picks[k] = j;
                    explored = Some(k);
                }
            }
        }
        // Each option's cost as the joint choice weighed it: a drafting option riding
        // the shared forward pays its share of one.
        let share = if ride {
            joint::ride_share(&cost, options.len())
        } else {
            0.0
        };
        let in_trial = turn.is_some_and(|t| t.trial);
        let mut out = Vec::with_capacity(open.len());
        let mut blocks = Vec::with_capacity(open.len());
        for (k, (i, opts)) in open.iter().enumerate() {
            let o = opts[choice.picks[k]];
            blocks.push(o.block);
            let h = members[*i].history;
            let stepped = regime == Regime::Ar && o.block == 1;
            let rule = if explored == Some(k) {
                Rule::Explore
            } else if stepped && in_trial {
                Rule::ArTrial
            } else if stepped {
                Rule::ArRegime
            } else if h.is_empty() {
                Rule::ColdStart
            } else {
                Rule::Round
            };
            // An AR step of the AR regime: the measured rates say why, not V − λ·T.
            let candidates = if stepped {
                Vec::new()
            } else {
                opts.iter()
                    .map(|o| BlockCandidate {
                        block: o.block,
                        value: o.value,
                        cost_ms: o.draft_ms + o.verify_ms + if o.drafts() { share } else { 0.0 },
                        rows_ms: o.rows_ms,
                    })
                    .collect()
            };
            let decision = BlockDecision {
                rule,
                signal: h.signal(),
                candidates,
                rate: (!stepped).then_some(choice.rate),
                measured: stepped.then(|| self.b.regimes().rates(concurrency)),
                ar_rate: None,
            };
            out.push((*i, (o.block, Some(decision))));
        }
        (
            out,
            JointTurn {
                blocks,
                regime: turn,
            },
        )
    }
}
