"""The classifier over real agent commands: every command of mini-swe-agent trajectories (format
mini-swe-agent-1), read from a git repository, and which of them it flags and why.

    python bench/classify_replay.py --repo PATH --commit SHA --ids dev_ids.txt [--show 40]

A trajectory's commands are the single ```bash block of each assistant message (messages with
zero or several blocks ran nothing); the final submission (`echo COMPLETE_TASK_AND_SUBMIT_...`)
is left out. Commands are classified as run in the task's work tree (`--root`, /testbed by
default) with a dirty tree. Every flag of a harmless command is a false positive. It also prints
what parsing and classifying one command costs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from kestrel.policy.classify import classify_shell
from kestrel.policy.shell import parse_shell

ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
TRAJ = "swebench_results/20251118_gemini-3-pro-74pct/trajs/{id}/{id}.traj.json"


def commands(traj: dict[str, object]) -> list[str]:
    """The commands a trajectory ran, in order, without its submission."""
    out = []
    messages = traj.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        blocks = ACTION.findall(str(message.get("content") or ""))
        if len(blocks) != 1:
            continue
        command = blocks[0].strip()
        if command.lstrip().startswith("echo") and any(t in command for t in SUBMIT):
            continue
        out.append(command)
    return out


def load(repo: Path, commit: str, task: str, layout: str) -> dict[str, object]:
    """One trajectory, read from the repository with `git show`."""
    spec = f"{commit}:{layout.format(id=task)}"
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", spec], capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        raise SystemExit(f"cannot read {spec}: {shown.stderr.strip()}")
    loaded = json.loads(shown.stdout)
    return loaded if isinstance(loaded, dict) else {}


def main() -> int:
    """Classify every command of the listed trajectories and print the flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="git repository of trajectories")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--ids", type=Path, required=True, help="file of instance ids, one a line")
    parser.add_argument("--layout", default=TRAJ, help="path of a trajectory, {id} for its id")
    parser.add_argument("--root", type=Path, default=Path("/testbed"))
    parser.add_argument("--show", type=int, default=40, help="flagged commands to print")
    args = parser.parse_args()
    ids = [line.strip() for line in args.ids.read_text().splitlines() if line.strip()]
    total, flagged, costs = 0, [], []
    reasons: Counter[str] = Counter()
    for task in ids:
        for command in commands(load(args.repo, args.commit, task, args.layout)):
            total += 1
            start = time.perf_counter()
            parsed = parse_shell(command)
            found = classify_shell(parsed, root=args.root, cwd=args.root, dirty=lambda: True)
            costs.append((time.perf_counter() - start) * 1000)
            if found:
                flagged.append((task, command, [d.reason for d in found]))
                reasons.update(_kind(d.reason) for d in found)
    print(f"trajectories: {len(ids)}  commands: {total}  flagged: {len(flagged)}")
    if len(costs) > 1:
        p50, p95 = statistics.median(costs), statistics.quantiles(costs, n=20)[-1]
        cost = f"p50 {p50:.2f} ms, p95 {p95:.2f} ms, max {max(costs):.1f} ms"
        print(f"parse + classify, per command: {cost}")
    for kind, n in reasons.most_common():
        print(f"  {n:4d}  {kind}")
    for task, command, why in flagged[: args.show]:
        line = " ".join(command.split())
        print(f"\n[{task}] {line[:200]}\n    -> " + "\n    -> ".join(why))
    return 0


def _kind(reason: str) -> str:
    """A reason without the parts that name the command's own paths and values."""
    return re.sub(r"\(.*?\)|: .*", "", reason).strip()[:90]


if __name__ == "__main__":
    sys.exit(main())
