//! The block policy's beliefs rebuilt from a recording: its `learned` events folded
//! through `Beliefs::observe` from the start the first one carries, as the engine
//! folded them while it ran. `trace beliefs` prints what they hold.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use anyhow::{bail, Result};

use crate::engine::events::DecodeEvent;
use crate::engine::policy::{Beliefs, BeliefsStart, Observation, SurvivalTables};

/// Beliefs rebuilt from a recording, and what they were rebuilt from.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    pub beliefs: Beliefs,
    pub start: BeliefsStart,
    /// The engine's steps the recording holds (a speculation round each, or a
    /// diffusion step).
    pub steps: u64,
    pub observations: usize,
    /// Concurrencies the speculation rounds ran at.
    pub loads: BTreeSet<usize>,
}

/// The beliefs at the end of `events` (`None`: they hold no `learned` event, as a
/// recording made before event version 6). A recording that starts after the
/// engine's first step cannot say what was learned before it, and one that skips a
/// step has lost what that step taught: both are refused.
pub fn rebuild<'a>(events: impl IntoIterator<Item = &'a DecodeEvent>) -> Result<Option<Rebuilt>> {
    rebuild_until(events, None)
}

/// The beliefs after the engine's step `until` (at the end when `None`).
pub fn rebuild_until<'a>(
    events: impl IntoIterator<Item = &'a DecodeEvent>,
    until: Option<u64>,
) -> Result<Option<Rebuilt>> {
    let mut rebuilt: Option<Rebuilt> = None;
    for e in events {
        if until.is_some_and(|u| rebuilt.as_ref().is_some_and(|r| r.steps >= u)) {
            break;
        }
        let DecodeEvent::Learned {
            step,
            start,
            observations,
        } = e
        else {
            continue;
        };
        // A start begins an engine's beliefs anew (step 1 of a new engine).
        if let Some(start) = start {
            rebuilt = Some(Rebuilt {
                beliefs: Beliefs::from_start(tables_named(&start.tables)?, start),
                start: (**start).clone(),
                steps: 0,
                observations: 0,
                loads: BTreeSet::new(),
            });
        }
        let Some(r) = &mut rebuilt else {
            bail!(
                "the recording starts at the engine's step {step}: what the block policy \
                 learned before it is not in the file (record from the engine's start, \
                 `--record`, to rebuild its beliefs)"
            );
        };
        if *step != r.steps + 1 {
            bail!(
                "`learned` of step {step} follows step {}: the steps between are missing, \
                 and what they taught with them",
                r.steps
            );
        }
        for o in observations {
            if let Observation::RoundEnded { concurrency, .. } = o {
                r.loads.insert(*concurrency);
            }
            r.beliefs.observe(o);
        }
        r.steps = *step;
        r.observations += observations.len();
    }
    if let (Some(u), Some(r)) = (until, &rebuilt) {
        if r.steps < u {
            bail!(
                "the recording holds {} steps of the engine, not {u}",
                r.steps
            );
        }
    }
    Ok(rebuilt)
}

/// A price in ms, to four significant digits.
fn price(x: f64) -> String {
    if x == 0.0 || x.abs() >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.3e}")
    }
}

/// The survival tables this build ships under `source`.
fn tables_named(source: &str) -> Result<SurvivalTables> {
    let shipped = [SurvivalTables::builtin(), crate::sim::survival_tables()];
    match shipped.into_iter().find(|t| t.source == source) {
        Some(t) => Ok(t),
        None => bail!(
            "the recording's beliefs start from the survival tables `{source}`, which \
             this build does not ship"
        ),
    }
}

impl Rebuilt {
    /// What the beliefs hold, for people: prices, block sizes' calibration, branch
    /// rows' hit rates, the regimes' measured rates.
    pub fn report(&self) -> String {
        let b = &self.beliefs;
        let s = &self.start;
        let mut out = String::new();
        let how = if s.learn { "refitted online" } else { "fixed" };
        let clock = match s.clock {
            crate::engine::Clock::Wall => "this machine's wall clock",
            crate::engine::Clock::Priced => "the profile's prices",
        };
        let _ = writeln!(
            out,
            "beliefs rebuilt from {} steps of the engine ({} observations)",
            self.steps, self.observations
        );
        let _ = writeln!(out, "prices: {} ({how}), timed by {clock}", s.cost.source);
        let _ = writeln!(out, "rounds took {:.1} ms in all", b.elapsed_ms());
        if s.learn {
            let names = [
                "fixed",
                "per row",
                "per token",
                "per token×ctx",
                "per draft token",
                "per row×ctx",
            ];
            let now = b.cost().coefficients();
            let was = s.cost.coefficients();
            let _ = writeln!(out, "prices learned (ms), the profile's in brackets:");
            for ((n, x), y) in names.iter().zip(now).zip(was) {
                let _ = writeln!(out, "  {n:<16} {} ({})", price(x), price(y));
            }
            let _ = writeln!(
                out,
                "  {:<16} {}",
                "per round",
                price(b.cost().per_round_ms)
            );
        }
        let _ = writeln!(
            out,
            "block sizes: judged rounds that measured each (its own or a larger block's), \
             tokens advanced ÷ the tables' prediction"
        );
        for size in b.tables().blocks().into_iter().filter(|&x| x >= 2) {
            let (n, pred, real) = b.measured(size);
            let ratio = if pred > 0.0 {
                format!("{:.3}", real / pred)
            } else {
                "—".to_string()
            };
            let rounds = if n == 1 { "round " } else { "rounds" };
            let _ = writeln!(out, "  B = {size:<3} {n:>6} {rounds}  ×{ratio}");
        }
        let judged: Vec<_> = b.hits().judged().collect();
        if !judged.is_empty() {
            let _ = writeln!(out, "branch rows: hits ÷ rows built, and P(hit) learned");
            for (kind, block, c) in judged {
                let _ = writeln!(
                    out,
                    "  {:<4} B = {block:<3} {:>5} ÷ {:<6} P = {:.3}",
                    kind.label(),
                    c.hits,
                    c.built,
                    b.hits().block_rate(kind, block)
                );
            }
        }
        let show = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r:.3}"));
        // The regimes keep their rates per bucket of loads: 1, 2, 3–4, 5–8, …
        let buckets: BTreeSet<usize> = self
            .loads
            .iter()
            .map(|c| c.max(&1).next_power_of_two())
            .collect();
        let regimes: Vec<String> = buckets
            .into_iter()
            .filter_map(|c| {
                let r = b.regime_rates(c);
                let loads = if c <= 2 {
                    c.to_string()
                } else {
                    format!("{}–{c}", c / 2 + 1)
                };
                (r.draft.is_some() || r.ar.is_some()).then(|| {
                    format!(
                        "  C = {loads:<7} drafting {} · AR steps {}",
                        show(r.draft),
                        show(r.ar)
                    )
                })
            })
            .collect();
        if !regimes.is_empty() {
            let _ = writeln!(out, "regimes: tokens per ms measured lately");
            for line in regimes {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }
}
