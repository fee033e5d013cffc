#!/usr/bin/env python3
"""Fuzz the shell parser, the permission gate and the rule matcher with generated bash.

Commands are built from pieces that have broken shell readers before: every kind of quoting,
heredocs (quoted, `<<-`, several on a line, inside `$(..)`), substitutions, redirections of
every shape, control characters, unicode, and real commands cut short or mutated. For each
command the checks are:

- no exception escapes `parse_shell`, the gate or the rule parser and matcher;
- a command the parser could not read with certainty (a syntax-error risk), or one `bash -n`
  rejects, is never allowed, under any rule set and in any mode;
- a rule written from the command (`Bash(..)`, `BashExact(..)`, `BashRegex(..)`) either parses
  or is refused with `RuleError`.

Usage:
  fuzz_shell.py --cpu-seconds N [--workers K] [--seed S] [--checkpoint FILE]

It prints examples run, CPU seconds, and each distinct failure with a reproducer, and writes
its progress to the checkpoint file every minute (and at the end), so a long unattended run can
be watched or cut short. The exit status is 1 when a failure was found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kestrel.policy.gate import PermissionGate
from kestrel.policy.rules import RuleError, RuleSet, command_matches, parse_rule
from kestrel.policy.shell import parse_shell
from kestrel.policy.subject import CallSubject

ROOT = Path("/nonexistent/workspace")  # the gate only reasons about paths under it
RULE_SETS = [
    ["Bash"],
    ["Bash(git:*)", "Bash(echo:*)", "Bash(cat:*)", "Bash(ls:*)", "Bash(sed:*)", "Bash(grep:*)"],
    ["BashHeredoc(cat)", "BashHeredoc(python3 -)", "Bash(python -c *)", "Bash(python3 -c *)"],
    ["BashRegex((?s).*)"],
]
MODES = ("default", "accept-edits", "bypass")

_NAMES = ["echo", "cat", "git", "ls", "python3", "python", "sed", "grep", "rm", "curl", "sh"]
_NAMES += ["bash", "dd", "pytest", "make", "pip", "uv", "cargo", "go", "rsync", "wget", "yarn"]
_NAMES += ["find", "xargs", "env", "sudo", "timeout", "npm", "tar", "awk", "tee", "sort", "cd"]
_ARGS = ["-n", "-la", "--output=/tmp/x", "log", "-c", "x", "src/a.py", "$HOME", "~", "~+/..", "*"]
_ARGS += ["-exec", "{}", ";", "--", "-i", "s/a/b/", "$(id)", "`id`", "<(id)", ">(id)", "$((1<<2))"]
_ARGS += ["'single quoted'", '"double $x"', "$'ansi\\n\\x41'", "${HOME}", "$OLDPWD", "é", "日本"]
_ARGS += ["\\ ", "a\\\nb", "#comment", "'(' ')'", '"a)"', "{a,b}", "!", "[[", "]]", "=", "x=1"]
_ARGS += ["--output", "foreach", "ext::sh", "-C", "/tmp", "--git-dir=/x", "of=/tmp/x", "-o", "run"]
_ARGS += ["-p", "no:x", "--to-command=sh", "-e", "1e id", "s/a/b/w /tmp/x", "--out=x", "-Ox"]
_OPS = [">", ">>", ">|", "&>", "&>>", "2>", "2>&1", ">&2", ">&", "<", "<>", "<<<", "3>", "1>&-"]
_TARGETS = ["out.txt", "/tmp/x", "$HOME/.bashrc", "~/x", "${X}", "/dev/null", "'a b'", "../x"]
_JOIN = [" ; ", " && ", " || ", " | ", " & ", "\n", " |& "]
_BODY = ["line", "$HOME", "`id`", "$(id)", "'q'", '"dq"', "\\", "EOF ", " EOF", "\tEOF", "a)"]
_BODY += ["", "cat <<X", "é日本", "\x00", "\x1b[31m"]
_HEADS = ["<<{d}", "<<'{d}'", '<<"{d}"', "<<-{d}", "<<\\{d}", "<< {d}", "<<-'{d}'"]
_CONTROL = [chr(c) for c in range(0, 32)] + ["\x7f", "\u202e", "\u200b", "\ufeff", "\ud7ff"]


def generate(rng: random.Random, seeds: list[str]) -> str:
    """One command: structured bash, or a real command cut short or mutated."""
    roll = rng.random()
    if roll < 0.25 and seeds:
        return _mutate(rng, rng.choice(seeds))
    parts = [_statement(rng, depth=0) for _ in range(rng.randint(1, 4))]
    text = parts[0]
    for part in parts[1:]:
        text += rng.choice(_JOIN) + part
    return text


def _statement(rng: random.Random, depth: int) -> str:
    roll = rng.random()
    if depth < 2 and roll < 0.1:
        return f"( {_statement(rng, depth + 1)} )"
    if depth < 2 and roll < 0.18:
        return f"{{ {_statement(rng, depth + 1)}; }}"
    if depth < 2 and roll < 0.24:
        return f"if {_statement(rng, depth + 1)}; then {_statement(rng, depth + 1)}; fi"
    if depth < 2 and roll < 0.3:
        return f"for i in a b; do {_statement(rng, depth + 1)}; done"
    if depth < 2 and roll < 0.36:
        return f"x=$({_statement(rng, depth + 1)})"
    if roll < 0.55:
        return _heredoc(rng, depth)
    return _simple(rng, depth)


def _simple(rng: random.Random, depth: int) -> str:
    words = [rng.choice(_NAMES)] + [_word(rng) for _ in range(rng.randint(0, 5))]
    for _ in range(rng.choices([0, 1, 2], [5, 3, 1])[0]):
        op = rng.choice(_OPS)
        words.append(op if op in ("2>&1", ">&2", "1>&-") else f"{op} {rng.choice(_TARGETS)}")
    return " ".join(words)


def _word(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.08:
        return "".join(rng.choice(_CONTROL) for _ in range(rng.randint(1, 3)))
    if roll < 0.2:
        return rng.choice(_ARGS) + rng.choice(_ARGS)
    return rng.choice(_ARGS)


def _heredoc(rng: random.Random, depth: int) -> str:
    count = rng.choices([1, 2, 3], [6, 2, 1])[0]
    heads, bodies = [], []
    for _ in range(count):
        delimiter = rng.choice(["EOF", "PY", "END_X", "E"])
        form = rng.choice(_HEADS)
        heads.append(form.format(d=delimiter))
        lines = [rng.choice(_BODY) for _ in range(rng.randint(0, 4))]
        if "-" in form:
            lines = ["\t" * rng.randint(0, 2) + line for line in lines]
        end = ("\t" if "-" in form and rng.random() < 0.5 else "") + delimiter
        bodies.append("\n".join([*lines, end]) if rng.random() < 0.95 else "\n".join(lines))
    name = rng.choice(["cat", "python3 -", "python3", "sh", "tee f", "cat > f.py", "grep x"])
    tail = rng.choice(["", " > out.py", " >> /tmp/x", " | sh", " && echo ok", "; rm -rf /"])
    text = f"{name} {' '.join(heads)}{tail}\n" + "\n".join(bodies)
    if depth < 2 and rng.random() < 0.15:
        text = f"x=$({text}\n)"
    return text


def _mutate(rng: random.Random, seed: str) -> str:
    roll = rng.random()
    if roll < 0.4:
        return seed[: rng.randint(0, len(seed))]
    chars = list(seed)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(chars))
        what = rng.random()
        if what < 0.4:
            chars.insert(at, rng.choice(["'", '"', "\\", "$", "`", "(", ")", "<", ">", "\n", "|"]))
        elif what < 0.7 and chars:
            del chars[min(at, len(chars) - 1)]
        else:
            chars.insert(at, rng.choice(_CONTROL))
    return "".join(chars)


# -- checks --------------------------------------------------------------------------------------


def bash_rejects(command: str) -> bool:
    """Whether bash itself finds a syntax error in `command` (`bash -n`)."""
    if "\x00" in command:
        return True  # bash cannot even be given it as an argument
    try:
        done = subprocess.run(
            ["bash", "-n", "-c", command], capture_output=True, timeout=10, check=False
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return True
    return done.returncode != 0


def check(command: str, *, use_bash: bool = True) -> list[str]:
    """Every broken promise for one command, as sentences; [] when all hold."""
    failures: list[str] = []
    parsed = parse_shell(command)
    unread = any(r.kind == "syntax-error" for r in parsed.risks)
    rejected = use_bash and bash_rejects(command)
    for rules in RULE_SETS:
        gate = PermissionGate(rules=RuleSet.from_lists({"allow": rules}), dirty=lambda: False)
        subject = CallSubject(tool="bash", kind="execute", root=ROOT, command=command)
        for mode in MODES:
            verdict = asyncio.run(gate.check(subject, mode)).verdict  # type: ignore[arg-type]
            if verdict == "allow" and unread:
                failures.append(f"allowed a line the parser could not read ({mode}, {rules})")
            if verdict == "allow" and rejected and mode != "bypass":
                failures.append(f"allowed a line bash rejects ({mode}, {rules})")
    for form in ("Bash({})", "BashExact({})", "BashRegex({})", "BashHeredoc({})"):
        try:
            rule = parse_rule(form.format(command))
        except RuleError:
            continue
        for simple in parsed.commands:
            command_matches(rule, simple.words)
        gate = PermissionGate(rules=RuleSet(allow=(rule,)), dirty=lambda: False)
        subject = CallSubject(tool="bash", kind="execute", root=ROOT, command=command)
        verdict = asyncio.run(gate.check(subject, "default")).verdict
        if verdict == "allow" and unread:
            failures.append(f"a rule written from the line allowed it unread ({form})")
    return failures


# -- the campaign --------------------------------------------------------------------------------


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hang


def _worker(index: int, seed: int, budget: float, seeds: list[str], queue: Any) -> None:
    rng = random.Random(seed * 1000 + index)
    signal.signal(signal.SIGALRM, _alarm)
    start = time.process_time()
    examples, failures, last = 0, {}, time.monotonic()
    while time.process_time() - start < budget:
        command = generate(rng, seeds)
        signal.alarm(20)
        try:
            found = check(command)
        except _Hang:
            found = ["took more than 20 s"]
        except Exception as exc:
            found = [f"{type(exc).__name__}: {exc}".splitlines()[0][:200]]
            found[0] += " | " + traceback.format_exc().strip().splitlines()[-3].strip()
        finally:
            signal.alarm(0)
        examples += 1
        for failure in found:
            failures.setdefault(failure, command)
        if time.monotonic() - last >= 10:
            queue.put((index, examples, time.process_time() - start, failures))
            last = time.monotonic()
    queue.put((index, examples, time.process_time() - start, failures))
    queue.put((index, None, None, None))


def _seeds() -> list[str]:
    corpus = Path(__file__).parent.parent / "tests" / "policy" / "data" / "rules_corpus.jsonl"
    if not corpus.exists():
        return []
    lines = [json.loads(line) for line in corpus.read_text().splitlines()]
    return [item["command"] for item in lines if "command" in item]


def run(cpu_seconds: float, workers: int, seed: int, checkpoint: Path) -> dict[str, Any]:
    """Run the campaign; return its totals (also written to `checkpoint`)."""
    seeds = _seeds()
    queue: Any = multiprocessing.Queue()
    budget = cpu_seconds / workers
    procs = [
        multiprocessing.Process(target=_worker, args=(i, seed, budget, seeds, queue), daemon=True)
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    state: dict[int, tuple[int, float, dict[str, str]]] = {}
    running, last = workers, 0.0
    while running:
        index, examples, cpu, failures = queue.get()
        if examples is None:
            running -= 1
            continue
        state[index] = (examples, cpu, failures)
        if time.monotonic() - last >= 60:
            _write(checkpoint, state, seed, done=False)
            last = time.monotonic()
    for proc in procs:
        proc.join()
    return _write(checkpoint, state, seed, done=True)


def _write(path: Path, state: dict[int, Any], seed: int, *, done: bool) -> dict[str, Any]:
    failures: dict[str, str] = {}
    for _, _, found in state.values():
        for failure, command in found.items():
            failures.setdefault(failure, command)
    totals = {
        "seed": seed,
        "done": done,
        "examples": sum(e for e, _, _ in state.values()),
        "cpu_seconds": round(sum(c for _, c, _ in state.values()), 1),
        "failures": [{"failure": f, "reproducer": c} for f, c in sorted(failures.items())],
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(totals, indent=1, ensure_ascii=True))
    tmp.replace(path)
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-seconds", type=float, required=True, help="total CPU budget")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--checkpoint", type=Path, default=Path("fuzz_shell.checkpoint.json"))
    args = parser.parse_args()
    if args.cpu_seconds <= 0 or args.workers < 1:
        parser.error("--cpu-seconds must be positive and --workers at least 1")
    try:
        args.checkpoint.write_text("{}")
    except OSError as exc:
        parser.error(f"cannot write the checkpoint {args.checkpoint}: {exc}")
    totals = run(args.cpu_seconds, args.workers, args.seed, args.checkpoint)
    print(f"seed {totals['seed']}: {totals['examples']} examples, {totals['cpu_seconds']} CPU s")
    print(f"failures: {len(totals['failures'])} (checkpoint: {args.checkpoint})")
    for item in totals["failures"]:
        print(f"- {item['failure']}\n  reproducer: {item['reproducer']!r}")
    return 1 if totals["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
