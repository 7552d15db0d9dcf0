//! The rounds the round pane shows and walks back through.

use std::collections::VecDeque;

use crate::engine::events::assemble::{Denoise, Verdict};
use crate::engine::events::{
    BlockDecision, BranchOutcome, BranchView, PosView, RequestId, Round, RowsPriced,
};
use crate::engine::overlap::BranchKind;
use crate::trace::nld::ImportedRound;
use crate::trace::summary::SummaryBuilder;

/// Rounds kept for walking back (older ones drop off).
pub const MAX_ROUNDS: usize = 4000;

/// The verifier's verdict on a round, as shown: the round assembler's.
pub type VerdictView = Verdict;

/// A block diffusion canvas as shown (a diffusion round is one block): the round
/// assembler's denoising steps, and AR's tokens once the block is written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiffusionView {
    pub denoise: Denoise,
    /// AR's argmax at each position once the block is written to the cache.
    pub ar: Option<Vec<u32>>,
}

impl DiffusionView {
    /// Positions where the block differs from what AR would emit (once written), among
    /// the first `kept` (what the answer committed; past its end nothing counts).
    pub fn disagreements(&self, kept: usize) -> Vec<usize> {
        let Some(ar) = &self.ar else {
            return Vec::new();
        };
        self.denoise
            .canvas
            .iter()
            .zip(ar)
            .take(kept)
            .enumerate()
            .filter(|(_, (c, a))| **c != Some(**a))
            .map(|(k, _)| k)
            .collect()
    }
}

/// A round of a request the round pane can show. Its events are the round assembler's
/// (the statistics' `SummaryBuilder`, the one reader of rounds from events): while the
/// round is gathered the assembler holds it and views read it there, so no event
/// copies it; once it is complete (its commit) or cut off (its request ended, its
/// events moved on), a copy is kept here.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundEntry {
    pub req: RequestId,
    pub round: usize,
    pub t: f64,
    /// The round once complete or cut off (`None`: the assembler is gathering it).
    pub kept: Option<Round>,
    /// A round of an imported log: what the log says, and nothing else.
    pub imported: Option<Box<ImportedRound>>,
}

impl RoundEntry {
    pub fn new(req: RequestId, round: usize, t: f64) -> Self {
        Self {
            req,
            round,
            t,
            kept: None,
            imported: None,
        }
    }

    /// The entry as shown, its round read from `gathered` while it is being gathered.
    pub fn view<'a>(&'a self, gathered: &'a SummaryBuilder) -> RoundView<'a> {
        let r = self
            .kept
            .as_ref()
            .or_else(|| gathered.round(self.req, self.round));
        RoundView::of(self, r)
    }
}

/// Everything known about one round of one request, borrowed for a frame.
#[derive(Debug, Clone, Copy)]
pub struct RoundView<'a> {
    pub req: RequestId,
    pub round: usize,
    pub t: f64,
    pub block_size: Option<usize>,
    pub reason: Option<&'a BlockDecision>,
    /// `[seed, d1, ..]`.
    pub block: &'a [u32],
    pub margins: &'a [f32],
    pub risky: &'a [usize],
    pub reused: Option<BranchKind>,
    pub draft_detail: &'a [PosView],
    pub branches: &'a [BranchView],
    /// The row decision: which rows ride with verification and why.
    pub rows: Option<RowsPriced>,
    pub verdict: Option<&'a VerdictView>,
    pub outcome: Option<BranchOutcome>,
    pub committed: &'a [u32],
    /// A round of an imported log: what the log says, and nothing else.
    pub imported: Option<&'a ImportedRound>,
    /// The assembler's round (`None`: an imported one, or one it no longer holds).
    assembled: Option<&'a Round>,
}

impl<'a> RoundView<'a> {
    fn of(e: &'a RoundEntry, r: Option<&'a Round>) -> Self {
        let draft = r.and_then(|r| r.draft.as_ref());
        let canvas = r.and_then(canvas_len);
        Self {
            req: e.req,
            round: e.round,
            t: e.t,
            block_size: e
                .imported
                .as_ref()
                .map(|i| i.block())
                .or(canvas)
                .or(r.and_then(|r| r.chosen))
                .or(draft.map(|d| d.block.len())),
            reason: r.and_then(|r| r.reason.as_ref()),
            block: draft.map_or(&[], |d| &d.block),
            margins: draft.map_or(&[], |d| &d.margins),
            risky: draft.map_or(&[], |d| &d.risky),
            reused: draft.and_then(|d| d.reused),
            draft_detail: draft.map_or(&[], |d| &d.detail),
            branches: r.map_or(&[], |r| &r.branches),
            rows: r.and_then(|r| r.rows),
            verdict: r.and_then(|r| r.verdict.as_ref()),
            outcome: r.and_then(|r| r.outcome),
            committed: r.map_or(&[], |r| &r.committed),
            imported: e.imported.as_deref(),
            assembled: r,
        }
    }

    /// Block diffusion's canvas (a diffusion round has no draft or verdict): its
    /// denoising steps, and the block as written with AR's tokens once it is.
    pub fn diffusion(&self) -> Option<DiffusionView> {
        let r = self.assembled?;
        if r.denoise.is_none() && r.written.is_none() {
            return None;
        }
        let mut d = DiffusionView {
            denoise: r.denoise.clone().unwrap_or_default(),
            ar: None,
        };
        if let Some(w) = &r.written {
            let n = &mut d.denoise;
            n.steps = w.steps.iter().copied().max().unwrap_or(n.steps);
            n.confidence.resize(w.block.len(), 0.0);
            n.canvas = w.block.iter().copied().map(Some).collect();
            n.step_of = w.steps.clone();
            d.ar = Some(w.ar.clone());
        }
        Some(d)
    }

    /// A block diffusion round.
    pub fn diffusing(&self) -> bool {
        self.assembled
            .is_some_and(|r| r.denoise.is_some() || r.written.is_some())
    }

    /// Tokens the round advanced (accepted drafts + 1), once verified.
    pub fn advance(&self) -> Option<usize> {
        self.verdict
            .map(|v| v.accepted + 1)
            .or_else(|| self.imported.map(ImportedRound::emitted))
    }

    /// The answer ended inside this round's block (EOS or the token limit), before
    /// the bonus: the verdict past its end is no part of it. The assembler's rule, once
    /// the round committed.
    pub fn ended(&self) -> bool {
        self.assembled
            .is_some_and(|r| !r.committed.is_empty() && r.verdict.is_some() && r.ended())
    }

    /// Positions shown: the block when drafted, else the seed and the verifier's token.
    pub fn positions(&self) -> usize {
        let canvas = self.assembled.and_then(canvas_len).unwrap_or(0);
        self.block
            .len()
            .max(self.block_size.unwrap_or(1))
            .max(canvas)
            .max(1)
    }

    /// The block size the round ran.
    pub fn size(&self) -> usize {
        self.block_size.unwrap_or(self.block.len()).max(1)
    }

    /// Block diffusion, once written: the share of the block AR would have emitted.
    pub fn ar_agreement(&self) -> Option<f64> {
        let w = self.assembled?.written.as_ref()?;
        let n = self.diffusion_kept();
        let differ = w.block.iter().zip(&w.ar).take(n).filter(|(b, a)| b != a);
        Some((n - differ.count()) as f64 / n.max(1) as f64)
    }

    /// Block diffusion: the canvas positions the answer kept (all of them until the
    /// block is committed, or where it committed none).
    pub fn diffusion_kept(&self) -> usize {
        let n = self.assembled.and_then(canvas_len).unwrap_or(0);
        if self.committed.is_empty() {
            n
        } else {
            self.committed.len().min(n)
        }
    }

    /// Finished: verified, or (block diffusion) written to the cache.
    pub fn settled(&self) -> bool {
        self.verdict.is_some()
            || self.assembled.is_some_and(|r| r.written.is_some())
            || self.imported.is_some()
    }

    /// Something to show: a draft, a verdict (an AR step has no draft), a canvas.
    pub fn has_content(&self) -> bool {
        !self.block.is_empty()
            || self.verdict.is_some()
            || self.diffusing()
            || self.imported.is_some()
    }
}

/// A diffusion round's canvas length: the block written, else the steps so far.
fn canvas_len(r: &Round) -> Option<usize> {
    r.written
        .as_ref()
        .map(|w| w.block.len())
        .or(r.denoise.as_ref().map(|d| d.canvas.len()))
}

/// The rounds, which one is looked at, and the inspected position.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    pub list: VecDeque<RoundEntry>,
    /// Index into `list` being looked at; `None` follows the newest.
    pub view: Option<usize>,
    /// Inspected block position in the viewed round.
    pub selected: Option<usize>,
}

impl Rounds {
    /// The round the round pane shows: the one walked to, else the newest one with
    /// something to show (a round just chosen and not drafted yet would flash empty
    /// between its block choice and its draft, a long moment in slow motion).
    /// `gathered`: the assembler holding the rounds still being gathered.
    pub fn shown<'a>(&'a self, gathered: &'a SummaryBuilder) -> Option<RoundView<'a>> {
        self.shown_index(gathered)
            .and_then(|i| self.list.get(i))
            .map(|e| e.view(gathered))
    }

    pub fn shown_index(&self, gathered: &SummaryBuilder) -> Option<usize> {
        if self.view.is_some() {
            return self.view;
        }
        let last = self.list.len().checked_sub(1)?;
        match self.list.get(last) {
            Some(e) if !e.view(gathered).has_content() && last > 0 => Some(last - 1),
            _ => Some(last),
        }
    }

    /// The entry of round `round` of `req` (looked for from the newest: a round's
    /// events come while it is among the last few, whatever else interleaves).
    pub fn find_mut(&mut self, req: RequestId, round: usize) -> Option<&mut RoundEntry> {
        self.list
            .iter_mut()
            .rev()
            .find(|e| e.req == req && e.round == round)
    }

    /// The entry of round `round` of `req`, created when new.
    pub fn get_mut(&mut self, req: RequestId, round: usize, t: f64) -> &mut RoundEntry {
        let found = self
            .list
            .iter()
            .rev()
            .position(|r| r.req == req && r.round == round);
        let i = match found {
            Some(back) => self.list.len() - 1 - back,
            None => {
                if self.list.len() >= MAX_ROUNDS {
                    self.list.pop_front();
                    self.view = self.view.map(|v| v.saturating_sub(1));
                }
                self.list.push_back(RoundEntry::new(req, round, t));
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }

    /// Alt+←: one round back.
    pub fn prev(&mut self, gathered: &SummaryBuilder) {
        if let Some(i) = self.shown_index(gathered) {
            self.view = Some(i.saturating_sub(1));
        }
    }

    /// Alt+→: one round forward; past the last, follow live rounds again.
    pub fn next(&mut self) {
        if let Some(i) = self.view {
            self.view = (i + 1 < self.list.len().saturating_sub(1)).then_some(i + 1);
        }
    }

    /// Shift+← / →: the inspected position, wrapping around the `n` positions shown.
    pub fn select(&mut self, forward: bool, n: usize) {
        if n == 0 {
            return;
        }
        let cur = self.selected.unwrap_or(if forward { n - 1 } else { 0 });
        self.selected = Some(if forward {
            (cur + 1) % n
        } else {
            (cur + n - 1) % n
        });
    }
}
