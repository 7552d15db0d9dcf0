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
use super::objective;
use super::streams::Streams;
pub use super::streams::{pack, render_exchange};
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
    /// Total steps, the annealing phase included.
    pub steps: usize,
    /// Steps on the annealing stream (`corpus::anneal_exchange`) after the main phase,
    /// under their own warm-up and cosine; 0 for none.
    pub anneal_steps: usize,
    /// Share of the annealing phase's diffusion blocks noised as the draft sees its block
    /// (`objective::make_batch`); the main phase keeps t ~ U(0, 1) everywhere.
    pub draft_shaped: f64,
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
}

/// Peak learning rate of the annealing phase, as a share of `lr`: a re-warm that
/// moves the trained weights without undoing them.
pub const ANNEAL_PEAK: f64 = 1.0 / 3.0;
/// Warm-up steps of the annealing phase.
pub const ANNEAL_WARMUP: usize = 20;

/// First step of the annealing phase.
pub fn anneal_start(o: &TrainOptions) -> usize {
    o.steps - o.anneal_steps
}

/// The learning rate at `step`: linear warm-up, then cosine decay to `min_lr` over the
/// main phase; the annealing phase repeats that shape from `lr × ANNEAL_PEAK`.
pub fn lr_at(step: usize, o: &TrainOptions) -> f64 {
    let main = anneal_start(o);
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
    ];
    let mut run = Run::start(o, command, &mut note)?;
    // Out of time, the state says where the run stopped: the same command resumes.
    run.base(o, &sets, &mut progress, &mut note)?;
    Ok(run.state)
}

/// The options' limits, before anything is written.
fn check(o: &TrainOptions) -> Result<()> {
    ensure!(
        o.steps > o.warmup + o.anneal_steps,
        "--steps ({}) must exceed --warmup ({}) plus --anneal-steps ({})",
        o.steps,
        o.warmup,
        o.anneal_steps
    );
    ensure!(
        (0.0..=1.0).contains(&o.draft_shaped),
        "--draft-shaped ({}) must be a share between 0 and 1",
        o.draft_shaped
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
        let mut opt = AdamW::new(&varmap)?;
        let opt_path = o.state.join("optimizer.safetensors");
        // A finished run needs no moments.
        if state.step > 0 && state.step < o.steps {
            if let Err(e) = opt.load(&opt_path, state.step) {
                note(&format!(
                    "warning: {e:#}; resuming with fresh optimizer moments"
                ));
            }
        }
        state.command = command.to_string();
        state.steps = o.steps;
        // A draft adapter drafts for the weights it was trained beside (an older
        // version's `--lora-steps`, or one copied in): new steps make it stale, and
        // loading would put it on top of them.
        let adapter = o.out.join("linear_spec_lora");
        if state.step < o.steps && adapter.exists() {
            std::fs::remove_dir_all(&adapter)
                .with_context(|| format!("cannot remove the stale {}", adapter.display()))?;
            note(&format!(
                "removed the stale draft adapter {}",
                adapter.display()
            ));
        }
        Ok(Self {
            varmap,
            model,
            state,
            opt,
            state_path,
            opt_path,
        })
    }

    /// The model's steps through its two phases (`sets`: main, annealing), saved every
    /// `checkpoint_every`, until the last or the time budget.
    fn base(
        &mut self,
        o: &TrainOptions,
        sets: &[Vec<&[u32]>; 2],
        progress: &mut impl FnMut(&StepReport),
        note: &mut impl FnMut(&str),
    ) -> Result<()> {
        let device = Device::Cpu;
        let main_steps = anneal_start(o);
        let mut order: (usize, usize, Vec<usize>) = (usize::MAX, 0, Vec::new());
        let run_start = Instant::now();
        let elapsed_before = self.state.elapsed_secs;
        let blocks = [8usize, 16, 32];
        while self.state.step < o.steps {
            let step = self.state.step;
            // Phase, its sequences and the step within it.
            let (phase, local) = if step < main_steps {
                (0, step)
            } else {
                (1, step - main_steps)
            };
            let batch_seqs = batch_at(&sets[phase], o, phase, local, &mut order);
            let mut rng = Rng::new(o.seed ^ (step as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
            let block = blocks[step % blocks.len()];
            let draft_shaped = if phase == 0 { 0.0 } else { o.draft_shaped };
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
                return Ok(());
            }
        }
        Ok(())
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
