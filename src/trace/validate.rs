//! Every number a recording holds, checked against what its event and the file allow
//! before anything counts or sizes with it: a block is at most `MAX_BLOCK` tokens and
//! a verdict accepts fewer than its block, positions lie inside their block, a
//! request's rounds are at most the file's lines, times are finite. The events' order
//! is `trace::order`'s. The reader calls these per line and reports the line.

use anyhow::{bail, ensure, Result};

use super::summary::Summary;
use super::{SessionEvent, TraceHeader};
use crate::engine::cost::CostModel;
use crate::engine::events::{BlockDecision, BranchOutcome, DecodeEvent, PosView, Tally};
use crate::engine::options::MAX_BLOCK;
use crate::engine::policy::Observation;

/// Longest prompt or answer a recording may state (the largest context there is).
const MAX_TOKENS: usize = 1 << 24;
/// Slowest forward believable, in ms (a day).
const MAX_MS: f64 = 86_400_000.0;
/// Most candidates, branches and ids per entry.
const MAX_LIST: usize = 64;
/// Most requests a round serves (far above any load a machine holds).
const MAX_CONCURRENCY: usize = 1 << 16;
/// Most observations of one engine step: a decision, its forwards, and per request
/// its rows planned and judged, its advance, a spared draft (`MAX_CONCURRENCY` × 4).
const MAX_OBSERVATIONS: usize = 8 + 4 * MAX_CONCURRENCY;

fn finite(what: &str, x: f64) -> Result<()> {
    ensure!(x.is_finite(), "`{what}` is {x}: not a finite number");
    Ok(())
}

fn ms(what: &str, x: f64) -> Result<()> {
    ensure!(
        x.is_finite() && (0.0..=MAX_MS).contains(&x),
        "`{what}` is {x}: not a time in milliseconds"
    );
    Ok(())
}

fn at_most(what: &str, x: usize, max: usize) -> Result<()> {
    ensure!(
        x <= max,
        "`{what}` is {x}: more than {max} is impossible here"
    );
    Ok(())
}

fn block_len(what: &str, n: usize) -> Result<()> {
    ensure!(
        (1..=MAX_BLOCK).contains(&n),
        "`{what}` holds {n} positions: a block has 1 to {MAX_BLOCK}"
    );
    Ok(())
}

/// A probability, or a difference of two (a margin): 0 to 1, with float slack.
fn unit(what: &str, x: f32) -> Result<()> {
    ensure!(
        x.is_finite() && (-0.001..=1.001).contains(&x),
        "`{what}` is {x}: a probability or margin lies in 0 to 1"
    );
    Ok(())
}

fn views(what: &str, v: &[PosView], positions: usize) -> Result<()> {
    at_most(what, v.len(), positions)?;
    for p in v {
        at_most(&format!("{what}.top"), p.top.len(), MAX_LIST)?;
        unit(&format!("{what}.margin"), p.margin)?;
        unit(&format!("{what}.confidence"), p.confidence)?;
        ensure!(
            p.entropy.is_finite() && p.entropy >= -0.001,
            "`{what}.entropy` is {}: an entropy is a non-negative number",
            p.entropy
        );
        for (_, prob) in &p.top {
            ensure!(
                prob.is_finite() && (0.0..=1.001).contains(prob),
                "`{what}.top` holds the probability {prob}"
            );
        }
    }
    Ok(())
}

fn decision(d: &BlockDecision) -> Result<()> {
    at_most("reason.candidates", d.candidates.len(), MAX_LIST)?;
    for c in &d.candidates {
        block_len("reason.candidates.block", c.block)?;
        finite("reason.candidates.value", c.value)?;
        finite("reason.candidates.cost_ms", c.cost_ms)?;
        finite("reason.candidates.rows_ms", c.rows_ms)?;
    }
    for (what, x) in [
        ("reason.signal", d.signal.map(f64::from)),
        ("reason.rate", d.rate),
        ("reason.ar_rate", d.ar_rate),
        ("reason.measured.draft", d.measured.and_then(|m| m.draft)),
        ("reason.measured.ar", d.measured.and_then(|m| m.ar)),
    ] {
        if let Some(x) = x {
            finite(what, x)?;
        }
    }
    Ok(())
}

/// A tally's counts against one another and the file's size (`lines`); `requests`
/// added up into it (each commits its first token at the prefill, without a round).
pub fn tally(t: &Tally, lines: usize, requests: usize) -> Result<()> {
    at_most("rounds", t.rounds, lines)?;
    at_most("accept_hist", t.accept_hist.len(), MAX_BLOCK + 1)?;
    let hist: usize = t
        .accept_hist
        .iter()
        .try_fold(0usize, |a, &n| a.checked_add(n))
        .unwrap_or(usize::MAX);
    ensure!(
        hist == t.rounds,
        "`accept_hist` counts {hist} rounds, `rounds` says {}",
        t.rounds
    );
    let mut in_blocks = 0usize;
    for (&b, &n) in &t.blocks {
        block_len("blocks", b)?;
        in_blocks = in_blocks.saturating_add(n);
    }
    ensure!(
        in_blocks == t.rounds,
        "`blocks` counts {in_blocks} rounds, `rounds` says {}",
        t.rounds
    );
    let per_round = t
        .rounds
        .saturating_mul(MAX_BLOCK)
        .saturating_add(requests.max(1));
    at_most("new_tokens", t.new_tokens, per_round)?;
    at_most("decode_tokens", t.decode_tokens, t.new_tokens)?;
    for (what, n) in [
        ("draft_forwards", t.draft_forwards),
        ("saved_drafts", t.saved_drafts),
        (
            "verify_forwards + fused_forwards",
            t.verify_forwards.saturating_add(t.fused_forwards),
        ),
    ] {
        at_most(what, n, t.rounds)?;
    }
    // Block diffusion: a block takes at most one step per position, and one write.
    at_most("refresh_forwards", t.refresh_forwards, t.rounds)?;
    at_most(
        "denoise_forwards",
        t.denoise_forwards,
        t.refresh_forwards.saturating_mul(MAX_BLOCK),
    )?;
    at_most("ar_judged", t.ar_judged, t.new_tokens)?;
    at_most("ar_agree", t.ar_agree, t.ar_judged)?;
    let diffusion_rows = t.denoise_forwards.saturating_add(t.refresh_forwards);
    at_most(
        "rows",
        t.rows,
        t.rounds.saturating_mul(8).saturating_add(diffusion_rows),
    )?;
    at_most(
        "query_tokens",
        t.query_tokens,
        t.rounds
            .saturating_mul(8 * MAX_BLOCK)
            .saturating_add(diffusion_rows.saturating_mul(MAX_BLOCK)),
    )?;
    for (k, c) in &t.branches {
        at_most(
            &format!("branches.{k}.built"),
            c.built,
            t.rounds.saturating_mul(3),
        )?;
        at_most(&format!("branches.{k}.hits"), c.hits, c.built)?;
    }
    Ok(())
}

/// One engine event of a file of `lines` lines.
#[allow(clippy::too_many_lines)] // one range check per event field, each naming its field
pub fn event(e: &DecodeEvent, lines: usize) -> Result<()> {
    match e {
        DecodeEvent::RequestStarted {
            prompt_tokens,
            max_new_tokens,
            blocks,
            ..
        } => {
            at_most("prompt_tokens", *prompt_tokens, MAX_TOKENS)?;
            at_most("max_new_tokens", *max_new_tokens, MAX_TOKENS)?;
            let sizes = match blocks {
                crate::engine::events::Blocks::Fixed(b) => vec![*b],
                crate::engine::events::Blocks::Adaptive(s) => s.clone(),
            };
            at_most("blocks", sizes.len(), MAX_LIST)?;
            for b in sizes {
                block_len("blocks", b)?;
            }
        }
        DecodeEvent::Prefilled {
            prompt_tokens,
            ms: t,
            ..
        } => {
            at_most("prompt_tokens", *prompt_tokens, MAX_TOKENS)?;
            ms("ms", *t)?;
        }
        DecodeEvent::BlockChosen {
            block,
            round,
            reason,
            ..
        } => {
            block_len("block", *block)?;
            at_most("round", *round, lines)?;
            decision(reason)?;
        }
        DecodeEvent::Drafted {
            block,
            margins,
            risky,
            detail,
            round,
            rows,
            ..
        } => {
            block_len("block", block.len())?;
            for m in margins {
                unit("margins", *m)?;
            }
            if let Some(r) = rows {
                for (what, x) in [
                    ("rows.kept.added_ms", r.kept.added_ms),
                    ("rows.dropped.added_ms", r.dropped.added_ms),
                    ("rows.share_ms", r.share_ms),
                    ("rows.saving_ms", r.saving_ms),
                ] {
                    ms(what, x)?;
                }
                for (what, x) in [
                    ("rows.kept.saves", r.kept.saves),
                    ("rows.dropped.saves", r.dropped.saves),
                ] {
                    ensure!(
                        x.is_finite() && (0.0..=8.0).contains(&x),
                        "`{what}` is {x}: expected drafts saved, a sum of a few probabilities"
                    );
                }
                at_most("rows.kept.rows", r.kept.rows, 8)?;
                at_most("rows.dropped.rows", r.dropped.rows, 8)?;
            }
            at_most("round", *round, lines)?;
            ensure!(
                margins.len() < block.len(),
                "`margins` has {} entries for a block of {}",
                margins.len(),
                block.len()
            );
            for r in risky {
                ensure!(
                    (1..block.len()).contains(r),
                    "`risky` names position {r}, outside the block of {}",
                    block.len()
                );
            }
            views("detail", detail, block.len())?;
        }
        DecodeEvent::BranchesBuilt {
            branches, round, ..
        } => {
            at_most("round", *round, lines)?;
            at_most("branches", branches.len(), 8)?;
            for b in branches {
                at_most("branches.at", b.at, MAX_BLOCK)?;
                at_most("branches.tokens", b.tokens, 2 * MAX_BLOCK)?;
                at_most("branches.block", b.block.len(), MAX_BLOCK)?;
            }
        }
        DecodeEvent::Verified {
            accepted,
            first_reject,
            verifier_tokens,
            detail,
            round,
            ..
        } => {
            let n = verifier_tokens.len();
            block_len("verifier_tokens", n)?;
            at_most("round", *round, lines)?;
            ensure!(
                *accepted < n,
                "`accepted` is {accepted}, but the block has {n} positions (at most {} drafts)",
                n - 1
            );
            let want = (*accepted + 1 < n).then_some(*accepted + 1);
            if *first_reject != want {
                bail!(
                    "`first_reject` is {first_reject:?} but {accepted} accepted of {} drafts means {want:?}",
                    n - 1
                );
            }
            views("detail", detail, n)?;
        }
        DecodeEvent::BranchResolved { outcome, round, .. } => {
            at_most("round", *round, lines)?;
            if let BranchOutcome::Hit { index, .. } = outcome {
                at_most("outcome.index", *index, 7)?;
            }
        }
        DecodeEvent::Denoised {
            round,
            step,
            canvas,
            positions,
            confidence,
            ..
        } => {
            at_most("round", *round, lines)?;
            block_len("canvas", canvas.len())?;
            ensure!(
                (1..=canvas.len()).contains(step),
                "`step` is {step}: steps count from 1 and a canvas of {} takes at most {}",
                canvas.len(),
                canvas.len()
            );
            let mut seen = positions.clone();
            seen.sort_unstable();
            seen.dedup();
            ensure!(
                seen.len() == positions.len(),
                "`positions` names a position twice"
            );
            ensure!(
                !positions.is_empty() && positions.len() == confidence.len(),
                "`positions` has {} entries and `confidence` {}: a step commits at least one position, each with its probability",
                positions.len(),
                confidence.len()
            );
            for &k in positions {
                ensure!(
                    canvas.get(k).is_some_and(Option::is_some),
                    "`positions` names {k}, which the canvas of {} does not hold a token at",
                    canvas.len()
                );
            }
            for c in confidence {
                unit("confidence", *c)?;
            }
        }
        DecodeEvent::BlockWritten {
            round,
            block,
            steps,
            ar,
            ..
        } => {
            at_most("round", *round, lines)?;
            block_len("block", block.len())?;
            ensure!(
                steps.len() == block.len() && ar.len() == block.len(),
                "`steps` has {} entries and `ar` {} for a block of {}",
                steps.len(),
                ar.len(),
                block.len()
            );
            for &s in steps {
                ensure!(
                    (1..=block.len()).contains(&s),
                    "`steps` holds {s}: a position is committed by one of the block's {} steps",
                    block.len()
                );
            }
        }
        DecodeEvent::Committed {
            tokens,
            origins,
            round,
            ..
        } => {
            at_most("round", *round, lines)?;
            at_most("tokens", tokens.len(), MAX_BLOCK)?;
            ensure!(
                origins.len() == tokens.len(),
                "`origins` has {} entries for {} tokens",
                origins.len(),
                tokens.len()
            );
        }
        DecodeEvent::Forward {
            rows,
            query_tokens,
            requests,
            ms: t,
            ..
        } => {
            ms("ms", *t)?;
            at_most("requests", *requests, lines)?;
            at_most("rows", *rows, requests.saturating_mul(8).max(8))?;
            at_most("query_tokens", *query_tokens, MAX_TOKENS.saturating_mul(8))?;
        }
        DecodeEvent::RequestFinished { stats, .. } => {
            at_most("stats.prompt_tokens", stats.prompt_tokens, MAX_TOKENS)?;
            tally(&stats.tally, lines, 1)?;
            for (what, s) in [
                ("stats.prefill_secs", stats.prefill_secs),
                ("stats.decode_secs", stats.decode_secs),
            ] {
                ms(what, s * 1e3)?;
            }
        }
        DecodeEvent::Learned {
            step,
            start,
            observations,
        } => {
            // The engine's steps and the requests they served may predate the
            // recording (one begun mid-session): bounded by constants, not the file.
            ensure!(*step >= 1, "`step` is 0: the engine's steps count from 1");
            at_most("observations", observations.len(), MAX_OBSERVATIONS)?;
            if let Some(s) = start {
                cost_model("start.cost", &s.cost)?;
            }
            for (k, o) in observations.iter().enumerate() {
                observation(&format!("observations.{k}"), o)?;
            }
        }
        DecodeEvent::EngineState { .. } | DecodeEvent::Error { .. } => {}
    }
    Ok(())
}

/// One observation of a `learned` event.
fn observation(at: &str, o: &Observation) -> Result<()> {
    let field = |f: &str| format!("{at}.{f}");
    match o {
        Observation::Decided { ran, .. } => {
            // Each block size once.
            at_most(&field("ran"), ran.len(), MAX_BLOCK)?;
            for &b in ran {
                block_len(&field("ran"), b)?;
            }
        }
        Observation::Forward {
            shape,
            wall_ms,
            forward_ms,
            modeled_ms,
        } => {
            for (f, x) in [
                ("wall_ms", *wall_ms),
                ("forward_ms", *forward_ms),
                ("modeled_ms", *modeled_ms),
            ] {
                ms(&field(f), x)?;
            }
            at_most(&field("shape.rows"), shape.rows, MAX_CONCURRENCY * 8)?;
            at_most(&field("shape.tokens"), shape.tokens, MAX_TOKENS)?;
            at_most(
                &field("shape.draft_tokens"),
                shape.draft_tokens,
                shape.tokens,
            )?;
        }
        Observation::RowsPlanned { block, kinds } => {
            block_len(&field("block"), *block)?;
            at_most(&field("kinds"), kinds.len(), MAX_LIST)?;
        }
        Observation::Spared { concurrency, .. } => {
            at_most(&field("concurrency"), *concurrency, MAX_CONCURRENCY)?;
        }
        Observation::Advanced {
            block,
            advance,
            signal,
            stratum,
        } => {
            block_len(&field("block"), *block)?;
            at_most(&field("advance"), *advance, *block)?;
            if let Some(s) = signal {
                ensure!(s.is_finite() && *s >= 0.0, "`{}` is {s}", field("signal"));
            }
            if let Some(s) = stratum {
                ensure!(
                    is_stratum(s),
                    "`{}` is `{}`: a stratum is b{{B}}_full or b{{B}}_partial",
                    field("stratum"),
                    crate::output::printable(&s.chars().take(40).collect::<String>())
                );
            }
        }
        Observation::RowsJudged { built, hit } => {
            at_most(&field("built"), built.len(), MAX_LIST)?;
            if let Some(h) = hit {
                ensure!(
                    *h < built.len(),
                    "`{}` is {h} of {} rows",
                    field("hit"),
                    built.len()
                );
            }
        }
        Observation::RoundEnded {
            wall_ms,
            modeled_ms,
            concurrency,
            ..
        } => {
            at_most(&field("concurrency"), *concurrency, MAX_CONCURRENCY)?;
            ms(&field("wall_ms"), *wall_ms)?;
            ms(&field("modeled_ms"), *modeled_ms)?;
        }
    }
    Ok(())
}

/// `b{B}_full` or `b{B}_partial` (`policy::stratum`).
fn is_stratum(s: &str) -> bool {
    let Some((b, how)) = s.strip_prefix('b').and_then(|r| r.split_once('_')) else {
        return false;
    };
    b.parse::<usize>()
        .is_ok_and(|b| (1..=MAX_BLOCK).contains(&b))
        && matches!(how, "full" | "partial")
}

/// A cost model's coefficients: finite and not negative.
fn cost_model(at: &str, c: &CostModel) -> Result<()> {
    let prices = c.coefficients().into_iter().chain([c.per_round_ms]);
    for x in prices {
        ensure!(
            x.is_finite() && x >= 0.0,
            "`{at}` holds {x}: a price is a number of ms, not negative"
        );
    }
    Ok(())
}

/// A summary's numbers against one another and the file.
pub fn summary(s: &Summary, lines: usize) -> Result<()> {
    at_most("requests", s.requests, lines)?;
    at_most("finished", s.finished, s.requests)?;
    at_most("cancelled", s.cancelled, s.finished)?;
    at_most("errors", s.errors, lines)?;
    tally(&s.tally, lines, s.requests)?;
    ms("forwards.ms", s.forwards.ms)?;
    // An imported round's line may count several forwards (its log's).
    at_most(
        "forwards.decode",
        s.forwards.decode,
        lines.saturating_mul(super::nld::import::MAX_ROUND_FORWARDS as usize),
    )?;
    at_most("forwards.prefill", s.forwards.prefill, lines)?;
    for (fam, f) in &s.families {
        at_most(&format!("families.{fam}.hist"), f.hist.len(), MAX_BLOCK + 1)?;
        at_most(&format!("families.{fam}.rounds"), f.rounds, lines)?;
    }
    Ok(())
}

/// One session event.
pub fn session(e: &SessionEvent, lines: usize) -> Result<()> {
    match e {
        SessionEvent::TokenText { tokens } => at_most("tokens", tokens.len(), 1 << 22),
        SessionEvent::SessionEnd { summary: s } => summary(s, lines),
        SessionEvent::UserMessage { .. }
        | SessionEvent::ChatCleared
        | SessionEvent::ImportedRequest(_) => Ok(()),
        SessionEvent::ImportedRound(r) => super::nld::import::check_round(r),
    }
}

/// The header's options and numbers.
pub fn header(h: &TraceHeader) -> Result<()> {
    h.options.validate()?;
    ensure!(
        h.risk.threshold.is_finite() && (0.0..=1.0).contains(&h.risk.threshold),
        "`risk.threshold` is {}: expected 0 to 1",
        h.risk.threshold
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diffusion step counts from 1, names each committed position once, and only
    /// positions that hold a token; a written block has one step and one AR token per
    /// position.
    #[test]
    fn diffusion_events_are_checked() {
        let step = |step: usize, positions: Vec<usize>| DecodeEvent::Denoised {
            req: 1,
            round: 1,
            step,
            canvas: vec![Some(5), None, Some(6)],
            confidence: vec![0.9; positions.len()],
            positions,
        };
        assert!(event(&step(1, vec![0, 2]), 100).is_ok());
        let err = |e: DecodeEvent| event(&e, 100).unwrap_err().to_string();
        assert!(err(step(0, vec![0])).contains("`step`"));
        assert!(err(step(1, vec![0, 0])).contains("twice"));
        assert!(err(step(1, vec![1])).contains("does not hold a token"));
        let written = |steps: Vec<usize>| DecodeEvent::BlockWritten {
            req: 1,
            round: 1,
            block: vec![5, 6],
            steps,
            ar: vec![5, 7],
        };
        assert!(event(&written(vec![1, 2]), 100).is_ok());
        assert!(err(written(vec![1])).contains("`steps` has 1"));
        assert!(err(written(vec![1, 3])).contains("`steps` holds 3"));
    }
}
