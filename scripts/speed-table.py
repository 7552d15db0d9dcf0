#!/usr/bin/env python3
"""Prints the README's speed table and the figures its bullets quote, from the two
bench runs of scripts/figures.sh (docs/figures/data/bench-cpu.json and
bench-b200.json). Nothing is measured here: every number is read from those files.

    python3 scripts/speed-table.py [DATA_DIR]
"""
import json
import sys
from pathlib import Path

data = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/figures/data")
cpu = json.loads((data / "bench-cpu.json").read_text())["results"]
b200 = json.loads((data / "bench-b200.json").read_text())["results"]


def row(results, c, config):
    return next(r for r in results if r["concurrency"] == c and r["config"] == config)


def linear(results, c):
    return [r for r in results if r["concurrency"] == c and r["config"].startswith("linear")]


def block(config):
    return config.split("=")[1]


def span(xs, fmt="{:.2f}"):
    return f"{fmt.format(min(xs))}–{fmt.format(max(xs))}"


concs = sorted({r["concurrency"] for r in cpu})
print("| C | TPF: LinearSS B=32 | TPF: RecGuide (paper) | CPU tok/s: AR · best LinearSS · "
      "RecGuide · throughput preset | modeled B200, × AR: best LinearSS · RecGuide |")
print("|---:|---:|---:|---|---|")
for c in concs:
    ar, rg, thr = (row(cpu, c, k) for k in ("ar", "recguide", "recguide throughput"))
    best = max(linear(cpu, c), key=lambda r: r["tokens_per_sec"])
    ar2 = row(b200, c, "ar")
    best2 = max(linear(b200, c), key=lambda r: r["modeled_tokens_per_sec"])
    rg2 = row(b200, c, "recguide")
    m = lambda r: r["modeled_tokens_per_sec"] / ar2["modeled_tokens_per_sec"]
    print(f"| {c} | {row(cpu, c, 'linear B=32')['tpf']:.2f} | {rg['tpf']:.2f} | "
          f"{ar['tokens_per_sec']:.0f} · {best['tokens_per_sec']:.0f} (B={block(best['config'])}) · "
          f"{rg['tokens_per_sec']:.0f} · {thr['tokens_per_sec']:.0f} | "
          f"{m(best2):.2f}× (B={block(best2['config'])}) · {m(rg2):.2f}× |")

print()
ratio = lambda r, c: r["tokens_per_sec"] / row(cpu, c, "ar")["tokens_per_sec"]
tpf32 = [row(cpu, c, "linear B=32")["tpf"] for c in concs]
tpfrg = [row(cpu, c, "recguide")["tpf"] for c in concs]
print(f"RecGuide TPF / LinearSS B=32 TPF: {span([a / b for a, b in zip(tpfrg, tpf32)])}"
      f" (RecGuide TPF {span(tpfrg)}, LinearSS B=32 {span(tpf32)})")
print("fixed LinearSS / AR on the CPU (every block size): "
      + span([ratio(r, c) for c in concs for r in linear(cpu, c)]))
print("best fixed LinearSS / AR on the CPU: "
      + span([ratio(max(linear(cpu, c), key=lambda r: r["tokens_per_sec"]), c) for c in concs]))
print("RecGuide paper preset / AR on the CPU: "
      + span([ratio(row(cpu, c, "recguide"), c) for c in concs]))
print("throughput preset / AR on the CPU: "
      + span([ratio(row(cpu, c, "recguide throughput"), c) for c in concs]))
for c in concs:
    t = row(cpu, c, "recguide throughput")["tally"]
    others = ", ".join(f"B={k} {100 * v / t['rounds']:.0f}%"
                       for k, v in sorted(t["blocks"].items(), key=lambda kv: int(kv[0])) if k != "1")
    print(f"  throughput preset C={c}: AR steps in {100 * t['blocks'].get('1', 0) / t['rounds']:.0f}% of rounds"
          + (f" ({others})" if others else ""))
spread = [max(r["pass_tokens_per_sec"]) / min(r["pass_tokens_per_sec"]) - 1
          for r in cpu if len(r["pass_tokens_per_sec"]) > 1]
print(f"pass-to-pass tokens/s spread: up to {100 * max(spread):.0f}%")
spec = [r["modeled_tokens_per_sec"] / row(b200, r["concurrency"], "ar")["modeled_tokens_per_sec"]
        for r in b200 if r["config"] != "ar"]
print(f"B200-modeled speculative / AR: {span(spec, '{:.1f}')}")
reuse = []
for c in concs:
    br = row(b200, c, "recguide")["tally"]["branches"]
    reuse.append(sum(b["hits"] for b in br.values()) / max(1, sum(b["built"] for b in br.values())))
print(f"B200-modeled RecGuide branch rows reused: {span([100 * x for x in reuse], '{:.0f}')}%")
for name, results in (("B200", b200), ("CPU", cpu)):
    for c in concs:
        t = row(results, c, "recguide")["tally"]
        shares = ", ".join(f"B={k} {100 * v / t['rounds']:.0f}%"
                           for k, v in sorted(t["blocks"].items(), key=lambda kv: int(kv[0])))
        print(f"  RecGuide blocks on the {name} profile, C={c}: {shares}")
print("every row identical to AR: "
      + str(all(r["identical_to_ar"] for r in cpu + b200)))
