"""False flags and cost of the prompt-injection scan over real tool results.

Reads the command outputs of real agent runs (mini-swe-agent driving a model on SWE-bench
Verified: each user message that follows an assistant command holds that command's output),
scans each with `kestrel.policy.injection.scan`, and prints how many were flagged, what each
flag was, the time per result (p50, p95, max) and per MB, and the worst case on large synthetic
results (minified code, base64, hex, one long line):

    python bench/injection_replay.py --trajs PATH/TO/mini-swe-agent [--ids-file dev_ids.txt]
        [--commit SHA] [--folder swebench_results/20251118_gemini-3-pro-74pct]
    python bench/injection_replay.py --files DIR      # every text file of a checkout instead

`--trajs` is a clone or bare git directory of gruckion/mini-swe-agent; without `--ids-file` every
run in the folder is read. Each flagged result is printed so a false flag can be judged by eye.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kestrel.policy.injection import scan

COMMIT = "d12a71affd95403b036b2bdbd827349b77bfffb9"
FOLDER = "swebench_results/20251118_gemini-3-pro-74pct"


def git(repo: str, *args: str) -> str:
    """Standard output of a git command in `repo` (a work tree or a bare directory)."""
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, check=True
    ).stdout


def tool_results(repo: str, commit: str, folder: str, ids: list[str] | None) -> Iterator[str]:
    """The output of every command of the chosen runs, in order."""
    listing = git(repo, "ls-tree", f"{commit}:{folder}/trajs").splitlines()
    runs = [row.split("\t", 1)[1] for row in listing if row.split()[1] == "tree"]
    names = ids or runs
    for name in names:
        try:
            raw = git(repo, "show", f"{commit}:{folder}/trajs/{name}/{name}.traj.json")
        except subprocess.CalledProcessError:
            print(f"missing run: {name}", file=sys.stderr)
            continue
        previous = ""
        for message in json.loads(raw)["messages"]:
            content = message["content"]
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content)
            if message["role"] == "user" and previous == "assistant":
                yield content
            previous = message["role"]


def checkout_files(root: Path) -> Iterator[str]:
    """The text of every file under `root` that decodes as UTF-8, `.git` left out."""
    for path in sorted(root.rglob("*")):
        if ".git" in path.parts or not path.is_file():
            continue
        try:
            yield path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue


def measure(texts: Iterator[str], cut: int | None) -> None:
    """Scan every text (its first `cut` characters if given) and print counts, flags, timings."""
    times: list[float] = []
    size = 0
    flagged = 0
    for whole in texts:
        text = whole[:cut] if cut else whole
        started = time.thread_time()
        findings = scan(text)
        times.append((time.thread_time() - started) * 1000)
        size += len(text.encode())
        if findings:
            flagged += 1
            for finding in findings:
                print(f"  flag: {finding.describe()}")
    if not times:
        sys.exit("no results to scan")
    cuts = statistics.quantiles(times, n=100) if len(times) > 1 else times * 99
    print(f"tool results scanned: {len(times):,} ({size / 1e6:.1f} MB)")
    print(f"flagged: {flagged}")
    print(
        f"ms per result: p50 {statistics.median(times):.3f}, p95 {cuts[94]:.3f}, "
        f"max {max(times):.1f}"
    )
    print(f"ms per MB: {sum(times) / (size / 1e6):.1f}")


def worst_cases() -> None:
    """Time the scan on 1 MB results built to be expensive."""
    rng = random.Random(7)
    blob = base64.b64encode(rng.randbytes(750_000)).decode()
    words = [rng.choice(string.ascii_letters) * rng.randint(1, 8) for _ in range(4000)]
    minified = ";".join(f"var {w}=function(a,b){{return a+b}}" for w in words)
    cases = {
        "base64, 76-char lines": "\n".join(blob[i : i + 76] for i in range(0, len(blob), 76)),
        "base64, one line": blob,
        "hex, one line": rng.randbytes(500_000).hex(),
        "minified js, one line": (minified * (1_000_000 // len(minified) + 1))[:1_000_000],
        "one letter, one line": "a" * 1_000_000,
        "prose, short lines": "\n".join(
            " ".join(rng.choice(["the", "agent", "must", "run", "tests", "user"]) for _ in range(9))
            for _ in range(20_000)
        )[:1_000_000],
    }
    for name, text in cases.items():
        started = time.thread_time()
        found = scan(text)
        elapsed = (time.thread_time() - started) * 1000
        print(
            f"worst case {name} ({len(text) / 1e6:.1f} MB): {elapsed:.0f} ms, {len(found)} findings"
        )


def main() -> None:
    """Parse arguments, scan, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajs", help="clone or bare git dir of gruckion/mini-swe-agent")
    parser.add_argument("--ids-file", type=Path)
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--folder", default=FOLDER)
    parser.add_argument("--files", type=Path, help="scan every text file under this folder")
    parser.add_argument(
        "--cut", type=int, help="scan only the first N characters, as a tool result is shaped"
    )
    parser.add_argument("--no-worst", action="store_true", help="skip the synthetic worst cases")
    args = parser.parse_args()
    if args.files is not None:
        if not args.files.is_dir():
            parser.error(f"--files: not a folder: {args.files}")
        measure(checkout_files(args.files), args.cut)
    elif args.trajs:
        try:
            ids = args.ids_file.read_text().split() if args.ids_file else None
            measure(tool_results(args.trajs, args.commit, args.folder, ids), args.cut)
        except OSError as error:
            sys.exit(f"cannot read {error.filename}: {error.strerror}")
        except subprocess.CalledProcessError as error:
            sys.exit(f"cannot list the runs in {args.trajs}: {error.stderr.strip()}")
    else:
        parser.error("give --trajs or --files")
    if not args.no_worst:
        worst_cases()


if __name__ == "__main__":
    main()
