#!/usr/bin/env python3
"""What an unrelated earlier exchange in the context does to the bundled model's
answers: writes two prompt sets from the held-out prompts in assets/prompts/, the
first-turn prompts as they are (`base-*.jsonl`) and the same prompts each after one
held-out exchange of another family (`with-*.jsonl`: a follow-up's history, its
reference answer included), as a chat sends it with one earlier exchange.

    python3 scripts/unrelated-history.py target/history
    specscope eval --blocks 8 --prompts target/history/base-math.jsonl,target/history/base-code.jsonl,target/history/base-qa.jsonl,target/history/base-first.jsonl
    specscope eval --blocks 8 --prompts target/history/with-math.jsonl,target/history/with-code.jsonl,target/history/with-qa.jsonl,target/history/with-first.jsonl
"""
import glob
import json
import os
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "target/history"
os.makedirs(out, exist_ok=True)
records = {}
for path in sorted(glob.glob("assets/prompts/*.jsonl")):
    family = os.path.basename(path)[: -len(".jsonl")]
    with open(path) as f:
        records[family] = [json.loads(line) for line in f if line.strip()]
histories = [(fam, r["history"]) for fam, rs in records.items() for r in rs if r.get("history")]
rng = random.Random(7)
for family, rs in records.items():
    first_turns = [r for r in rs if not r.get("history")]
    others = [h for fam, h in histories if fam != family]
    if not others:
        sys.exit(f"no held-out follow-up of a family other than {family} to take a history from")
    with open(os.path.join(out, f"base-{family}.jsonl"), "w") as base, open(
        os.path.join(out, f"with-{family}.jsonl"), "w"
    ) as with_history:
        for r in first_turns:
            base.write(json.dumps(r) + "\n")
            with_history.write(json.dumps({**r, "history": rng.choice(others)}) + "\n")
    print(f"{family}: {len(first_turns)} first-turn prompts")
