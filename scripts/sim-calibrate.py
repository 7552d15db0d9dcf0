#!/usr/bin/env python3
"""Fits the simulated NLD-8B backbone's latent parameters (src/sim/acceptance.rs) to
the published same-state statistics (decoding.md §3.3): a Python mirror of the latent
model, searched at random around a start point. It only proposes parameters; the
authority is `specscope sim check`, which measures the Rust simulator through the
engine. Needs numpy; a development tool, never run by CI or the tests.

    python3 scripts/sim-calibrate.py [--iterations 150]
"""
import argparse

import numpy as np

TARGETS = {"A4": 3.669, "full4": .815, "A8": 6.357, "full8": .597, "A16": 10.219,
           "full16": .406, "A32": 15.5, "full32": .272, "pearson": .625,
           "spearman": .607, "S8_32_8": .943, "S16_32_16": .94}


def sig(x):
    return 1 / (1 + np.exp(-x))


def shadow(p, nreq=200, seed=1, canon=16):
    """Same-state shadow of the latent model over whole answers (256-1535 tokens, as the
    simulator draws them): A_L per round, EWMA history vs A32."""
    mu, sr, sz, rho, sw, e, ka = p
    rng = np.random.default_rng(seed)
    A = {L: [] for L in (4, 8, 16, 32)}
    ewmas, a32 = [], []
    d = np.arange(1, 64)
    for _ in range(nreq):
        u = rng.normal() * sr
        length = int(rng.integers(256, 1536))
        n = length + 64
        z = np.zeros(n)
        z[0] = rng.normal()
        eps = rng.normal(size=n)
        for o in range(1, n):
            z[o] = rho * z[o - 1] + np.sqrt(1 - rho * rho) * eps[o]
        o, ewma = 0, None
        while o < length:
            lq = mu + u + sz * z[o] + sw * rng.normal()
            ls = np.cumsum(np.log(sig(lq - ka * np.log(d))))
            m = int(np.sum(ls >= np.log(rng.random())))
            res = {}
            for L in A:
                mm = min(m, L - 1)
                if mm == L - 1 and rng.random() < e * min(1, max(0, (L - 3) / 4)):
                    mm = L - 2
                res[L] = mm + 1
                A[L].append(mm + 1)
            if ewma is not None:
                ewmas.append(ewma)
                a32.append(res[32])
            a = res[canon]
            ewma = a if ewma is None else 0.5 * a + 0.5 * ewma
            o += a
    out = {}
    for L in A:
        out[f"A{L}"] = np.mean(A[L])
        out[f"full{L}"] = np.mean(np.array(A[L]) == L)
    A8, A16, A32 = (np.array(A[L]) for L in (8, 16, 32))
    out["S8_32_8"] = np.mean(A8[A32 >= 8] >= 8)
    out["S16_32_16"] = np.mean(A16[A32 >= 16] >= 16)
    he, y = np.array(ewmas), np.array(a32)
    out["pearson"] = np.corrcoef(he, y)[0, 1]
    r = lambda x: np.argsort(np.argsort(x))
    out["spearman"] = np.corrcoef(r(he), r(y))[0, 1]
    return out


def loss(p, seeds=(1, 2, 3)):
    """Squared relative errors of the statistics, averaged over a few samples (one
    sample of whole answers varies by 1-5% from the next)."""
    outs = [shadow(p, seed=s) for s in seeds]
    out = {k: float(np.mean([o[k] for o in outs])) for k in outs[0]}
    return sum(((out[k] - v) / v) ** 2 for k, v in TARGETS.items()), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=150)
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    # mu, request_sd, field_sd, field_rho, round_sd, last_position_miss, distance_slope
    best = np.array([4.05, 0.28, 1.40, 0.995, 0.06, 0.039, 0.27])
    scale = np.array([0.3, 0.15, 0.25, 0.002, 0.15, 0.008, 0.15])
    bl, _ = loss(best)
    for it in range(args.iterations):
        c = best + rng.normal(size=7) * scale * (0.5 if it > args.iterations // 2 else 1)
        # A field longer than an answer would make answers, not stretches of text, differ.
        c[3] = min(c[3], 0.995)
        c[[1, 2, 4]] = np.abs(c[[1, 2, 4]])
        c[5] = min(max(c[5], 0), 0.2)
        c[6] = max(c[6], 0)
        l, out = loss(c)
        if l < bl:
            bl, best = l, c
            print(it, round(l, 4), np.round(best, 4).tolist(), flush=True)
    print("best", np.round(best, 4).tolist())


if __name__ == "__main__":
    main()
