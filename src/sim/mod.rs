//! A simulated NLD-8B backbone (`--model sim:nld-8b`): the engine's `Backbone` answered
//! without weights, so the scheduler, the block policy, the events and the screen run
//! unchanged on drafts that accept like Nemotron-Labs-Diffusion-8B's, which the bundled
//! 4.2M drill model does not (no long tail at B = 32).
//!
//! Each request has a ground-truth AR answer: stand-in text (the practice chats'
//! answers, joined; the words mean nothing, the screen shows words) keyed by a hash of
//! its prompt, ended by EOS. Every causal position predicts that answer's token at its
//! position, so every mode stays token-identical to AR greedy and `=AR` keeps checking
//! the engine's bookkeeping. A block (a draft, a correction branch after its
//! alternative, a continuation, a diffusion canvas) is answered from the position of
//! the last known token before its first mask, through `acceptance`: AR's tokens up to
//! the round's latent run, then the first miss with AR's token at the observed rank,
//! and the observed agreement after it. Nothing here is measured: figures from it are
//! *simulated NLD-8B acceptance*.

pub mod acceptance;
pub mod check;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{bail, ensure, Context, Result};
use candle_core::{Device, Tensor};

use self::acceptance::{Draw, Latent, Params, Verdict, RANKS};
use crate::engine::Backbone;
use crate::model::{AttnRule, Config, KvCache, Row, RowBatch, TextTokenizer};
use crate::rng::Rng;

/// The survival tables fitted on the simulator (`specscope survival --model sim:nld-8b
/// --skip 32 --out assets/survival_tables_sim_nld8b.json`): RecGuide's adaptive rule
/// learns its own acceptance, as the paper's tables were fitted on NLD's traces.
const SIM_TABLES: &str = include_str!("../../assets/survival_tables_sim_nld8b.json");

/// The block policy's survival tables for a simulated backbone.
pub fn survival_tables() -> crate::engine::policy::SurvivalTables {
    serde_json::from_str(SIM_TABLES)
        .unwrap_or_else(|_| crate::engine::policy::SurvivalTables::builtin())
}

/// The `--model` prefix of a simulated backbone.
pub const PREFIX: &str = "sim:";

/// The simulated backbones there are, with what they simulate.
pub const NAMED: &[(&str, &str)] = &[(
    "nld-8b",
    "NLD-8B with its LoRA draft: acceptance calibrated to the published observation statistics",
)];

/// The RecGuide paper's block-size shares on NLD-8B (B200), as issue 52 quotes them:
/// `(C, [(B, share of requests)])` at the two loads it gives (B = 16 is the rest).
pub const PAPER_BLOCK_SHARES: &[(usize, [(usize, f64); 3])] = &[
    (2, [(8, 0.0933), (16, 0.0254), (32, 0.8813)]),
    (128, [(8, 0.7821), (16, 0.1204), (32, 0.0975)]),
];

/// What every figure from the simulator says it is.
pub const LABEL: &str = "simulated NLD-8B acceptance";

/// Context window of the simulated model (the real one has 262144; answers here are
/// at most a few thousand tokens).
const CONTEXT: usize = 32768;

/// Answer lengths are drawn between these (tokens before EOS).
const ANSWER_TOKENS: (usize, usize) = (256, 1536);

/// Requests whose answers are kept at once (recomputed, identically, when evicted).
const KEEP: usize = 4096;

/// One request's answer and latent difficulty.
struct Answer {
    prompt_len: usize,
    tokens: Vec<u32>,
    latent: Latent,
}

impl Answer {
    /// AR's token at answer offset `o` (EOS past the end).
    fn token(&self, o: usize, eos: u32) -> u32 {
        self.tokens.get(o).copied().unwrap_or(eos)
    }
}

/// The simulated backbone.
pub struct SimBackbone {
    cfg: Config,
    params: Params,
    tokenizer: TextTokenizer,
    /// Ids no answer contains and no alternative names: the mask, EOS, BOS, padding.
    special: Vec<u32>,
    answers: Mutex<HashMap<u64, Arc<Answer>>>,
}

/// A row's block, drafted from its anchor (the last known token before the first
/// mask), worked out once per row.
struct Block {
    /// Row index of the anchor.
    anchor: usize,
    /// Answer offset of the anchor.
    offset: usize,
    /// Distance from the anchor to the row's last position.
    last: usize,
    /// The round's run of matching drafts; `None` when the row's tokens up to the
    /// anchor are not AR's (drafted after a wrong token).
    run: Option<usize>,
}

impl SimBackbone {
    /// `name` without the prefix (`nld-8b`), its vocabulary and chat template from
    /// `tokenizer` (the bundled model's), its config from `base` (ids of mask and EOS).
    pub fn new(name: &str, mut base: Config, tokenizer: TextTokenizer) -> Result<Self> {
        let params = match name {
            "nld-8b" => acceptance::NLD_8B,
            _ => {
                let names: Vec<String> =
                    NAMED.iter().map(|(n, _)| format!("{PREFIX}{n}")).collect();
                bail!(
                    "--model {PREFIX}{name}: no such simulated backbone (there is {})",
                    names.join(", ")
                )
            }
        };
        base.max_position_embeddings = CONTEXT;
        ensure!(
            !base.eos_token_ids().is_empty(),
            "the simulator's tokenizer config names no EOS token"
        );
        let mut special = vec![base.mask_token_id()];
        special.extend(base.eos_token_ids());
        special.extend(base.bos_token_id);
        special.extend(base.pad_token_id);
        Ok(Self {
            cfg: base,
            params,
            tokenizer,
            special,
            answers: Mutex::new(HashMap::new()),
        })
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    fn eos(&self) -> u32 {
        self.cfg.eos_token_ids().first().copied().unwrap_or(0)
    }

    /// The answer of the request whose prompt is `prompt`.
    fn answer(&self, prompt: &[u32]) -> Result<Arc<Answer>> {
        let key = prompt_key(prompt);
        if let Some(a) = self.lock()?.get(&key) {
            return Ok(a.clone());
        }
        let a = Arc::new(self.make_answer(key, prompt.len())?);
        let mut map = self.lock()?;
        if map.len() >= KEEP {
            map.clear();
        }
        map.insert(key, a.clone());
        Ok(a)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, HashMap<u64, Arc<Answer>>>> {
        self.answers
            .lock()
            .map_err(|_| anyhow::anyhow!("the simulator's answers were poisoned by a panic"))
    }

    /// Stand-in text: practice-chat answers joined until the drawn length, then EOS.
    fn make_answer(&self, key: u64, prompt_len: usize) -> Result<Answer> {
        let mut rng = acceptance::mix(&[key, Draw::Tokens as u64]);
        let (lo, hi) = ANSWER_TOKENS;
        let want = lo + (rng.next_u64() % (hi - lo) as u64) as usize;
        let mut tokens = Vec::with_capacity(want + 64);
        let mut i = 0u64;
        while tokens.len() < want {
            let e = crate::train::corpus::exchange(key, i);
            i += 1;
            let text = e
                .messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            let sep = if tokens.is_empty() { "" } else { "\n\n" };
            let ids = self.tokenizer.encode_raw(&format!("{sep}{text}"))?;
            tokens.extend(ids.into_iter().filter(|t| !self.special.contains(t)));
            ensure!(i < 10_000, "the simulator's answer text produced no tokens");
        }
        tokens.truncate(want);
        Ok(Answer {
            prompt_len,
            latent: Latent::new(&self.params, key, want + 1),
            tokens,
        })
    }

    /// The logits of one row: `(selected positions, vocab)`.
    fn row_logits(&self, row: &Row, cache: &KvCache) -> Result<Vec<f32>> {
        let p0 = cache.len();
        ensure!(
            cache.tokens().len() == p0,
            "a cache the simulator did not fill ({} positions, {} known tokens)",
            p0,
            cache.tokens().len()
        );
        ensure!(
            p0 + row.len() <= self.cfg.max_position_embeddings,
            "a row past the context window: {p0} + {}",
            row.len()
        );
        let prompt: &[u32] = if p0 == 0 {
            &row.tokens
        } else {
            &cache.tokens()[..cache.first_commit().min(p0)]
        };
        let ans = self.answer(prompt)?;
        let at = |pos: usize| -> Option<u32> {
            if pos < p0 {
                cache.tokens().get(pos).copied()
            } else {
                row.tokens.get(pos - p0).copied()
            }
        };
        let idx = row.logits.indices(row.len());
        let v = self.cfg.vocab_size;
        let mut out = Vec::with_capacity(idx.len() * v);
        let mask = self.cfg.mask_token_id();
        let block_start = match row.rule {
            AttnRule::Causal => row.len(),
            AttnRule::Bidirectional => 0,
            AttnRule::CausalThenBlock { causal_len } => causal_len,
        };
        // The last known token before the block's first mask: what its drafts follow.
        let block = (block_start..row.len())
            .find(|&j| row.tokens[j] == mask)
            .filter(|&m| m > 0)
            .and_then(|m| self.block(&ans, row, p0, m - 1, &at));
        for &i in &idx {
            let ranked = if i < block_start {
                self.verify_position(&ans, p0 + i + 1, &at)
            } else {
                match &block {
                    Some(b) if i > b.anchor => self.draft_position(&ans, b, i),
                    // A known token (the seed, a filled canvas slot) predicts itself.
                    _ => confident(row.tokens[i]),
                }
            };
            self.logits(&ranked, &ans, p0 + i, &mut out);
        }
        Ok(out)
    }

    /// The block anchored at row index `anchor`, if the anchor is in the answer.
    fn block(
        &self,
        ans: &Answer,
        row: &Row,
        p0: usize,
        anchor: usize,
        at: &dyn Fn(usize) -> Option<u32>,
    ) -> Option<Block> {
        let eos = self.eos();
        let a = p0 + anchor;
        let offset = a.checked_sub(ans.prompt_len)?;
        let on_track = (ans.prompt_len.max(p0)..=a)
            .all(|pos| at(pos) == Some(ans.token(pos - ans.prompt_len, eos)));
        Some(Block {
            anchor,
            offset,
            last: row.len() - 1 - anchor,
            run: on_track.then(|| ans.latent.run(&self.params, offset)),
        })
    }

    /// AR at absolute position `a`: the answer's token there (the prompt's own next
    /// token inside the prompt), with the verifier's confidence for that stretch.
    fn verify_position(&self, ans: &Answer, a: usize, at: &dyn Fn(usize) -> Option<u32>) -> Ranked {
        if a < ans.prompt_len {
            return confident(at(a).unwrap_or(self.eos()));
        }
        let o = a - ans.prompt_len;
        let mut rng = acceptance::mix(&[ans.latent.key, Draw::Verify as u64, o as u64]);
        let top = acceptance::verify_confidence(&self.params, ans.latent.level(o), &mut rng);
        Ranked {
            probs: acceptance::ranked(top, &mut rng),
            truth: ans.token(o, self.eos()),
            truth_rank: 1,
            salt: o as u64,
        }
    }

    /// The draft at row index `i` of `block`.
    fn draft_position(&self, ans: &Answer, block: &Block, i: usize) -> Ranked {
        let eos = self.eos();
        let (o, d) = (block.offset, i - block.anchor);
        let key = ans.latent.key;
        let verdict = match block.run {
            Some(run) => acceptance::verdict(&self.params, key, o, d, Some(block.last), run),
            // Drafted after a wrong token: as after a miss, from the first position.
            None => acceptance::verdict(&self.params, key ^ 0x5bd1_e995, o, d, None, 0),
        };
        let mut rng = acceptance::mix(&[key, Draw::Shape as u64, o as u64, d as u64]);
        let top = acceptance::draft_confidence(&self.params, verdict, &mut rng);
        let truth_rank = match verdict {
            Verdict::Match => 1,
            Verdict::FirstMiss { rank } | Verdict::After { rank } => rank,
        };
        Ranked {
            probs: acceptance::ranked(top, &mut rng),
            truth: ans.token(o + d, eos),
            truth_rank,
            salt: ((o as u64) << 20) ^ d as u64,
        }
    }

    /// A vocabulary-wide row of logits: the listed ranks, AR's token at its rank, the
    /// others words of the same answer, the rest sharing what is left.
    fn logits(&self, r: &Ranked, ans: &Answer, pos: usize, out: &mut Vec<f32>) {
        let v = self.cfg.vocab_size;
        let listed: f64 = r.probs.iter().sum();
        let floor = ((1.0 - listed).max(1e-9) / (v - RANKS) as f64).ln() as f32;
        let start = out.len();
        out.resize(start + v, floor);
        let row = &mut out[start..];
        row[self.cfg.mask_token_id() as usize % v] = -1e4;
        let mut rng = acceptance::mix(&[ans.latent.key, 0x70c, pos as u64, r.salt]);
        let mut used = vec![r.truth];
        for (k, &p) in r.probs.iter().enumerate() {
            let tok = if k + 1 == r.truth_rank {
                r.truth
            } else {
                other_token(ans, &mut rng, &used, &self.special, v)
            };
            used.push(tok);
            row[tok as usize % v] = p.ln() as f32;
        }
    }
}

/// Probabilities by rank, and which rank AR's token holds (beyond `RANKS`: unlisted).
struct Ranked {
    probs: [f64; RANKS],
    truth: u32,
    truth_rank: usize,
    salt: u64,
}

/// A token known for certain (a seed, a filled slot, the prompt).
fn confident(tok: u32) -> Ranked {
    let mut probs = [0.0; RANKS];
    probs[0] = 0.999;
    for (k, p) in probs.iter_mut().enumerate().skip(1) {
        *p = 0.0009 * 0.5f64.powi(k as i32);
    }
    Ranked {
        probs,
        truth: tok,
        truth_rank: 1,
        salt: 1,
    }
}

/// A plausible wrong token: a word of the same answer, not yet used, not special.
fn other_token(ans: &Answer, rng: &mut Rng, used: &[u32], special: &[u32], v: usize) -> u32 {
    for _ in 0..16 {
        let t = if ans.tokens.is_empty() {
            (rng.next_u64() % v as u64) as u32
        } else {
            ans.tokens[(rng.next_u64() % ans.tokens.len() as u64) as usize]
        };
        if !used.contains(&t) && !special.contains(&t) && (t as usize) < v {
            return t;
        }
    }
    (0..v as u32)
        .rev()
        .find(|t| !used.contains(t) && !special.contains(t))
        .unwrap_or(0)
}

/// FNV-1a over the prompt's ids: which answer a request gets.
fn prompt_key(ids: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ids.iter().flat_map(|t| t.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Backbone for SimBackbone {
    fn config(&self) -> &Config {
        &self.cfg
    }

    fn new_cache(&self) -> KvCache {
        KvCache::new(0)
    }

    fn forward(&self, batch: &RowBatch, caches: &mut [&mut KvCache]) -> Result<Vec<Tensor>> {
        let v = self.cfg.vocab_size;
        let mut out = Vec::with_capacity(batch.rows.len());
        for row in &batch.rows {
            let cache = caches
                .get(row.cache)
                .with_context(|| format!("a row names cache {} of {}", row.cache, caches.len()))?;
            let data = self.row_logits(row, cache)?;
            let n = data.len() / v;
            out.push(Tensor::from_vec(data, (n, v), &Device::Cpu)?);
        }
        for row in batch.rows.iter().filter(|r| r.commit) {
            caches[row.cache].commit_tokens(&row.tokens);
        }
        Ok(out)
    }
}
