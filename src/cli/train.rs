//! `specscope train`: make the bundled model (or a toy one).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use specscope::model::synthetic::Spec;
use specscope::train::trainer::{self, TrainOptions};

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// Output model directory (the real NLD layout).
    #[arg(long, default_value = "assets/tiny-nld")]
    pub out: PathBuf,
    /// Resume state (optimizer moments); not part of the model.
    #[arg(long, default_value = "target/train-state")]
    pub state: PathBuf,
    /// `small` (the bundled ~4M model) or `toy` (seconds, for tests).
    #[arg(long, default_value = "small")]
    pub preset: String,
    /// Total steps, the annealing phase included (the defaults make the bundled model).
    #[arg(long, default_value_t = 3650)]
    pub steps: usize,
    /// The last steps train on the annealing stream, where word tasks weigh most, under
    /// their own warm-up and cosine from a third of --lr; 0 for none.
    #[arg(long, default_value_t = 2200)]
    pub anneal_steps: usize,
    /// The last steps train on the annealing mix with each answer's wording varied
    /// (openings, connectives), from fresh optimizer moments; 0 for none.
    #[arg(long, default_value_t = 0)]
    pub restyle_steps: usize,
    /// Share of the annealing phase's diffusion blocks noised as the draft sees its
    /// block: the first token clean, the rest masked.
    #[arg(long, default_value_t = 0.25)]
    pub draft_shaped: f64,
    /// The same share in the restyle phase.
    #[arg(long, default_value_t = 0.25)]
    pub restyle_draft_shaped: f64,
    /// Steps of the draft adapter phase after --steps: with the base frozen, a
    /// `linear_spec_lora/` that drafts the verifier's choices; 0 for none.
    #[arg(long, default_value_t = 0)]
    pub lora_steps: usize,
    /// Rank of the draft adapter (lora_alpha = 4 × rank, as NLD's scale 4).
    #[arg(long, default_value_t = 32)]
    pub lora_rank: usize,
    /// Peak learning rate of the adapter phase.
    #[arg(long, default_value_t = 2e-3)]
    pub lora_lr: f64,
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    #[arg(long, default_value_t = 256)]
    pub seq_len: usize,
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    #[arg(long, default_value_t = 60)]
    pub warmup: usize,
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// Exchanges generated for the corpus.
    #[arg(long, default_value_t = 60_000)]
    pub exchanges: usize,
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: usize,
    /// Stop with a checkpoint after this many minutes (run again to resume).
    #[arg(long)]
    pub max_minutes: Option<f64>,
    /// Where to write the held-out prompt files.
    #[arg(long, default_value = "assets/prompts")]
    pub prompts: PathBuf,
    /// Held-out prompts per family.
    #[arg(long, default_value_t = 60)]
    pub heldout: usize,
}

pub fn run(a: TrainArgs) -> Result<()> {
    let spec = match a.preset.as_str() {
        "small" => Spec::bundled(),
        "toy" => Spec::toy_trainable(),
        other => anyhow::bail!("--preset {other}: expected small or toy"),
    };
    let o = TrainOptions {
        out: a.out,
        state: a.state,
        spec,
        steps: a.steps,
        anneal_steps: a.anneal_steps,
        restyle_steps: a.restyle_steps,
        draft_shaped: a.draft_shaped,
        restyle_draft_shaped: a.restyle_draft_shaped,
        lora_steps: a.lora_steps,
        lora_rank: a.lora_rank,
        lora_lr: a.lora_lr,
        batch: a.batch,
        seq_len: a.seq_len,
        lr: a.lr,
        min_lr: a.lr / 10.0,
        warmup: a.warmup,
        weight_decay: 0.01,
        clip: 1.0,
        seed: a.seed,
        exchanges: a.exchanges,
        checkpoint_every: a.checkpoint_every,
        max_minutes: a.max_minutes,
        prompts_dir: Some(a.prompts),
        heldout_per_family: a.heldout,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let total = (o.steps + o.lora_steps) as u64;
    let mut progress = super::progress::Progress::new("train", total);
    let state = trainer::train(
        &o,
        &command,
        |r| {
            let losses = match r.draft {
                Some((loss, agree)) => {
                    format!("adapter: draft {loss:.3} agrees {:.1}%", 100.0 * agree)
                }
                None => format!("ar {:.3} dlm {:.3}", r.ar, r.dlm),
            };
            progress.set(
                r.step as u64,
                &format!(
                    "{losses} |g| {:.2} lr {:.2e} B={} {:.0} tok/s",
                    r.grad_norm, r.lr, r.block, r.tokens_per_sec
                ),
            )
        },
        |note| eprintln!("specscope train: {note}"),
    )?;
    progress.finish("stopped");
    let (ar, dlm) = trainer::recent_losses(&state, 20);
    eprintln!(
        "specscope train: step {}/{}, {:.1} min, {} clean tokens, last-20 losses: ar {ar:.3}, dlm {dlm:.3}",
        state.step,
        state.steps,
        state.elapsed_secs / 60.0,
        state.clean_tokens_seen
    );
    if state.lora_step > 0 {
        let tail = &state.lora_losses[state.lora_losses.len().saturating_sub(20)..];
        let k = tail.len().max(1) as f32;
        eprintln!(
            "specscope train: draft adapter step {}/{}, {:.1} min, last-20 draft loss {:.3}, agreement with the verifier {:.1}%",
            state.lora_step,
            o.lora_steps,
            state.lora_elapsed_secs / 60.0,
            tail.iter().map(|l| l.1).sum::<f32>() / k,
            100.0 * tail.iter().map(|l| l.2).sum::<f32>() / k,
        );
    }
    Ok(())
}
