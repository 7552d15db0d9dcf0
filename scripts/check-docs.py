#!/usr/bin/env python3
"""Runs every `specscope` command the README and docs/*.md show, with small limits.

    scripts/check-docs.py [--bin target/release/specscope] [--keep]

Each command in a fenced code block is run as written (and the `python3 scripts/…`
helpers that make their inputs under target/), except that:
  - it decodes little: `--limit` becomes 1, `--max-new-tokens` 8, `--repeats` 1 (and
    `bench`, `eval`, `survival` and `run` get them when they do not say);
  - what it writes goes to a temporary directory (`--out`, `--json FILE`, `> FILE`),
    so a docs command never overwrites a shipped file;
and a command is skipped, with the reason, when it needs what this check cannot
give it: a person at the screen (`chat`, `replay`, no subcommand; the tmux tests
drive those), the network (a hub id), a GPU, a checkpoint or files the reader
brings, or hours (`train`; tests/suite/train.rs trains a toy model).

Exit status 1 when a command that ran failed. About a minute on 2 cores; `.ci/run`
runs it with the debug binary the tests built.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INTERACTIVE = {"chat", "replay"}
SMALL = {"--limit": "1", "--max-new-tokens": "8", "--repeats": "1"}
# Subcommands that decode prompts: given small limits when they say none.
DECODES = {"bench": ["--limit", "--max-new-tokens"], "eval": ["--limit", "--max-new-tokens"],
           "survival": ["--limit", "--max-new-tokens"], "run": ["--max-new-tokens"]}


def subcommands(bin_path):
    out = subprocess.run([bin_path, "--help"], capture_output=True, text=True).stdout
    names, on = set(), False
    for line in out.splitlines():
        if line.strip().lower().startswith("commands:"):
            on = True
        elif on and line.startswith("  ") and line.strip():
            names.add(line.split()[0])
        elif on and not line.strip():
            on = False
    return names


def commands():
    """(file, line, command) of every `specscope` command in a fenced block."""
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        fenced, i = False, 0
        while i < len(lines):
            line, at = lines[i], i + 1
            i += 1
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            while line.rstrip().endswith("\\") and i < len(lines):
                line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            line = line.strip()
            if (re.match(r"^(?:[A-Z_]+=\S+\s+)*specscope(\s|$)", line)
                    or " | specscope " in line or line.startswith("python3 scripts/")):
                yield doc.relative_to(ROOT), at, line


def is_hub_id(s):
    """`owner/name` as `--model` reads it: no path-like start, one slash."""
    return (re.fullmatch(r"[\w-][\w.-]*/[\w.-]+", s) is not None
            and not s.startswith(("target/", "assets/")) and not Path(s).exists())


def shrink(argv, sub, tmp, n, renamed):
    """The command with small limits, writing into `tmp`; or a reason to skip it.
    `renamed` maps paths earlier commands wrote to where they wrote them instead."""
    argv = [renamed.get(a) or a for a in argv]
    if sub == "synthetic" and len(argv) > 1 and not argv[1].startswith("-"):
        renamed[argv[1]] = str(tmp / f"{n}-{Path(argv[1]).name}")
        argv[1] = renamed[argv[1]]
    out = []
    k = 0
    while k < len(argv):
        a = argv[k]
        nxt = argv[k + 1] if k + 1 < len(argv) else None
        if a in SMALL and nxt is not None:
            out += [a, SMALL[a]]
            k += 2
            continue
        if (a == "--out" or (a == "--json" and nxt is not None and nxt.endswith(".json"))) \
                and nxt is not None:
            renamed[nxt] = str(tmp / f"{n}-{Path(nxt).name}")
            out += [a, renamed[nxt]]
            k += 2
            continue
        if a == "--model" and nxt is not None:
            if nxt in renamed and renamed[nxt] is None:
                return None, f"needs what a skipped step above makes ({nxt})"
            if is_hub_id(nxt):
                return None, f"needs the network (hub id {nxt})"
            if not Path(nxt).exists():
                return None, f"needs a checkpoint you bring ({nxt})"
        if a == "--prompts" and nxt is not None:
            missing = [p for p in nxt.split(",") if not Path(p).exists()]
            if missing:
                return None, f"needs prompt files an earlier step writes ({missing[0]})"
        if a == ">":
            k += 2  # the output is not the check's business
            continue
        out.append(a)
        k += 1
    for flag in DECODES.get(sub, []):
        if flag not in out:
            out += [flag, SMALL[flag]]
    return out, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/specscope"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary outputs")
    args = ap.parse_args()
    bin_path = str(Path(args.bin).resolve())
    if not Path(bin_path).exists():
        sys.exit(f"{bin_path}: build it first (cargo build --release)")
    subs = subcommands(bin_path)
    tmp = Path(tempfile.mkdtemp(prefix="specscope-docs-"))
    env = dict(os.environ, PATH=f"{Path(bin_path).parent}:{os.environ['PATH']}")
    ran = failed = skipped = 0
    renamed = {}
    for n, (doc, at, line) in enumerate(commands()):
        where = f"{doc}:{at}"
        if line.startswith("python3 scripts/"):
            # A helper script that makes inputs under target/ for the commands after it.
            ran += 1
            r = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True,
                               text=True, stdin=subprocess.DEVNULL, timeout=600)
            failed += r.returncode != 0
            print(f"{'ok  ' if r.returncode == 0 else 'FAIL'}  {where}: {line}")
            continue
        # The pipeline's specscope part, the env assignments before it kept.
        head, _, tail = line.rpartition("| ")
        m = re.match(r"^((?:[A-Z_]+=\S+\s+)*)specscope(.*)$", tail if head else line)
        if not m:
            continue
        try:
            argv = shlex.split(m.group(2), comments=True)
        except ValueError:
            continue
        sub = argv[0] if argv else None
        if sub is not None and sub not in subs and not sub.startswith("-"):
            continue  # prose or a screen drawing, not a command
        reason = None
        if sub is None or sub in INTERACTIVE:
            reason = "interactive (tests/suite/e2e_tmux.rs drives the screen)"
        elif sub == "train":
            reason = "hours of training (tests/suite/train.rs trains a toy model)"
        elif sub == "gpu-check":
            reason = "needs a GPU (docs/gpu.md)"
        small = None
        if reason is None:
            small, reason = shrink(argv, sub, tmp, n, renamed)
        if reason is not None:
            # What a skipped command would have written is missing for those after it.
            for flag, value in zip(argv, argv[1:]):
                if flag == "--out":
                    renamed[value] = None
            skipped += 1
            print(f"skip  {where}: {line}\n      ({reason})")
            continue
        cmd = m.group(1) + "specscope " + shlex.join(small)
        if head:
            cmd = head + "| " + cmd
        ran += 1
        r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=600)
        if r.returncode == 0:
            print(f"ok    {where}: {cmd}")
        else:
            failed += 1
            err = (r.stderr or r.stdout).strip().splitlines()[-3:]
            print(f"FAIL  {where}: {cmd}\n      " + "\n      ".join(err))
    print(f"\n{ran} ran, {failed} failed, {skipped} skipped")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(tmp)])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
