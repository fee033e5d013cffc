#!/usr/bin/env python3
"""Replay the shell commands of recorded agent trajectories through the permission gate.

Each trajectory (mini-swe-agent's `*.traj.json`) holds the model's messages; every assistant
message with exactly one ```bash block ran that block. Each such command goes through the real
`PermissionGate` in headless default mode (an "ask" there is a refusal) under the rule set below,
written in the rule syntax of docs/permissions.md. The run prints how many commands were
allowed, asked about and denied, overall and for the heredoc and `python -c` commands, with the
reasons for the ones asked about.

Usage:
  replay_rules.py --repo GIT_DIR --commit SHA --trajs PATH_IN_REPO --ids IDS.txt [--show N]
  replay_rules.py --commands commands.json [--show N]

The recorded runs worked in /testbed; it is replaced by the replay's workspace folder.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from kestrel.policy.gate import PermissionGate
from kestrel.policy.rules import RuleSet
from kestrel.policy.subject import CallSubject

RULES = [
    # Heredocs that write files, and programs fed to Python through one.
    "BashHeredoc(cat)",
    "BashHeredoc(python)",
    "BashHeredoc(python -)",
    "BashHeredoc(python3)",
    "BashHeredoc(python3 -)",
    # Any `python -c` program (it still runs in the sandbox).
    "Bash(python -c *)",
    "Bash(python3 -c *)",
    # ... also with interpreter options before -c (bytes warnings, -X settings).
    r"BashRegex(python3?( -bb?| -X \S+)+ -c .*)",
    # Ordinary reading and running.
    "Bash(python:*)",
    "Bash(python3:*)",
    "Bash(pytest:*)",
    "Bash(cat:*)",
    "Bash(sed:*)",
    "Bash(grep:*)",
    "Bash(nl:*)",
    "Bash(ls:*)",
    "Bash(head:*)",
    "Bash(tail:*)",
    "Bash(find:*)",
    "Bash(xargs grep:*)",
    "Bash(wc:*)",
    "Bash(echo:*)",
    "Bash(mkdir:*)",
    "Bash(touch:*)",
    "Bash(rm:*)",
    "Bash(mv:*)",
    "Bash(git diff:*)",
    "Bash(git status:*)",
    # The project's own documentation build, which some of the tasks run.
    "Bash(sphinx-build:*)",
]
_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")


def commands_of(trajectory: dict[str, object]) -> list[str]:
    """The commands a trajectory ran, in order, without the final submission."""
    out = []
    messages = trajectory.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if message.get("role") != "assistant":
            continue
        blocks = _BLOCK.findall(message.get("content") or "")
        if len(blocks) != 1:
            continue  # a format error: nothing ran
        command = blocks[0].strip()
        if command.lstrip().startswith("echo") and any(t in command for t in _SUBMIT):
            break
        out.append(command)
    return out


def load(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(trajectory id, command) for every command of the trajectories asked for."""
    if args.commands:
        data = json.loads(Path(args.commands).read_text())
        return [(d["id"], d["command"]) for d in data]
    ids = Path(args.ids).read_text().split()
    found = []
    for ident in ids:
        path = f"{args.commit}:{args.trajs}/{ident}/{ident}.traj.json"
        shown = subprocess.run(
            ["git", "-C", args.repo, "show", path], capture_output=True, text=True, check=True
        )
        found += [(ident, c) for c in commands_of(json.loads(shown.stdout))]
    return found


def kind(command: str) -> str:
    """heredoc, python -c, or other."""
    if "<<" in command.replace("<<<", ""):
        return "heredoc"
    if re.search(r"\bpython[0-9.]*\s+(-\w+\s+)*-c\b", command):
        return "python -c"
    return "other"


async def replay(
    commands: list[tuple[str, str]], root: Path
) -> dict[str, collections.Counter[str]]:
    gate = PermissionGate(rules=RuleSet.from_lists({"allow": RULES}), dirty=lambda: False)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    reasons: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    for _ident, raw in commands:
        command = raw.replace("/testbed", str(root))
        subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
        decision = await gate.check(subject, "default")
        for group in ("all", kind(raw)):
            counts[group][decision.verdict] += 1
        if decision.verdict != "allow":
            key = _reason_key(decision.reason)
            reasons[key] += 1
            examples.setdefault(key, raw[:160])
    counts["reasons"] = reasons
    counts["examples"] = collections.Counter({f"{k} :: {v!r}": 1 for k, v in examples.items()})
    return counts


def _reason_key(reason: str) -> str:
    """A reason with the command-specific parts cut, so similar reasons count together."""
    plain = re.sub(r" \((?:[^()]|\([^()]*\))*\)", " (...)", reason)
    return plain.split("; ")[0][:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo")
    parser.add_argument("--commit")
    parser.add_argument("--trajs")
    parser.add_argument("--ids")
    parser.add_argument("--commands", help="a JSON list of {id, command} instead")
    parser.add_argument("--show", type=int, default=20, help="reasons to print")
    args = parser.parse_args()
    if not args.commands and not all((args.repo, args.commit, args.trajs, args.ids)):
        parser.error("give --commands, or all of --repo --commit --trajs --ids")
    try:
        commands = load(args)
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError) as exc:
        print(f"replay_rules: cannot read the commands: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        counts = asyncio.run(replay(commands, Path(folder)))
    print(f"rules: {', '.join(RULES)}")
    print(f"commands: {len(commands)} from {len({i for i, _ in commands})} trajectories")
    for group in ("all", "heredoc", "python -c", "other"):
        c = counts.get(group, collections.Counter())
        total = sum(c.values())
        print(
            f"{group:>10}: {total:5} commands, allowed {c['allow']}, asked {c['ask']}, "
            f"denied {c['deny']}"
        )
    print("reasons for the commands not allowed (count, reason):")
    for reason, n in counts["reasons"].most_common(args.show):
        print(f"  {n:5}  {reason}")
    print("one example per reason:")
    for line in list(counts["examples"])[: args.show]:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
