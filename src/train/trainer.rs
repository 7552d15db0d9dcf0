//! `specscope train`: corpus → tokenizer → joint AR + block-diffusion training of the
//! same `src/model` code that serves inference, with AdamW, warm-up + cosine decay,
//! gradient clipping, resumable checkpoints and a progress line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, ensure, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use serde::{Deserialize, Serialize};

use super::adamw::AdamW;
use super::streams::Streams;
pub use super::streams::{pack, render_exchange};
use super::{draft_lora, objective};
use crate::model::synthetic::{self, Spec, BOS_ID, EOS_ID, MASK_ID, SPECIAL_TOKENS};
use crate::model::{Config, Model};
use crate::rng::Rng;

/// Everything that decides a training run.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub out: PathBuf,
    /// Optimizer moments and the data cursor for resuming (not shipped).
    pub state: PathBuf,
    /// Geometry of the model to train (`Spec::bundled()` or `Spec::toy_trainable()`).
    pub spec: Spec,
    /// Total steps, the annealing and restyle phases included.
    pub steps: usize,
    /// Steps on the annealing stream (`corpus::anneal_exchange`) after the main phase,
    /// under their own warm-up and cosine; 0 for none.
    pub anneal_steps: usize,
    /// The last steps train on the restyle stream (`corpus::generate_restyle`: the
    /// annealing mix with varied wording) with fresh optimizer moments, under their own
    /// warm-up and cosine; 0 for none.
    pub restyle_steps: usize,
    /// Share of the annealing phase's diffusion blocks noised as the draft sees its block
    /// (`objective::make_batch`); the main phase keeps t ~ U(0, 1) everywhere.
    pub draft_shaped: f64,
    /// The same share in the restyle phase: where an answer's wording is open, only
    /// blocks drafted from their seed teach the draft how open it is.
    pub restyle_draft_shaped: f64,
    /// Steps of the draft adapter phase after the base's steps (`draft_lora`); 0 for none.
    pub lora_steps: usize,
    pub lora_rank: usize,
    /// Peak learning rate of the adapter phase (warm-up, then cosine to a tenth).
    pub lora_lr: f64,
    pub batch: usize,
    pub seq_len: usize,
    pub lr: f64,
    pub min_lr: f64,
    pub warmup: usize,
    pub weight_decay: f64,
    pub clip: f64,
    pub seed: u64,
    pub exchanges: usize,
    pub checkpoint_every: usize,
    /// Stop (with a checkpoint) after this much wall time; resume later.
    pub max_minutes: Option<f64>,
    /// Where to write held-out prompt files (`math.jsonl`, …), if anywhere.
    pub prompts_dir: Option<PathBuf>,
    pub heldout_per_family: usize,
}

/// Progress and results kept next to the weights (`train_state.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrainState {
    pub step: usize,
    pub steps: usize,
    pub seed: u64,
    pub elapsed_secs: f64,
    pub clean_tokens_seen: usize,
    /// (step, ar loss, dlm loss) every logged step.
    pub losses: Vec<(usize, f32, f32)>,
    pub command: String,
    /// Steps of the draft adapter phase done.
    #[serde(default)]
    pub lora_step: usize,
    /// (adapter step, draft loss, agreement with the verifier) every adapter step.
    #[serde(default)]
    pub lora_losses: Vec<(usize, f32, f32)>,
    #[serde(default)]
    pub lora_elapsed_secs: f64,
}

/// Peak learning rate of the annealing phase, as a share of `lr`: a re-warm that
/// moves the trained weights without undoing them.
pub const ANNEAL_PEAK: f64 = 1.0 / 3.0;
/// Warm-up steps of the annealing phase.
pub const ANNEAL_WARMUP: usize = 20;

/// Peak learning rate of the restyle phase, as a share of `lr`: about the floor the
/// annealing phase ends at (a tenth), as it only rewords answers the model already
/// gives; a re-warm to a sixth moved the margin less (docs/results.md, the restyle
/// phase, run 1).
pub const RESTYLE_PEAK: f64 = 1.0 / 9.0;

/// First step of the annealing and of the restyle phase.
pub fn phase_starts(o: &TrainOptions) -> (usize, usize) {
    let restyle = o.steps - o.restyle_steps;
    (restyle - o.anneal_steps, restyle)
}

/// The learning rate at `step`: linear warm-up, then cosine decay to `min_lr` over the
/// main phase; the annealing phase repeats that shape from `lr × ANNEAL_PEAK`, the
/// restyle phase from `lr × RESTYLE_PEAK`.
pub fn lr_at(step: usize, o: &TrainOptions) -> f64 {
    let (main, restyle) = phase_starts(o);
    if step >= restyle {
        let warmup = ANNEAL_WARMUP.min(o.restyle_steps / 2);
        return cosine(
            step - restyle,
            warmup,
            o.restyle_steps,
            o.lr * RESTYLE_PEAK,
            o.min_lr,
        );
    }
    if step >= main {
        let warmup = ANNEAL_WARMUP.min(o.anneal_steps / 2);
        return cosine(
            step - main,
            warmup,
            o.anneal_steps,
            o.lr * ANNEAL_PEAK,
            o.min_lr,
        );
    }
    cosine(step, o.warmup, main, o.lr, o.min_lr)
}

fn cosine(step: usize, warmup: usize, total: usize, peak: f64, min: f64) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let progress = (step - warmup) as f64 / (total - warmup).max(1) as f64;
    min + 0.5 * (peak - min) * (1.0 + (std::f64::consts::PI * progress.min(1.0)).cos())
}

fn write_model_files(dir: &Path, spec: &Spec, varmap: &VarMap) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let cfg = spec.config_json();
    std::fs::write(dir.join("config.json"), serde_json::to_string_pretty(&cfg)?)?;
    varmap
        .save(dir.join("model.safetensors"))
        .with_context(|| format!("cannot write {}", dir.join("model.safetensors").display()))?;
    std::fs::write(dir.join("chat_template.jinja"), synthetic::CHAT_TEMPLATE)?;
    let tcfg = serde_json::json!({"bos_token": "<s>", "eos_token": "<|im_end|>", "pad_token": "<pad>",
        "model_max_length": spec.max_position_embeddings});
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::to_string_pretty(&tcfg)?,
    )?;
    let gen = serde_json::json!({"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID]});
    std::fs::write(
        dir.join("generation_config.json"),
        serde_json::to_string_pretty(&gen)?,
    )?;
    Ok(())
}

/// One training step, as progress reports it.
#[derive(Debug, Clone, Copy)]
pub struct StepReport {
    pub step: usize,
    pub steps: usize,
    pub ar: f32,
    pub dlm: f32,
    pub grad_norm: f64,
    pub lr: f64,
    pub block: usize,
    /// Clean tokens per second over the whole run so far.
    pub tokens_per_sec: f64,
    /// In the adapter phase: (draft loss, agreement with the verifier); `ar`, `dlm` are 0.
    pub draft: Option<(f32, f32)>,
}

/// Runs (or resumes) training; returns the state at the end. `progress` hears about
/// every step; notes (corpus size, resuming, the time budget) go to `note`.
pub fn train(
    o: &TrainOptions,
    command: &str,
    mut progress: impl FnMut(&StepReport),
    mut note: impl FnMut(&str),
) -> Result<TrainState> {
    check(o)?;
    for dir in [&o.out, &o.state] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let streams = Streams::build(o, &mut note)?;
    let sets = [
        streams.main.chunks_exact(o.seq_len).collect::<Vec<_>>(),
        streams.anneal.chunks_exact(o.seq_len).collect(),
        streams.restyle.chunks_exact(o.seq_len).collect(),
    ];
    let mut run = Run::start(o, command, &mut note)?;
    let run_start = Instant::now();
    if !run.base(o, &sets, &mut progress, &mut note)? {
        return Ok(run.state); // out of time: the same command resumes
    }
    let mut state = run.state;
    if o.lora_steps > state.lora_step {
        let set = if sets[1].is_empty() {
            &sets[0]
        } else {
            &sets[1]
        };
        let left = o
            .max_minutes
            .map(|m| m - run_start.elapsed().as_secs_f64() / 60.0);
        let o = TrainOptions {
            max_minutes: left,
            ..o.clone()
        };
        train_draft_adapter(
            &o,
            &run.cfg,
            set,
            &mut state,
            &run.state_path,
            &mut progress,
            &mut note,
        )?;
    }
    Ok(state)
}

/// The options' limits, before anything is written.
fn check(o: &TrainOptions) -> Result<()> {
    ensure!(
        o.steps > o.warmup + o.anneal_steps + o.restyle_steps,
        "--steps ({}) must exceed --warmup ({}) plus --anneal-steps ({}) plus --restyle-steps ({})",
        o.steps,
        o.warmup,
        o.anneal_steps,
        o.restyle_steps
    );
    for (flag, share) in [
        ("--draft-shaped", o.draft_shaped),
        ("--restyle-draft-shaped", o.restyle_draft_shaped),
    ] {
        ensure!(
            (0.0..=1.0).contains(&share),
            "{flag} ({share}) must be a share between 0 and 1"
        );
    }
    ensure!(
        o.lora_steps == 0 || o.lora_rank > 0,
        "--lora-rank must be positive when --lora-steps is set"
    );
    ensure!(
        o.seq_len.is_multiple_of(32),
        "seq_len must be a multiple of 32 (the largest block)"
    );
    Ok(())
}

/// The model, its optimizer and the training state: fresh, or resumed from `o.out`.
struct Run {
    varmap: VarMap,
    model: Model,
    cfg: Config,
    state: TrainState,
    opt: AdamW,
    state_path: PathBuf,
    opt_path: PathBuf,
}

impl Run {
    fn start(o: &TrainOptions, command: &str, note: &mut impl FnMut(&str)) -> Result<Self> {
        let device = Device::Cpu;
        let mut varmap = VarMap::new();
        let cfg: Config = serde_json::from_value(o.spec.config_json())?;
        let model = Model::new(&cfg, VarBuilder::from_varmap(&varmap, DType::F32, &device))?;
        let state_path = o.out.join("train_state.json");
        let mut state: TrainState = if state_path.is_file() {
            serde_json::from_str(&std::fs::read_to_string(&state_path)?)
                .with_context(|| format!("invalid {}", state_path.display()))?
        } else {
            TrainState {
                steps: o.steps,
                seed: o.seed,
                ..TrainState::default()
            }
        };
        if state.step > 0 {
            varmap
                .load(o.out.join("model.safetensors"))
                .context("resuming weights")?;
        } else {
            init_weights(&varmap, o, &device)?;
        }
        let (_, restyle_start) = phase_starts(o);
        let mut opt = AdamW::new(&varmap)?;
        let opt_path = o.state.join("optimizer.safetensors");
        // A finished base needs no moments (only its adapter phase may be left to
        // run), nor does the restyle phase's first step (it starts with fresh ones).
        let in_restyle = o.restyle_steps > 0 && state.step >= restyle_start;
        if state.step > 0 && state.step < o.steps && !(in_restyle && state.step == restyle_start) {
            // Adam's step count restarts with the restyle phase's moments.
            let t = if in_restyle {
                state.step - restyle_start
            } else {
                state.step
            };
            if let Err(e) = opt.load(&opt_path, t) {
                note(&format!(
                    "warning: {e:#}; resuming with fresh optimizer moments"
                ));
            }
        }
        state.command = command.to_string();
        state.steps = o.steps;
        // An adapter drafts for the base it was trained on: new base steps discard it.
        let adapter = o.out.join(draft_lora::DIR);
        if state.step < o.steps && (state.lora_step > 0 || adapter.exists()) {
            if adapter.exists() {
                std::fs::remove_dir_all(&adapter)
                    .with_context(|| format!("cannot remove the stale {}", adapter.display()))?;
            }
            state.lora_step = 0;
            state.lora_losses.clear();
            state.lora_elapsed_secs = 0.0;
        }
        Ok(Self {
            varmap,
            model,
            cfg,
            state,
            opt,
            state_path,
            opt_path,
        })
    }

    /// The base model's steps through its three phases (`sets`: main, annealing,
    /// restyle), saved every `checkpoint_every`. False when the time budget ran out
    /// first.
    fn base(
        &mut self,
        o: &TrainOptions,
        sets: &[Vec<&[u32]>; 3],
        progress: &mut impl FnMut(&StepReport),
        note: &mut impl FnMut(&str),
    ) -> Result<bool> {
        let device = Device::Cpu;
        let (main_steps, restyle_start) = phase_starts(o);
        let mut order: (usize, usize, Vec<usize>) = (usize::MAX, 0, Vec::new());
        let run_start = Instant::now();
        let elapsed_before = self.state.elapsed_secs;
        let blocks = [8usize, 16, 32];
        while self.state.step < o.steps {
            let step = self.state.step;
            // Phase, its sequences and the step within it.
            let (phase, local) = if step < main_steps {
                (0, step)
            } else if step < restyle_start {
                (1, step - main_steps)
            } else {
                if step == restyle_start && step > 0 {
                    // A new phase on reworded answers: moments from the old wording
                    // would carry its gradients' scale into the first steps.
                    self.opt = AdamW::new(&self.varmap)?;
                }
                (2, step - restyle_start)
            };
            let batch_seqs = batch_at(&sets[phase], o, phase, local, &mut order);
            let mut rng = Rng::new(o.seed ^ (step as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
            let block = blocks[step % blocks.len()];
            let draft_shaped = match phase {
                0 => 0.0,
                1 => o.draft_shaped,
                _ => o.restyle_draft_shaped,
            };
            let batch = objective::make_batch(
                &batch_seqs,
                block,
                MASK_ID,
                draft_shaped,
                &mut rng,
                &device,
            )?;
            let (loss, ar, dlm) = objective::losses(&self.model, &batch)?;
            let grads = loss.backward()?;
            let lr = lr_at(step, o);
            let norm = self.opt.step(&grads, lr, o.weight_decay, o.clip)?;
            let state = &mut self.state;
            state.step += 1;
            state.clean_tokens_seen += o.batch * o.seq_len;
            state.losses.push((state.step, ar, dlm));
            let run_secs = run_start.elapsed().as_secs_f64();
            state.elapsed_secs = elapsed_before + run_secs;
            progress(&StepReport {
                step: state.step,
                steps: o.steps,
                ar,
                dlm,
                grad_norm: norm,
                lr,
                block,
                tokens_per_sec: (o.batch * o.seq_len) as f64 * (state.step as f64)
                    / state.elapsed_secs.max(1e-9),
                draft: None,
            });
            let out_of_time = o.max_minutes.is_some_and(|m| run_secs > m * 60.0);
            if state.step.is_multiple_of(o.checkpoint_every) || state.step == o.steps || out_of_time
            {
                write_model_files(&o.out, &o.spec, &self.varmap)?;
                self.opt.save(&self.opt_path)?;
                std::fs::write(&self.state_path, serde_json::to_string(&self.state)?)?;
            }
            if out_of_time {
                note(&format!(
                    "time budget reached at step {}; run the same command to resume",
                    self.state.step
                ));
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Fresh weights, drawn from the seed in the weights' name order: the head scaled so
/// the initial loss starts near ln(vocab), not above it.
fn init_weights(varmap: &VarMap, o: &TrainOptions, device: &Device) -> Result<()> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| anyhow!("var map lock poisoned"))?;
    let mut rng = Rng::new(o.seed);
    // In name order: the var map is a hash map, whose order changes from process to
    // process, and the draws must not (a run is its seed's).
    let mut vars: Vec<_> = data.iter().collect();
    vars.sort_by(|a, b| a.0.cmp(b.0));
    for (name, var) in vars {
        let dims = var.as_tensor().dims().to_vec();
        let std = match name.as_str() {
            "diffusion_head.weight" => 0.02 / (o.spec.hidden_size as f64).sqrt(),
            "encoder.embed_tokens.weight" => 0.5,
            n if n.ends_with("norm.weight") => continue,
            _ => 1.0 / (dims[1] as f64).sqrt(),
        };
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|_| (rng.normal() * std) as f32).collect();
        var.set(&Tensor::from_vec(v, dims.as_slice(), device)?)?;
    }
    Ok(())
}

/// The `local`-th batch of a phase's sequences. One shuffle per epoch, from its seed
/// alone, so a resumed run sees the batches an uninterrupted one would; `order` caches
/// (epoch, phase, permutation).
fn batch_at<'a>(
    set: &[&'a [u32]],
    o: &TrainOptions,
    phase: usize,
    local: usize,
    order: &mut (usize, usize, Vec<usize>),
) -> Vec<&'a [u32]> {
    let epoch = local * o.batch / set.len();
    if (order.0, order.1) != (epoch, phase) {
        let mut ids: Vec<usize> = (0..set.len()).collect();
        let salt = (epoch as u64 + 1) * 0x9E37 + phase as u64 * 0x5851_F42D;
        let mut shuffle_rng = Rng::new(o.seed ^ salt);
        for i in (1..ids.len()).rev() {
            let j = (shuffle_rng.next_u64() % (i as u64 + 1)) as usize;
            ids.swap(i, j);
        }
        *order = (epoch, phase, ids);
    }
    let start = (local * o.batch) % set.len();
    (0..o.batch)
        .map(|k| set[order.2[(start + k) % set.len()]])
        .collect()
}

/// The adapter phase (`draft_lora`): the base, frozen, read back from `o.out`; the
/// adapter and its optimizer moments saved like the base's, so it resumes too.
#[allow(clippy::too_many_arguments)]
fn train_draft_adapter(
    o: &TrainOptions,
    cfg: &Config,
    set: &[&[u32]],
    state: &mut TrainState,
    state_path: &Path,
    progress: &mut impl FnMut(&StepReport),
    note: &mut impl FnMut(&str),
) -> Result<()> {
    let device = Device::Cpu;
    let shape = draft_lora::Shape {
        rank: o.lora_rank,
        alpha: 4.0 * o.lora_rank as f64,
    };
    let base = draft_lora::frozen_base(&o.out, cfg, &device)?;
    let saved = o
        .out
        .join(draft_lora::DIR)
        .join("adapter_model.safetensors");
    let resume = (state.lora_step > 0).then_some(saved.as_path());
    let (model, varmap) = draft_lora::build(base, cfg, shape, o.seed, resume)?;
    let mut opt = AdamW::new(&varmap)?;
    let opt_path = o.state.join("lora_optimizer.safetensors");
    if state.lora_step > 0 {
        note(&format!(
            "resuming the draft adapter at step {}",
            state.lora_step
        ));
        if let Err(e) = opt.load(&opt_path, state.lora_step) {
            note(&format!(
                "warning: {e:#}; resuming with fresh optimizer moments"
            ));
        }
    }
    let mut order: (usize, usize, Vec<usize>) = (usize::MAX, 0, Vec::new());
    let run_start = Instant::now();
    let elapsed_before = state.lora_elapsed_secs;
    let blocks = [8usize, 16, 32];
    while state.lora_step < o.lora_steps {
        let step = state.lora_step;
        let batch_seqs = batch_at(set, o, 2, step, &mut order);
        let mut rng = Rng::new(o.seed ^ 0x10FA ^ (step as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let block = blocks[step % blocks.len()];
        // Every block as the draft sees it.
        let batch = objective::make_batch(&batch_seqs, block, MASK_ID, 1.0, &mut rng, &device)?;
        let (loss, agree) = draft_lora::losses(&model, &batch)?;
        let loss_v = loss.to_scalar::<f32>()?;
        let grads = loss.backward()?;
        let warmup = LORA_WARMUP.min(o.lora_steps / 4);
        let lr = cosine(step, warmup, o.lora_steps, o.lora_lr, o.lora_lr / 10.0);
        let norm = opt.step(&grads, lr, 0.0, o.clip)?;
        state.lora_step += 1;
        state.lora_losses.push((state.lora_step, loss_v, agree));
        let run_secs = run_start.elapsed().as_secs_f64();
        state.lora_elapsed_secs = elapsed_before + run_secs;
        progress(&StepReport {
            step: o.steps + state.lora_step,
            steps: o.steps + o.lora_steps,
            ar: 0.0,
            dlm: 0.0,
            grad_norm: norm,
            lr,
            block,
            tokens_per_sec: (o.batch * o.seq_len) as f64 * state.lora_step as f64
                / state.lora_elapsed_secs.max(1e-9),
            draft: Some((loss_v, agree)),
        });
        let out_of_time = o.max_minutes.is_some_and(|m| run_secs > m * 60.0);
        let done = state.lora_step == o.lora_steps;
        if state.lora_step.is_multiple_of(o.checkpoint_every) || done || out_of_time {
            draft_lora::save(&o.out, shape, &varmap)?;
            opt.save(&opt_path)?;
            std::fs::write(state_path, serde_json::to_string(&*state)?)?;
        }
        if out_of_time {
            note(&format!(
                "time budget reached at adapter step {}; run the same command to resume",
                state.lora_step
            ));
            break;
        }
    }
    Ok(())
}

/// Warm-up steps of the adapter phase.
const LORA_WARMUP: usize = 20;

/// Mean of the last `n` logged (ar, dlm) losses.
pub fn recent_losses(state: &TrainState, n: usize) -> (f32, f32) {
    let tail = &state.losses[state.losses.len().saturating_sub(n)..];
    let k = tail.len().max(1) as f32;
    (
        tail.iter().map(|l| l.1).sum::<f32>() / k,
        tail.iter().map(|l| l.2).sum::<f32>() / k,
    )
}

/// Special-token ids, for the model card.
pub fn special_ids() -> BTreeMap<&'static str, usize> {
    SPECIAL_TOKENS
        .iter()
        .enumerate()
        .map(|(i, t)| (*t, i))
        .collect()
}
