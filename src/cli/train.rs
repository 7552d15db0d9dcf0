//! `specscope train`: make the bundled model (or a toy one).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use specscope::model::synthetic::Spec;
use specscope::train::trainer::{self, TrainOptions};

/// What `specscope train` makes.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
pub enum TrainPreset {
    /// The bundled ~4M model: 3,650 steps, about 50 minutes here.
    #[default]
    Small,
    /// A 320-token model in 20 steps on 2,000 exchanges: about 15 seconds here, for
    /// tests.
    Toy,
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// Output model directory (the real NLD layout). A new directory by default: the
    /// shipped model (assets/tiny-nld) is only written with --force.
    #[arg(long, default_value = "trained/tiny-nld")]
    pub out: PathBuf,
    /// Replace a model in --out that this run cannot resume (a finished one, or the
    /// shipped model), and the held-out prompt files in --prompts.
    #[arg(long)]
    pub force: bool,
    /// Resume state (optimizer moments); not part of the model.
    #[arg(long, default_value = "target/train-state")]
    pub state: PathBuf,
    /// What to train.
    #[arg(long, value_enum, default_value_t)]
    pub preset: TrainPreset,
    /// Total steps, the annealing phase included [default: the preset's, 3650 or 20].
    #[arg(long)]
    pub steps: Option<usize>,
    /// The last steps train on the annealing stream, where word tasks weigh most, under
    /// their own warm-up and cosine from a third of --lr; 0 for none [default: the
    /// preset's, 2200 or 0].
    #[arg(long)]
    pub anneal_steps: Option<usize>,
    /// Share of the annealing phase's diffusion blocks noised as the draft sees its
    /// block: the first token clean, the rest masked.
    #[arg(long, default_value_t = 0.25)]
    pub draft_shaped: f64,
    /// Sequences per step.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Tokens per training sequence.
    #[arg(long, default_value_t = 256)]
    pub seq_len: usize,
    /// Peak learning rate (cosine to a tenth of it after the warm-up).
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Steps of linear warm-up to --lr [default: the preset's, 60 or 5].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Seed of the corpus, the initial weights and the batches.
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// Exchanges generated for the corpus [default: the preset's, 60000 or 2000].
    #[arg(long)]
    pub exchanges: Option<usize>,
    /// Steps between checkpoints (the model and the resume state written to --out).
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: usize,
    /// Stop with a checkpoint after this many minutes (run again to resume).
    #[arg(long)]
    pub max_minutes: Option<f64>,
    /// Where to write the held-out prompt files (the shipped ones, assets/prompts, only
    /// with --force).
    #[arg(long, default_value = "trained/prompts")]
    pub prompts: PathBuf,
    /// Held-out prompts per family.
    #[arg(long, default_value_t = 60)]
    pub heldout: usize,
}

/// Refuses, without --force, to write over the shipped model or prompts, or over a
/// model in --out that this run would not resume (one without a resume state).
fn refuse_to_replace(a: &TrainArgs) -> Result<()> {
    if a.force {
        return Ok(());
    }
    let same = |x: &std::path::Path, y: &std::path::Path| matches!((x.canonicalize(), y.canonicalize()), (Ok(p), Ok(q)) if p == q);
    let assets = specscope::model::source::assets_dir();
    if same(&a.out, &assets.join("tiny-nld")) {
        anyhow::bail!(
            "--out {} is the shipped model: pass --force to retrain it in place",
            a.out.display()
        );
    }
    if same(&a.prompts, &assets.join("prompts")) {
        anyhow::bail!(
            "--prompts {} holds the shipped held-out sets: pass --force to rewrite them",
            a.prompts.display()
        );
    }
    // A resumed run writes the same held-out files again; a new one replaces none.
    let resuming = a.out.join("train_state.json").is_file();
    if !resuming {
        let names: Vec<String> = specscope::train::corpus::Family::ALL
            .iter()
            .map(|f| format!("{}.jsonl", f.name()))
            .collect();
        specscope::output::claim_in(&a.prompts, &names, "--prompts", false)?;
    }
    if a.out.join("model.safetensors").is_file() && !resuming {
        anyhow::bail!(
            "{} holds a model this run cannot resume (no train_state.json): pass --force to replace it, or choose another --out",
            a.out.display()
        );
    }
    Ok(())
}

pub fn run(a: TrainArgs) -> Result<()> {
    // (model, steps, annealing steps, exchanges, warm-up) of each preset.
    let (spec, steps, anneal, exchanges, warmup) = match a.preset {
        TrainPreset::Small => (Spec::bundled(), 3650, 2200, 60_000, 60),
        TrainPreset::Toy => (Spec::toy_trainable(), 20, 0, 2000, 5),
    };
    refuse_to_replace(&a)?;
    let o = TrainOptions {
        out: a.out,
        state: a.state,
        spec,
        steps: a.steps.unwrap_or(steps),
        anneal_steps: a.anneal_steps.unwrap_or(anneal),
        draft_shaped: a.draft_shaped,
        batch: a.batch,
        seq_len: a.seq_len,
        lr: a.lr,
        min_lr: a.lr / 10.0,
        warmup: a.warmup.unwrap_or(warmup),
        weight_decay: 0.01,
        clip: 1.0,
        seed: a.seed,
        exchanges: a.exchanges.unwrap_or(exchanges),
        checkpoint_every: a.checkpoint_every,
        max_minutes: a.max_minutes,
        prompts_dir: Some(a.prompts),
        heldout_per_family: a.heldout,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let total = o.steps as u64;
    let mut progress = super::progress::Progress::new("train", total);
    let state = trainer::train(
        &o,
        &command,
        |r| {
            progress.set(
                r.step as u64,
                &format!(
                    "ar {:.3} dlm {:.3} |g| {:.2} lr {:.2e} B={} {:.0} tok/s",
                    r.ar, r.dlm, r.grad_norm, r.lr, r.block, r.tokens_per_sec
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
    Ok(())
}
