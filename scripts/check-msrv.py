#!/usr/bin/env python3
"""Checks Cargo.toml's `rust-version` against what the locked build needs.

Every package in Cargo.lock that declares a `rust-version` must declare one no newer
than ours, or an older rustc would fail inside that dependency instead of saying what
it needs. Our own code is checked by clippy's `incompatible_msrv` lint (on by default,
run by .ci/run with -D warnings), which reads the same field. Prints the dependency
that sets the floor. Run from the repository root: python3 scripts/check-msrv.py
"""
import json
import subprocess
import sys


def version(v):
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


meta = json.loads(
    subprocess.run(
        # Every feature's dependencies (the `cuda` build's too).
        ["cargo", "metadata", "--locked", "--all-features", "--format-version", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
ours = next(p for p in meta["packages"] if p["id"] in meta["workspace_members"])
declared = ours.get("rust_version")
if not declared:
    sys.exit("check-msrv: Cargo.toml declares no rust-version")
deps = [
    (version(p["rust_version"]), p["name"], p["version"], p["rust_version"])
    for p in meta["packages"]
    if p.get("rust_version") and p["id"] not in meta["workspace_members"]
]
newer = [d for d in deps if d[0] > version(declared)]
for _, name, ver, rv in sorted(newer):
    print(f"check-msrv: {name} {ver} needs rust {rv}, newer than rust-version = {declared}")
if newer:
    sys.exit(1)
if not deps:
    sys.exit("check-msrv: no locked dependency declares a rust-version; nothing to check")
floor = max(deps)
print(
    f"check-msrv: rust-version = {declared}; the newest any locked dependency needs is "
    f"{floor[3]} ({floor[1]} {floor[2]})"
)
