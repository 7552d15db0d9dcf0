//! `specscope sim check`: the simulator's observation statistics beside the published
//! ones (`../shared/reference/decoding.md` §3.3, §5), measured the way the reference
//! measured them: a same-state shadow, where every round drafts and verifies
//! B ∈ {4, 8, 16, 32} from one committed prefix and advances with the canonical B = 16,
//! read through the engine's own acceptance rule and signals from the logits the
//! simulator returns.

use anyhow::Result;
use serde::Serialize;

use crate::engine::policy::verify_entropy;
use crate::engine::signals::{self, PosSignals};
use crate::engine::survival::{shadow_drafts, shadow_verifies};
use crate::engine::{round, Backbone};
use crate::model::{AttnRule, LogitSel, Row, RowBatch};
use crate::rng::Rng;

/// Block sizes of the shadow.
const SIZES: [usize; 4] = [4, 8, 16, 32];
/// The canonical block the shadow advances with (the reference's L16 canonical).
const CANONICAL: usize = 16;
/// Answers `sim check` and its test measure (one sample of whole answers differs
/// from the next by 1–3%).
pub const DEFAULT_REQUESTS: usize = 400;
/// Relative tolerance the test holds every statistic to.
pub const TOLERANCE: f64 = 0.05;

/// One statistic: the simulator's value beside the published one.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    pub name: &'static str,
    pub simulated: f64,
    pub published: f64,
    /// Where the published figure comes from.
    pub source: &'static str,
}

impl Stat {
    /// simulated ÷ published − 1.
    pub fn error(&self) -> f64 {
        self.simulated / self.published - 1.0
    }

    pub fn within(&self, tol: f64) -> bool {
        self.error().abs() <= tol
    }
}

/// One shadow round: A_B at every size, and what the history knew before it.
struct ShadowRound {
    advance: [usize; 4],
    /// EWMA(0.5) of the canonical acceptance before this round.
    ewma: f64,
    /// The verifier-entropy signal of the two rounds before (the policy's).
    entropy: f64,
}

/// Draft-side counts of the canonical blocks.
#[derive(Default)]
struct DraftCounts {
    accepted_conf: (f64, usize),
    rejected_conf: (f64, usize),
    rank2: usize,
    rank23: usize,
    rejects: usize,
    /// After the first rejection: (agree, seen) at +1 and +4.
    align1: (usize, usize),
    align4: (usize, usize),
}

/// The statistics over `requests` whole answers (each to its EOS, as the reference
/// pooled whole answers: a hard answer takes more rounds and weighs more), or at most
/// `rounds` rounds of each.
pub fn statistics(
    model: &dyn Backbone,
    requests: usize,
    rounds: Option<usize>,
) -> Result<Vec<Stat>> {
    use rayon::prelude::*;
    // Answers are independent: shadowed in parallel, merged in order.
    let per_answer = (0..requests)
        .into_par_iter()
        .map(|r| {
            let (mut shadow, mut counts) = (Vec::new(), DraftCounts::default());
            shadow_request(model, r as u64, rounds, &mut shadow, &mut counts)?;
            Ok((shadow, counts))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut shadow = Vec::new();
    let mut counts = DraftCounts::default();
    for (s, c) in per_answer {
        shadow.extend(s);
        counts.add(&c);
    }
    Ok(summarise(&shadow, &counts))
}

impl DraftCounts {
    fn add(&mut self, o: &Self) {
        let pair = |a: &mut (usize, usize), b: (usize, usize)| {
            a.0 += b.0;
            a.1 += b.1;
        };
        self.accepted_conf.0 += o.accepted_conf.0;
        self.accepted_conf.1 += o.accepted_conf.1;
        self.rejected_conf.0 += o.rejected_conf.0;
        self.rejected_conf.1 += o.rejected_conf.1;
        self.rank2 += o.rank2;
        self.rank23 += o.rank23;
        self.rejects += o.rejects;
        pair(&mut self.align1, o.align1);
        pair(&mut self.align4, o.align4);
    }
}

/// A prompt of ordinary ids (its hash picks the answer).
fn prompt(model: &dyn Backbone, seed: u64) -> Vec<u32> {
    let v = model.config().vocab_size as u64;
    let mut rng = Rng::new(seed ^ 0x5eed);
    (0..24)
        .map(|_| 16 + (rng.next_u64() % (v - 16)) as u32)
        .collect()
}

fn shadow_request(
    model: &dyn Backbone,
    seed: u64,
    rounds: Option<usize>,
    shadow: &mut Vec<ShadowRound>,
    counts: &mut DraftCounts,
) -> Result<()> {
    let cfg = model.config();
    let (mask, eos) = (cfg.mask_token_id(), cfg.eos_token_ids());
    let mut cache = model.new_cache();
    let row = Row::new(0, prompt(model, seed), AttnRule::Causal)
        .commit()
        .logits(LogitSel::Last);
    let l = model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    let mut seed_tok = signals::signals(&l[0], mask)?[0].argmax;
    let (mut ewma, mut entropies): (Option<f64>, Vec<f64>) = (None, Vec::new());
    let max_pos = cfg.max_position_embeddings;
    let mut n = 0;
    while rounds.is_none_or(|r| n < r) && cache.len() + SIZES[3] < max_pos {
        n += 1;
        if eos.contains(&seed_tok) {
            break;
        }
        let drafts = shadow_drafts(seed_tok, mask, &SIZES);
        let dl = model.forward(&RowBatch::new(drafts), &mut [&mut cache])?;
        let draft_sig: Vec<Vec<PosSignals>> = dl
            .iter()
            .map(|l| signals::signals(l, mask))
            .collect::<Result<_>>()?;
        let blocks: Vec<Vec<u32>> = draft_sig
            .iter()
            .map(|s| {
                std::iter::once(seed_tok)
                    .chain(s.iter().map(|p| p.argmax))
                    .collect()
            })
            .collect();
        let canon = SIZES.iter().position(|&b| b == CANONICAL).unwrap_or(0);
        let rows = shadow_verifies(&blocks, |k| k == canon);
        let ctx = cache.len();
        let vl = model.forward(&RowBatch::new(rows), &mut [&mut cache])?;
        let mut advance = [0; 4];
        let mut canonical = None;
        for (k, (block, l)) in blocks.iter().zip(&vl).enumerate() {
            let sig = signals::signals(l, mask)?;
            let toks: Vec<u32> = sig.iter().map(|s| s.argmax).collect();
            let v = round::verify(block, &toks);
            advance[k] = v.advance();
            if k == canon {
                canonical = Some((v, sig));
            }
        }
        let Some((v, vsig)) = canonical else { break };
        // The longest block's draft against AR: confidences, the rank, the alignment.
        count_draft(
            &draft_sig[SIZES.len() - 1],
            &blocks[SIZES.len() - 1],
            &vl[SIZES.len() - 1],
            mask,
            counts,
        )?;
        if let Some(e) = ewma {
            let recent = &entropies[entropies.len().saturating_sub(2)..];
            shadow.push(ShadowRound {
                advance,
                ewma: e,
                entropy: recent.iter().sum::<f64>() / recent.len().max(1) as f64,
            });
        }
        let a = v.advance() as f64;
        ewma = Some(ewma.map_or(a, |e| 0.5 * a + 0.5 * e));
        let ents: Vec<f32> = vsig.iter().map(|s| s.entropy).collect();
        entropies.push(f64::from(verify_entropy(&ents, v.accepted)));
        cache.truncate(ctx + v.advance())?;
        seed_tok = v.bonus;
    }
    Ok(())
}

/// Folds one draft block (after its seed) and its verification into the counts.
fn count_draft(
    draft: &[PosSignals],
    block: &[u32],
    verify_logits: &candle_core::Tensor,
    mask: u32,
    c: &mut DraftCounts,
) -> Result<()> {
    let ar: Vec<u32> = signals::signals(verify_logits, mask)?
        .iter()
        .map(|s| s.argmax)
        .collect();
    let v = round::verify(block, &ar);
    // draft[i] is block position i + 1, which AR's ar[i] predicts.
    for (i, s) in draft.iter().enumerate().take(v.accepted) {
        debug_assert_eq!(s.argmax, ar[i]);
        c.accepted_conf.0 += f64::from(s.confidence);
        c.accepted_conf.1 += 1;
    }
    let Some(q) = v.first_reject else {
        return Ok(());
    };
    let s = &draft[q - 1];
    let truth = ar[q - 1];
    c.rejected_conf.0 += f64::from(s.confidence);
    c.rejected_conf.1 += 1;
    c.rejects += 1;
    let rank = s.top.iter().position(|&(id, _)| id == truth).map(|r| r + 1);
    c.rank2 += usize::from(rank == Some(2));
    c.rank23 += usize::from(matches!(rank, Some(2 | 3)));
    for (j, slot) in [(1, &mut c.align1), (4, &mut c.align4)] {
        if let (Some(d), Some(&t)) = (draft.get(q - 1 + j), ar.get(q - 1 + j)) {
            slot.0 += usize::from(d.argmax == t);
            slot.1 += 1;
        }
    }
    Ok(())
}

fn summarise(rounds: &[ShadowRound], c: &DraftCounts) -> Vec<Stat> {
    const SHADOW: &str = "§3.3 same-state shadow, 181,257 paired rounds";
    const CONF: &str = "§5 PyTorch (LoRA) draft";
    let n = rounds.len().max(1) as f64;
    let col = |k: usize| rounds.iter().map(move |r| r.advance[k]);
    let mut out = Vec::new();
    let published_mean = [3.669, 6.357, 10.219, 15.500];
    let published_full = [0.815, 0.597, 0.406, 0.272];
    let mean_names = ["mean A4", "mean A8", "mean A16", "mean A32"];
    let full_names = [
        "full-block rate B4",
        "full-block rate B8",
        "full-block rate B16",
        "full-block rate B32",
    ];
    for (k, &b) in SIZES.iter().enumerate() {
        out.push(Stat {
            name: mean_names[k],
            simulated: col(k).sum::<usize>() as f64 / n,
            published: published_mean[k],
            source: SHADOW,
        });
        out.push(Stat {
            name: full_names[k],
            simulated: col(k).filter(|&a| a == b).count() as f64 / n,
            published: published_full[k],
            source: SHADOW,
        });
    }
    // S(L1, L2, k) = P(A_L1 ≥ k | A_L2 ≥ k).
    let cond = |small: usize, large: usize, k: usize| {
        let given: Vec<&ShadowRound> = rounds.iter().filter(|r| r.advance[large] >= k).collect();
        given.iter().filter(|r| r.advance[small] >= k).count() as f64 / given.len().max(1) as f64
    };
    for (name, v, p) in [
        ("S(8,32,8)", cond(1, 3, 8), 0.943),
        ("S(16,32,16)", cond(2, 3, 16), 0.940),
        ("S(8,16,4)", cond(1, 2, 4), 0.989),
    ] {
        out.push(Stat {
            name,
            simulated: v,
            published: p,
            source: SHADOW,
        });
    }
    let ewma: Vec<f64> = rounds.iter().map(|r| r.ewma).collect();
    let a32: Vec<f64> = col(3).map(|a| a as f64).collect();
    out.push(Stat {
        name: "EWMA(0.5) vs A32, Pearson",
        simulated: pearson(&ewma, &a32),
        published: 0.625,
        source: SHADOW,
    });
    out.push(Stat {
        name: "EWMA(0.5) vs A32, Spearman",
        simulated: pearson(&ranks(&ewma), &ranks(&a32)),
        published: 0.607,
        source: SHADOW,
    });
    // worth32 after an L16 round: A32 − A16 ≥ 5; the better of the two history signals.
    let worth: Vec<bool> = rounds
        .iter()
        .map(|r| r.advance[3] >= r.advance[2] + 5)
        .collect();
    let neg_entropy: Vec<f64> = rounds.iter().map(|r| -r.entropy).collect();
    out.push(Stat {
        name: "AUROC worth32 (S16), best history signal",
        simulated: auroc(&ewma, &worth).max(auroc(&neg_entropy, &worth)),
        published: 0.842,
        source: "§3.3 held-out AUROC of history signals",
    });
    let mean = |(s, k): (f64, usize)| s / k.max(1) as f64;
    let share = |a: usize, b: usize| a as f64 / b.max(1) as f64;
    out.extend([
        Stat {
            name: "draft confidence, accepted",
            simulated: mean(c.accepted_conf),
            published: 0.954,
            source: CONF,
        },
        Stat {
            name: "draft confidence, first rejected",
            simulated: mean(c.rejected_conf),
            published: 0.569,
            source: CONF,
        },
        Stat {
            name: "AR's token is the draft's rank 2",
            simulated: share(c.rank2, c.rejects),
            published: 0.575,
            source: CONF,
        },
        Stat {
            name: "AR's token is the draft's rank 2-3",
            simulated: share(c.rank23, c.rejects),
            published: 0.733,
            source: CONF,
        },
        Stat {
            name: "draft agrees with AR +1 after the first rejection",
            simulated: share(c.align1.0, c.align1.1),
            published: 0.314,
            source: "§5 SGLang alignment",
        },
        Stat {
            name: "draft agrees with AR +4 after the first rejection",
            simulated: share(c.align4.0, c.align4.1),
            published: 0.197,
            source: "§5 SGLang alignment",
        },
    ]);
    out
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len()).max(1) as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt().max(1e-12)
}

/// Average ranks (ties share their mean rank), for Spearman's correlation.
fn ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut out = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            out[k] = r;
        }
        i = j + 1;
    }
    out
}

/// Area under the ROC curve of `score` for `label` (ties count a half).
fn auroc(score: &[f64], label: &[bool]) -> f64 {
    let r = ranks(score);
    let pos = label.iter().filter(|&&l| l).count() as f64;
    let neg = label.len() as f64 - pos;
    let sum: f64 = r
        .iter()
        .zip(label)
        .filter(|(_, &l)| l)
        .map(|(r, _)| r)
        .sum();
    (sum - pos * (pos + 1.0) / 2.0) / (pos * neg).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_statistics_are_right_on_small_cases() {
        assert_eq!(ranks(&[3.0, 1.0, 3.0]), vec![2.5, 1.0, 2.5]);
        assert!((auroc(&[0.1, 0.2, 0.9, 0.8], &[false, false, true, true]) - 1.0).abs() < 1e-12);
        assert!((auroc(&[1.0, 1.0], &[false, true]) - 0.5).abs() < 1e-12);
        assert!((pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-12);
    }
}
