//! Counting what decoding did: one round's facts ([`RoundTally`]), their fold
//! ([`Tally`], which adds up with `+=`), a request's statistics. The scheduler, the
//! recording summary, `run`, `bench` and the screen all count with these.

use std::collections::BTreeMap;
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

use super::{BranchCount, BranchKind};

/// What one round of one request did, as the statistics count it. The scheduler
/// records its rounds with it and `trace::summary` rebuilds the same from events, so
/// a live session, a replay, `run` and `bench` count alike.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundTally {
    pub block: usize,
    /// Tokens advanced: accepted drafts + 1, cut at the answer's end (what the round
    /// committed).
    pub advance: usize,
    /// The answer ended inside the block (an accepted eos, or the budget): the
    /// positions after `advance` were not judged as part of it.
    pub ended: bool,
    /// A draft forward ran for this round (not an AR step, not a reused block).
    pub drafted: bool,
    /// The block came from a branch of the previous round.
    pub reused: bool,
    /// Branch rows fused with the verification, and their query tokens.
    pub branches: Vec<BranchKind>,
    pub branch_tokens: usize,
    /// The branch reused for the next round, if one hit.
    pub hit: Option<BranchKind>,
}

/// What one block of block diffusion did, as the statistics count it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockTally {
    /// Canvas length.
    pub block: usize,
    /// Denoising forwards the canvas took (its cache write is one more).
    pub steps: usize,
    /// Tokens committed (the canvas cut at the answer's end).
    pub advance: usize,
    /// Of those, the tokens AR would have emitted at the same position given the same
    /// prefix.
    pub agree: usize,
}

impl BlockTally {
    /// Tokens of `kept` that equal AR's choice at the same position (`ar[k]` is AR's
    /// token for position k): the agreement the engine and the summary both count.
    pub fn agreeing(kept: &[u32], ar: &[u32]) -> usize {
        kept.iter().zip(ar).filter(|(a, b)| a == b).count()
    }
}

/// Counts of rounds, forwards and tokens: the one fold every statistic is made of
/// (`+=` adds requests up). TPF: decode tokens / decode forwards, prefill excluded, a
/// fused forward counting once per request in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Committed tokens, the prefill's first token included.
    pub new_tokens: usize,
    /// Committed tokens after the first.
    pub decode_tokens: usize,
    pub rounds: usize,
    pub draft_forwards: usize,
    pub verify_forwards: usize,
    pub fused_forwards: usize,
    /// Draft forwards skipped because a branch was reused.
    pub saved_drafts: usize,
    /// Query tokens over the decode forwards (this request's rows only).
    pub query_tokens: usize,
    /// Rows over the decode forwards (this request's only).
    pub rows: usize,
    /// `accept_hist[a]` = rounds that advanced `a` tokens (accepted drafts + 1, cut
    /// at the answer's end).
    pub accept_hist: Vec<usize>,
    /// `ended_hist[a]`: of those, the rounds the answer ended in after `a` tokens
    /// (every drafted position up to `a` accepted, none after it judged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ended_hist: Vec<usize>,
    /// Rounds per block size.
    #[serde(with = "keyed")]
    pub blocks: BTreeMap<usize, usize>,
    /// Branch rows built and reused, by kind.
    #[serde(with = "keyed")]
    pub branches: BTreeMap<BranchKind, BranchCount>,
    /// Block diffusion: denoising forwards and cache writes (a block is one round).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub denoise_forwards: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refresh_forwards: usize,
    /// Block diffusion: committed tokens compared with AR's argmax at their position,
    /// and how many agreed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ar_judged: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ar_agree: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Tally {
    /// Counts one round.
    pub fn record_round(&mut self, r: &RoundTally) {
        self.rounds += 1;
        count_in(&mut self.accept_hist, r.advance);
        if r.ended {
            count_in(&mut self.ended_hist, r.advance);
        }
        *self.blocks.entry(r.block).or_default() += 1;
        if r.drafted {
            self.draft_forwards += 1;
            self.rows += 1;
            self.query_tokens += r.block;
        }
        self.saved_drafts += usize::from(r.reused);
        if r.branches.is_empty() {
            self.verify_forwards += 1;
        } else {
            self.fused_forwards += 1;
        }
        self.rows += 1 + r.branches.len();
        self.query_tokens += r.block + r.branch_tokens;
        for k in &r.branches {
            self.branches.entry(*k).or_default().built += 1;
        }
        if let Some(k) = r.hit {
            self.branches.entry(k).or_default().hits += 1;
        }
    }

    /// Counts one block of block diffusion.
    pub fn record_block(&mut self, b: &BlockTally) {
        self.rounds += 1;
        count_in(&mut self.accept_hist, b.advance);
        *self.blocks.entry(b.block).or_default() += 1;
        self.denoise_forwards += b.steps;
        self.refresh_forwards += 1;
        self.rows += b.steps + 1;
        self.query_tokens += b.block * (b.steps + 1);
        self.ar_judged += b.advance;
        self.ar_agree += b.agree;
    }

    /// Share of block diffusion's tokens that AR would have emitted too.
    pub fn ar_agreement(&self) -> f64 {
        ratio(self.ar_agree as f64, self.ar_judged as f64)
    }

    /// Counts committed tokens (`prefill`: the first token, from the prefill).
    pub fn record_commit(&mut self, tokens: usize, prefill: bool) {
        self.new_tokens += tokens;
        if !prefill {
            self.decode_tokens += tokens;
        }
    }

    pub fn decode_forwards(&self) -> usize {
        self.draft_forwards
            + self.verify_forwards
            + self.fused_forwards
            + self.denoise_forwards
            + self.refresh_forwards
    }

    pub fn tpf(&self) -> f64 {
        ratio(self.decode_tokens as f64, self.decode_forwards() as f64)
    }

    /// Mean tokens advanced per round (acceptance length, bonus included).
    pub fn mean_accept(&self) -> f64 {
        hist_mean(&self.accept_hist)
    }

    /// Hits / built over every branch kind.
    pub fn hit_rate(&self) -> f64 {
        let (b, h) = self
            .branches
            .values()
            .fold((0, 0), |(b, h), c| (b + c.built, h + c.hits));
        ratio(h as f64, b as f64)
    }
}

impl AddAssign<&Tally> for Tally {
    fn add_assign(&mut self, o: &Tally) {
        self.new_tokens += o.new_tokens;
        self.decode_tokens += o.decode_tokens;
        self.rounds += o.rounds;
        self.draft_forwards += o.draft_forwards;
        self.verify_forwards += o.verify_forwards;
        self.fused_forwards += o.fused_forwards;
        self.saved_drafts += o.saved_drafts;
        self.query_tokens += o.query_tokens;
        self.rows += o.rows;
        self.denoise_forwards += o.denoise_forwards;
        self.refresh_forwards += o.refresh_forwards;
        self.ar_judged += o.ar_judged;
        self.ar_agree += o.ar_agree;
        add_hist(&mut self.accept_hist, &o.accept_hist);
        add_hist(&mut self.ended_hist, &o.ended_hist);
        for (b, n) in &o.blocks {
            *self.blocks.entry(*b).or_default() += n;
        }
        for (k, c) in &o.branches {
            let e = self.branches.entry(*k).or_default();
            e.built += c.built;
            e.hits += c.hits;
        }
    }
}

/// Per-request statistics: the request's tally and its times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    pub prompt_tokens: usize,
    #[serde(flatten)]
    pub tally: Tally,
    pub prefill_secs: f64,
    pub decode_secs: f64,
    /// Block diffusion: the answer position of the first token AR would not have
    /// emitted there (none while every token agrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<usize>,
}

impl RequestStats {
    pub fn tokens_per_sec(&self) -> f64 {
        ratio(
            self.tally.new_tokens as f64,
            self.prefill_secs + self.decode_secs,
        )
    }
}

/// Mean of a histogram indexed by value.
pub fn hist_mean(hist: &[usize]) -> f64 {
    let (n, sum) = hist
        .iter()
        .enumerate()
        .fold((0, 0), |(n, s), (a, c)| (n + c, s + a * c));
    ratio(sum as f64, n as f64)
}

/// Adds histogram `from` into `into` (both indexed by value).
pub fn add_hist(into: &mut Vec<usize>, from: &[usize]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, n) in from.iter().enumerate() {
        into[a] += n;
    }
}

/// Counts one more `a` in a histogram indexed by value.
pub fn count_in(hist: &mut Vec<usize>, a: usize) {
    if hist.len() <= a {
        hist.resize(a + 1, 0);
    }
    hist[a] += 1;
}

/// `a / b`, or 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Maps keyed by a type that prints and parses itself (block sizes, branch kinds),
/// written as JSON objects with string keys; read back even inside tagged enums
/// (whose buffering loses serde_json's own key parsing).
pub mod keyed {
    use std::collections::BTreeMap;
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<K: Display, V: Serialize, S: Serializer>(
        m: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k.to_string(), v)))
    }

    pub fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: FromStr + Ord,
        K::Err: Display,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        BTreeMap::<String, V>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                k.parse()
                    .map(|k| (k, v))
                    .map_err(|e| serde::de::Error::custom(format!("key `{k}`: {e}")))
            })
            .collect()
    }
}
