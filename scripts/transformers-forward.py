#!/usr/bin/env python3
"""The transformers column of docs/results.md's CPU forward table: the same checkpoint's
forward of T query tokens after a cached prefix, timed in HF transformers on this CPU.

    specscope synthetic /tmp/nld1b-f32 --geometry nld-1b --dtype f32
    specscope profile --model /tmp/nld1b-f32 --rows 1 --tokens 1,8,32 --cache 256 \\
        --json /tmp/ours.json
    python3 scripts/transformers-forward.py /tmp/nld1b-f32 --ours /tmp/ours.json

Runs only where Python has torch, transformers and safetensors installed (never in CI,
never a test's dependency). The checkpoint's NLD tensor names are mapped onto
transformers' Mistral layout (same blocks: RMSNorm, GQA attention with RoPE, SwiGLU
MLP; `head_dim` explicit), the weights loaded as stored, attention by sdpa. Each point
is the median of --repeats forwards of T tokens after --cache cached ones, the cache
cropped back after each; the threads are set to the machine's cores, as specscope
uses them. With --ours (a `specscope profile --json` of the same shapes) it prints
specscope ÷ transformers beside each point.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--tokens", default="1,8,32")
    ap.add_argument("--cache", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ours", type=Path, help="specscope profile --json of the same shapes")
    args = ap.parse_args()
    try:
        import torch
        from safetensors.torch import load_file
        from transformers import MistralConfig, MistralForCausalLM
        from transformers.cache_utils import DynamicCache
    except ImportError as e:
        sys.exit(f"needs torch, transformers and safetensors ({e}); this script is never run in CI")

    torch.set_num_threads(args.threads)
    cfg = json.loads((args.checkpoint / "config.json").read_text())
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    mcfg = MistralConfig(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"], num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
        head_dim=cfg.get("head_dim"), max_position_embeddings=cfg["max_position_embeddings"],
        rms_norm_eps=cfg["rms_norm_eps"], rope_theta=theta, sliding_window=None,
        tie_word_embeddings=cfg.get("tie_word_embeddings", False), attn_implementation="sdpa",
    )
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
             "float16": torch.float16}[cfg.get("torch_dtype", "float32")]
    with torch.device("meta"):
        model = MistralForCausalLM(mcfg)
    state = {}
    for f in sorted(args.checkpoint.glob("*.safetensors")):
        for name, t in load_file(f).items():
            name = name.replace("encoder.", "model.", 1).replace("diffusion_head.", "lm_head.", 1)
            state[name] = t
    missing = model.load_state_dict(state, strict=False, assign=True)
    real_missing = [k for k in missing.missing_keys if "rotary" not in k]
    if real_missing:
        sys.exit(f"{args.checkpoint}: tensors transformers needs are missing: {real_missing[:5]}")
    model = model.to(dtype).eval()
    # Rotary inverse frequencies are buffers made on the meta device: build them again.
    model.model.rotary_emb = type(model.model.rotary_emb)(config=mcfg)

    ours = {}
    if args.ours:
        for p in json.loads(args.ours.read_text())["points"]:
            if p["rows"] == 1 and p["cache_len"] == args.cache:
                ours[p["tokens"]] = p["median_ms"]

    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(10, cfg["vocab_size"], (1, args.cache), generator=g)
    print(f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
          f"{args.threads} threads, {dtype}, sdpa; cache {args.cache}, median of {args.repeats}")
    print(f"{'tokens':>6} {'transformers ms':>16}" + (f" {'specscope ms':>13} {'÷':>6}" if ours else ""))
    with torch.inference_mode():
        cache = DynamicCache()
        model(prefix, past_key_values=cache, use_cache=True)
        for t in [int(x) for x in args.tokens.split(",")]:
            q = torch.randint(10, cfg["vocab_size"], (1, t), generator=g)
            pos = torch.arange(args.cache, args.cache + t).unsqueeze(0)
            times = []
            for k in range(args.repeats + 2):
                start = time.perf_counter()
                model(q, past_key_values=cache, position_ids=pos, use_cache=True)
                assert cache.get_seq_length() == args.cache + t
                ms = (time.perf_counter() - start) * 1e3
                try:
                    cache.crop(args.cache)  # transformers up to 5.24: the length to keep
                except ValueError:
                    cache.crop(-t)  # from 5.25: minus the tokens to drop
                if k >= 2:  # two untimed: the change-of-shape transient
                    times.append(ms)
            med = statistics.median(times)
            line = f"{t:>6} {med:>16.1f}"
            if t in ours:
                line += f" {ours[t]:>13.1f} {ours[t] / med:>6.2f}"
            print(line)


if __name__ == "__main__":
    main()
