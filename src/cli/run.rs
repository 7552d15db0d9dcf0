//! `specscope run`: generate for one prompt, headless.

use std::io::Write;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use specscope::engine::generate_ar;

use super::{ModelArgs, PromptArgs};

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// Stop after this many new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Decoding mode (only `ar` exists yet).
    #[arg(long, default_value = "ar")]
    pub mode: String,
    /// Print one JSON object (text, token ids, stats) instead of streaming text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RunArgs) -> Result<()> {
    if args.mode != "ar" {
        bail!("--mode {}: unknown mode (available: ar)", args.mode);
    }
    let loaded = args.model.load()?;
    let prompt = args.prompt.encode(&loaded.tokenizer)?;
    let eos = loaded.model.config().eos_token_ids();
    let mut stream = loaded.tokenizer.stream();
    let mut stdout = std::io::stdout().lock();
    let streaming = !args.json;
    let gen = generate_ar(&loaded.model, &prompt, args.max_new_tokens, &eos, |t| {
        if streaming {
            let text = stream.push(&[t])?;
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
        Ok(())
    })?;
    if streaming {
        let rest = stream.finish()?;
        writeln!(stdout, "{rest}")?;
        eprintln!(
            "specscope: {} tokens ({:?}), {} decode forwards, TPF {:.2}, {:.1} tokens/s",
            gen.tokens.len(),
            gen.stop,
            gen.decode_forwards,
            gen.tpf(),
            gen.tokens_per_sec()
        );
        return Ok(());
    }
    let text = loaded.tokenizer.decode(&gen.tokens)?;
    let out = json!({
        "model": loaded.files.label,
        "commit": loaded.files.commit,
        "mode": "ar",
        "prompt_tokens": prompt,
        "tokens": gen.tokens,
        "text": text,
        "stop": gen.stop,
        "stats": {
            "prompt_len": gen.prompt_tokens,
            "new_tokens": gen.tokens.len(),
            "decode_forwards": gen.decode_forwards,
            "tpf": gen.tpf(),
            "prefill_secs": gen.prefill_secs,
            "decode_secs": gen.decode_secs,
            "tokens_per_sec": gen.tokens_per_sec(),
        }
    });
    writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
    Ok(())
}
