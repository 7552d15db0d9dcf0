#!/usr/bin/env python3
"""RecGuide against the best fixed LinearSS per concurrency, modeled, from `specscope
bench --json` files: the table docs/results.md shows ("RecGuide priced at the load").

usage: scripts/recguide-table.py BENCH.json [BENCH.json ...]
       scripts/recguide-table.py --held BENCH.json [BENCH.json ...]

--held: one load run with different --requests-per-slot (one file each, fixed B = 8
and RecGuide): RecGuide against B = 8 as the load is held longer.
--configs: every configuration's modeled speed ÷ AR's, per C (the ablations), with
its physical forwards and branch hits.
"""
import json
import math
import sys


def main(paths):
    for path in paths:
        d = json.load(open(path))
        res = d["results"]
        print(f"{path}: {d['cost_profile']['source']}")
        print("| C | best fixed LinearSS, modeled ×AR | RecGuide (paper preset) | ÷ best fixed | lockstep | throughput preset | rows per round (hit) | RecGuide B = 8 / 16 / 32 share |")
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        ratios = []
        for c in sorted({r["concurrency"] for r in res}):
            at = {r["config"]: r for r in res if r["concurrency"] == c}
            ar = at["ar"]["modeled_tokens_per_sec"]
            x = lambda name: at[name]["modeled_tokens_per_sec"] / ar if name in at else None
            f = lambda v: "-" if v is None else f"{v:.2f}"
            lin = {n: x(n) for n in at if n.startswith("linear")}
            best = max(lin, key=lin.get)
            rg = x("recguide")
            ratios.append(rg / lin[best])
            blocks = at["recguide"]["tally"]["blocks"]
            total = sum(blocks.values()) or 1
            share = " / ".join(f"{100 * blocks.get(str(b), 0) / total:.0f}%" for b in (8, 16, 32))
            tally = at["recguide"]["tally"]
            built = sum(b["built"] for b in tally.get("branches", {}).values())
            hits = sum(b["hits"] for b in tally.get("branches", {}).values())
            rows = f"{built / max(tally['rounds'], 1):.2f} ({100 * hits / max(built, 1):.0f}%)"
            print(f"| {c} | {lin[best]:.2f} ({best.split()[1]}) | {rg:.2f} | {rg / lin[best]:.3f} "
                  f"| {f(x('recguide lockstep'))} | {f(x('recguide throughput'))} | {rows} | {share} |")
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean of RecGuide ÷ best fixed over C: {geo:.3f}\n")


def held(paths):
    print("| requests per slot | requests | fixed B = 8, modeled tok/s | RecGuide | ÷ B = 8 | physical forwards (B = 8 / RecGuide) |")
    print("|---:|---:|---:|---:|---:|---|")
    for path in paths:
        d = json.load(open(path))
        at = {r["config"]: r for r in d["results"]}
        lin, rg = at["linear B=8"], at["recguide"]
        # Files from before --requests-per-slot ran each prompt once (0).
        print(f"| {d.get('requests_per_slot', 0)} | {rg['requests']} | {lin['modeled_tokens_per_sec']:.0f} "
              f"| {rg['modeled_tokens_per_sec']:.0f} "
              f"| {rg['modeled_tokens_per_sec'] / lin['modeled_tokens_per_sec']:.3f} "
              f"| {lin['physical_forwards']} / {rg['physical_forwards']} |")
    print()


def by_config(paths):
    for path in paths:
        d = json.load(open(path))
        res = d["results"]
        print(f"{path}: {d['cost_profile']['source']}")
        print("| C | configuration | modeled ×AR | TPF | physical forwards | branch hits |")
        print("|---:|---|---:|---:|---:|---:|")
        for c in sorted({r["concurrency"] for r in res}):
            at = [r for r in res if r["concurrency"] == c]
            ar = next(r for r in at if r["config"] == "ar")["modeled_tokens_per_sec"]
            for r in at:
                if r["config"] == "ar":
                    continue
                br = r["tally"].get("branches", {}).values()
                built, hits = sum(b["built"] for b in br), sum(b["hits"] for b in br)
                hit = f"{100 * hits / built:.0f}% of {built}" if built else "-"
                print(f"| {c} | {r['config']} | {r['modeled_tokens_per_sec'] / ar:.2f} "
                      f"| {r['tpf']:.2f} | {r['physical_forwards']} | {hit} |")
        print()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--held"]:
        held(sys.argv[2:])
    elif sys.argv[1:2] == ["--configs"]:
        by_config(sys.argv[2:])
    else:
        main(sys.argv[1:])
