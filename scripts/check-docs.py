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
give it: a person at the screen (`chat`, `replay` without `--snapshot`, no
subcommand; the tmux tests
drive those), the network (a hub id), a GPU, a checkpoint or files the reader
brings, or hours (`train`; tests/suite/train.rs trains a toy model).

Screen captures are checked too: a fenced block whose first line is
`$ specscope replay … --snapshot WxH …` must hold, below that line, exactly what the
command prints (`--update-captures` rewrites them from the binary), so no capture in
the docs is pasted by hand or left behind by a change to the screen.

Exit status 1 when a command that ran failed or a capture differs. About ten minutes on 2 cores
(it writes 6 GB of synthetic NLD-1B checkpoints and profiles them); `.ci/run`
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


def captures():
    """(file, index of the `$ specscope` line, command, captured lines) of every
    screen capture: a fenced block that opens with a `--snapshot` command."""
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        found = []
        i = 0
        while i < len(lines):
            if not lines[i].lstrip().startswith("```"):
                i += 1
                continue
            # An opening fence: its block runs to the next fence.
            end = i + 1
            while end < len(lines) and not lines[end].lstrip().startswith("```"):
                end += 1
            head = lines[i + 1] if i + 1 < end else ""
            if head.startswith("$ specscope replay") and "--snapshot" in head:
                found.append((doc, i + 1, head[2:], lines[i + 2:end]))
            i = end + 1
        # Last first: rewriting one never moves the lines of those still to come.
        yield from reversed(found)


def check_captures(bin_path, update):
    """Runs each capture's command; the number that differ (rewritten with `update`)."""
    config = tempfile.mkdtemp(prefix="specscope-docs-config-")
    # The built-in keys and theme: a reader's keymap must not change the capture.
    env = dict(os.environ, SPECSCOPE_CONFIG_DIR=config)
    env.pop("SPECSCOPE_THEME", None)
    differ = 0
    for doc, at, cmd, shown in list(captures()):
        argv = [bin_path] + shlex.split(cmd)[1:]
        r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
        where = f"{doc.relative_to(ROOT)}:{at + 1}"
        if r.returncode != 0:
            differ += 1
            print(f"FAIL  {where}: {cmd}\n      {r.stderr.strip()}")
            continue
        got = r.stdout.rstrip("\n").splitlines()
        if got == shown:
            print(f"ok    {where}: capture of `{cmd}`")
            continue
        if update:
            lines = doc.read_text().splitlines()
            lines[at + 1:at + 1 + len(shown)] = got
            doc.write_text("\n".join(lines) + "\n")
            print(f"new   {where}: capture of `{cmd}` rewritten")
            continue
        differ += 1
        k = next(k for k in range(max(len(got), len(shown)))
                 if k >= len(got) or k >= len(shown) or got[k] != shown[k])
        print(f"FAIL  {where}: the capture differs from what `{cmd}` prints, first at its "
              f"line {k + 1}:\n      doc: {shown[k] if k < len(shown) else '(none)'}\n"
              f"      now: {got[k] if k < len(got) else '(none)'}\n"
              f"      (scripts/check-docs.py --update-captures rewrites it)")
    subprocess.run(["rm", "-rf", config])
    return differ


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
    ap.add_argument("--update-captures", action="store_true",
                    help="rewrite the docs' screen captures from the binary, then check the rest")
    args = ap.parse_args()
    bin_path = str(Path(args.bin).resolve())
    if not Path(bin_path).exists():
        sys.exit(f"{bin_path}: build it first (cargo build --release)")
    differ = check_captures(bin_path, args.update_captures)
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
        if sub is None or (sub in INTERACTIVE and "--snapshot" not in argv):
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
    print(f"\n{ran} ran, {failed} failed, {skipped} skipped; {differ} screen captures differ")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(tmp)])
    sys.exit(1 if failed or differ else 0)


if __name__ == "__main__":
    main()
