//! `specscope inspect`: the numbers a port is checked against.

use anyhow::{ensure, Result};
use candle_core::Tensor;
use clap::Args;
use specscope::files;

use specscope::model::{AttnRule, LogitSel, Row, RowBatch, TextTokenizer};

use super::{ModelArgs, PromptArgs};

#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    /// How many candidates to list per position (1 to 1000: a list a person reads).
    #[arg(long, default_value_t = 10, value_parser = super::count(1, 1000))]
    pub top_k: usize,
    /// Length of the all-mask block drafted after the prompt (1 to 256, the largest
    /// block decoding uses).
    #[arg(long, default_value_t = 8, value_parser = super::count(1, 256))]
    pub block: usize,
}

/// The `k` largest logits of a (vocab,) row at `position`.
fn top_k(
    logits: &Tensor,
    position: usize,
    k: usize,
    tok: &TextTokenizer,
) -> Result<files::Predicted> {
    let v: Vec<f32> = logits.to_vec1()?;
    // As decoding refuses them: a NaN or infinite logit means weights or config
    // numbers that cannot be used.
    ensure!(
        v.iter().all(|x| x.is_finite()),
        "the model produced non-finite logits (NaN or infinity): its weights (the draft adapter's too) hold NaN/inf values, or config.json's numbers are unusable"
    );
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    let top = idx
        .into_iter()
        .take(k)
        .map(|i| files::TopLogit {
            id: i as u32,
            logit: v[i],
            text: tok.token_text(i as u32),
        })
        .collect();
    Ok(files::Predicted { position, top })
}

pub fn run(args: InspectArgs) -> Result<()> {
    ensure!(args.block > 0, "--block must be at least 1");
    ensure!(args.top_k > 0, "--top-k must be at least 1");
    let loaded = args.model.load_with(true)?;
    let ((model, report), tok) = (loaded.checkpoint("inspect")?, &loaded.tokenizer);
    let cfg = model.config();
    let prompt = args.prompt.encode(tok)?;
    ensure!(
        prompt.len() + args.block <= cfg.max_position_embeddings,
        "the prompt ({} tokens) plus --block {} exceeds the context of {}",
        prompt.len(),
        args.block,
        cfg.max_position_embeddings
    );
    let mut cache = model.new_cache();
    let prefill = Row::new(0, prompt.clone(), AttnRule::Causal)
        .commit()
        .logits(LogitSel::Last);
    let causal = model.forward(&RowBatch::single(prefill), &mut [&mut cache])?;
    let mask = cfg.mask_token_id();
    let mut block =
        Row::new(0, vec![mask; args.block], AttnRule::Bidirectional).logits(LogitSel::All);
    if model.has_lora() {
        block = block.lora_from(0);
    }
    let bidi = model.forward(&RowBatch::single(block), &mut [&mut cache])?;
    let positions = (0..args.block)
        .map(|i| top_k(&bidi[0].get(i)?, prompt.len() + i, args.top_k, tok))
        .collect::<Result<Vec<_>>>()?;
    let causal = top_k(&causal[0].get(0)?, prompt.len() - 1, args.top_k, tok)?;
    let out = files::InspectDoc {
        format: files::Format::new("inspect", files::INSPECT_VERSION),
        model: loaded.files.label.clone(),
        commit: loaded.files.commit.clone(),
        device: format!("{:?}", loaded.device),
        config: files::InspectConfig {
            vocab_size: cfg.vocab_size,
            hidden_size: cfg.hidden_size,
            num_hidden_layers: cfg.num_hidden_layers,
            num_attention_heads: cfg.num_attention_heads,
            num_key_value_heads: cfg.num_kv_heads(),
            head_dim: cfg.head_dim(),
            rope: cfg.rope(),
            mask_token_id: mask,
            eos_token_id: cfg.eos_token_ids(),
        },
        weights: files::InspectWeights {
            tensors: report.tensors,
            file_dtypes: report.file_dtypes.clone(),
            unexpected: report.unexpected.clone(),
            lora: report.lora,
        },
        prompt_tokens: prompt,
        causal,
        bidirectional: files::InspectBlock {
            block: args.block,
            lora: model.has_lora(),
            positions,
        },
    };
    outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
