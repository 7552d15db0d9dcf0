//! `specscope synthetic`: a random checkpoint with the real NLD tensor names, config,
//! tokenizer, template and draft adapter, written one tensor at a time. What the GPU
//! check times an NLD-3B or NLD-8B geometry with, on a host that has only this binary.

use std::path::PathBuf;

use anyhow::{bail, Result};
use candle_core::DType;
use clap::Args;

use specscope::model::synthetic::{self, Spec};

#[derive(Debug, Clone, Args)]
pub struct SyntheticArgs {
    /// The directory to write (created; files of a checkpoint already in it are
    /// replaced only with --force).
    pub out: PathBuf,
    /// The geometry: toy, small-4m, bundled, real-vocab, nld-1b, or nld-3b / nld-8b
    /// (Nemotron-Labs-Diffusion's, in bf16, each large tensor a repeated random run:
    /// for timing forwards; its tokens mean nothing).
    #[arg(long, default_value = "small-4m",
          value_parser = clap::builder::PossibleValuesParser::new(Spec::NAMES))]
    pub geometry: String,
    /// The weights' dtype: f32, bf16 or f16 (default: the geometry's).
    #[arg(long, value_parser = ["f32", "bf16", "f16"])]
    pub dtype: Option<String>,
    /// Replace the checkpoint's files already in OUT.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: SyntheticArgs) -> Result<()> {
    let Some(mut spec) = Spec::named(&args.geometry) else {
        bail!(
            "--geometry {}: expected one of {}",
            args.geometry,
            Spec::NAMES.join(", ")
        );
    };
    spec.dtype = match args.dtype.as_deref() {
        None => spec.dtype,
        Some("f32") => DType::F32,
        Some("bf16") => DType::BF16,
        Some(_) => DType::F16,
    };
    let names: Vec<String> = synthetic::CHECKPOINT_FILES
        .iter()
        .map(|n| n.to_string())
        .collect();
    specscope::output::claim_in(&args.out, &names, "OUT", args.force)?;
    synthetic::write_checkpoint(&args.out, &spec)?;
    outln!(
        "wrote {}: {}, {:.3}B parameters, {:?}",
        args.out.display(),
        args.geometry,
        synthetic::param_count(&spec) as f64 / 1e9,
        spec.dtype
    );
    Ok(())
}
