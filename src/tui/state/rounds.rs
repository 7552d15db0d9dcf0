//! The rounds the round pane shows and walks back through.

use std::collections::VecDeque;

use crate::engine::events::assemble::{Denoise, Verdict};
use crate::engine::events::{
    BlockDecision, BranchOutcome, BranchView, PosView, RequestId, Round, RowsPriced,
};
use crate::engine::overlap::BranchKind;

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

/// Everything known about one round of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundView {
    pub req: RequestId,
    pub round: usize,
    pub t: f64,
    pub block_size: Option<usize>,
    pub reason: Option<BlockDecision>,
    /// `[seed, d1, ..]`.
    pub block: Vec<u32>,
    pub margins: Vec<f32>,
    pub risky: Vec<usize>,
    pub reused: Option<BranchKind>,
    pub draft_detail: Vec<PosView>,
    pub branches: Vec<BranchView>,
    /// The row decision: which rows ride with verification and why.
    pub rows: Option<RowsPriced>,
    pub verdict: Option<VerdictView>,
    pub outcome: Option<BranchOutcome>,
    pub committed: Vec<u32>,
    /// Block diffusion's canvas (a diffusion round has no draft or verdict).
    pub diffusion: Option<DiffusionView>,
    /// A round of an imported log: what the log says, and nothing else.
    pub imported: Option<Box<crate::trace::nld::ImportedRound>>,
}

impl RoundView {
    /// Shows round `r` as the assembler has gathered it so far.
    pub fn fill(&mut self, r: &Round) {
        let draft = r.draft.as_ref();
        let diffusion = (r.denoise.is_some() || r.written.is_some()).then(|| {
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
            d
        });
        self.block_size = diffusion
            .as_ref()
            .map(|d| d.denoise.canvas.len())
            .or(r.chosen)
            .or(draft.map(|d| d.block.len()));
        self.reason = r.reason.clone();
        self.rows = r.rows;
        self.block = draft.map(|d| d.block.clone()).unwrap_or_default();
        self.margins = draft.map(|d| d.margins.clone()).unwrap_or_default();
        self.risky = draft.map(|d| d.risky.clone()).unwrap_or_default();
        self.reused = draft.and_then(|d| d.reused);
        self.draft_detail = draft.map(|d| d.detail.clone()).unwrap_or_default();
        self.branches = r.branches.clone();
        self.verdict = r.verdict.clone();
        self.outcome = r.outcome;
        self.committed = r.committed.clone();
        self.diffusion = diffusion;
    }

    pub fn new(req: RequestId, round: usize, t: f64) -> Self {
        Self {
            req,
            round,
            t,
            block_size: None,
            reason: None,
            block: Vec::new(),
            margins: Vec::new(),
            risky: Vec::new(),
            reused: None,
            draft_detail: Vec::new(),
            branches: Vec::new(),
            rows: None,
            verdict: None,
            outcome: None,
            committed: Vec::new(),
            diffusion: None,
            imported: None,
        }
    }

    /// Tokens the round advanced (accepted drafts + 1), once verified.
    pub fn advance(&self) -> Option<usize> {
        self.verdict
            .as_ref()
            .map(|v| v.accepted + 1)
            .or_else(|| self.imported.as_ref().map(|r| r.emitted()))
    }

    /// The answer ended inside this round's block (EOS or the token limit), before
    /// the bonus: the verdict past its end is no part of it.
    pub fn ended(&self) -> bool {
        !self.committed.is_empty()
            && self
                .advance()
                .is_some_and(|a| crate::engine::round::ended_inside(self.committed.len(), a))
    }

    /// Positions shown: the block when drafted, else the seed and the verifier's token.
    pub fn positions(&self) -> usize {
        let canvas = self
            .diffusion
            .as_ref()
            .map_or(0, |d| d.denoise.canvas.len());
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
        let d = self.diffusion.as_ref().filter(|d| d.ar.is_some())?;
        let n = self.diffusion_kept();
        Some((n - d.disagreements(n).len()) as f64 / n.max(1) as f64)
    }

    /// Block diffusion: the canvas positions the answer kept (all of them until the
    /// block is committed, or where it committed none).
    pub fn diffusion_kept(&self) -> usize {
        let n = self
            .diffusion
            .as_ref()
            .map_or(0, |d| d.denoise.canvas.len());
        if self.committed.is_empty() {
            n
        } else {
            self.committed.len().min(n)
        }
    }

    /// Finished: verified, or (block diffusion) written to the cache.
    pub fn settled(&self) -> bool {
        self.verdict.is_some() || self.ar_agreement().is_some() || self.imported.is_some()
    }

    /// Something to show: a draft, a verdict (an AR step has no draft), a canvas.
    pub fn has_content(&self) -> bool {
        !self.block.is_empty()
            || self.verdict.is_some()
            || self.diffusion.is_some()
            || self.imported.is_some()
    }
}

/// The rounds, which one is looked at, and the inspected position.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    pub list: VecDeque<RoundView>,
    /// Index into `list` being looked at; `None` follows the newest.
    pub view: Option<usize>,
    /// Inspected block position in the viewed round.
    pub selected: Option<usize>,
}

impl Rounds {
    /// The round the round pane shows: the one walked to, else the newest one with
    /// something to show (a round just chosen and not drafted yet would flash empty
    /// between its block choice and its draft, a long moment in slow motion).
    pub fn shown(&self) -> Option<&RoundView> {
        self.shown_index().and_then(|i| self.list.get(i))
    }

    pub fn shown_index(&self) -> Option<usize> {
        if self.view.is_some() {
            return self.view;
        }
        let last = self.list.len().checked_sub(1)?;
        match self.list.get(last) {
            Some(r) if !r.has_content() && last > 0 => Some(last - 1),
            _ => Some(last),
        }
    }

    /// The round `round` of `req`, created when new.
    pub fn get_mut(&mut self, req: RequestId, round: usize, t: f64) -> &mut RoundView {
        let found = self
            .list
            .iter()
            .rev()
            .take(64)
            .position(|r| r.req == req && r.round == round);
        let i = match found {
            Some(back) => self.list.len() - 1 - back,
            None => {
                if self.list.len() >= MAX_ROUNDS {
                    self.list.pop_front();
                    self.view = self.view.map(|v| v.saturating_sub(1));
                }
                self.list.push_back(RoundView::new(req, round, t));
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }

    /// Alt+←: one round back.
    pub fn prev(&mut self) {
        if let Some(i) = self.shown_index() {
            self.view = Some(i.saturating_sub(1));
        }
    }

    /// Alt+→: one round forward; past the last, follow live rounds again.
    pub fn next(&mut self) {
        if let Some(i) = self.view {
            self.view = (i + 1 < self.list.len().saturating_sub(1)).then_some(i + 1);
        }
    }

    /// Shift+← / →: the inspected position, wrapping around the block.
    pub fn select(&mut self, forward: bool) {
        let n = self.shown().map_or(0, RoundView::positions);
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
