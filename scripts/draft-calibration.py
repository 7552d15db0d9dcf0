#!/usr/bin/env python3
"""How well the draft's confidence predicts the verifier, from a recording: for every
drafted position up to the first rejection (the ones the verifier judged on the true
prefix), the share whose top token the verifier chose, by confidence (p1) and by
margin (p1 - p2); and the share of first rejections at a margin of 0.5 or more.

    python3 scripts/draft-calibration.py [docs/figures/data/session.jsonl]
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "docs/figures/data/session.jsonl"
drafts = {}
by_conf = [[0, 0] for _ in range(10)]
by_margin = [[0, 0] for _ in range(10)]
rejects = confident_rejects = 0
for line in open(path):
    e = json.loads(line)
    if e.get("kind") == "drafted":
        drafts[e["req"]] = e
    elif e.get("kind") == "verified":
        d = drafts.pop(e["req"], None)
        if not d or not d.get("detail"):
            continue
        first, verifier = e["first_reject"], e["verifier_tokens"]
        judged = len(d["detail"]) if first is None else first
        for i in range(judged):
            p = d["detail"][i]
            right = p["top"][0][0] == verifier[i]
            for bins, x in ((by_conf, p["confidence"]), (by_margin, p["margin"])):
                b = bins[min(9, int(x * 10))]
                b[0] += 1
                b[1] += right
        if first is not None:
            rejects += 1
            confident_rejects += d["detail"][first - 1]["margin"] >= 0.5
for name, bins in (("confidence", by_conf), ("margin", by_margin)):
    print(f"{name:10}  positions  verifier agrees")
    for i, (n, k) in enumerate(bins):
        if n:
            print(f"{i / 10:.1f}–{(i + 1) / 10:.1f}  {n:9d}  {k / n:14.3f}")
print(f"first rejections {rejects}, at margin >= 0.5: {confident_rejects / max(1, rejects):.1%}")
