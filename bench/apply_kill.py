"""Kill `kestrel apply` mid-way, many times, and see whether the next command leaves the checkout
entirely old or entirely new.

Each trial makes a real session (scripted model, kernel overlay or copy, real git checkpoints)
whose change waits: calc.py fixed and `--notes` new files. Then `kestrel apply` is killed with
SIGKILL, either at a journal step chosen at random (the apply's test hook: `--mode hook`) or
from outside after a random delay (`--mode outside`, as a person's `kill -9` would). Then
`kestrel sessions list` runs, which does not open any overlay, and the checkout is read again.
Finally `kestrel apply` runs once more, which must say "already applied" when the change got in.
Half of the trials use a checkout with a `.git` folder (the journal lives there), half without
(the journal lives in the session's layer).

It prints, per mode: trials, how many kills left the checkout mixed (the kill cut the apply),
how many were mixed after the next command (must be 0), how many logs hold other than exactly one
`changes_applied` event at the end (must be 0), and leftover temp files (must be 0).

    python bench/apply_kill.py [--trials 50] [--mode hook|outside|both] [--notes 8]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "cli"))

from apply_kill_kit import (
    applied_events,
    leftovers,
    pending_session,
    state,
    trial,
)
from cli_kit import KESTREL, Env


def hook_trial(tmp: Path, notes: int, rng: random.Random, git: bool) -> dict[str, object]:
    """One trial killed at a random journal step through the test hook."""
    steps = ["staged", "journaled", *(f"op:{n}" for n in range(notes + 1)), "done", "cleanup"]
    step = rng.choice(steps)
    result = trial(Env(tmp), notes, step, git)
    return {
        "step": step,
        "after_kill": result.after_kill,
        "after_repair": result.after_repair,
        "final": result.final,
        "events": result.events_final,
        "leftovers": len(result.leftovers),
        "traceback": "Traceback" in result.repair_output,
    }


def calibrate(notes: int) -> float:
    """How long one `kestrel apply` of such a change takes here, start to end."""
    with tempfile.TemporaryDirectory(prefix="apply-kill-") as tmp:
        env = Env(Path(tmp))
        session_id = pending_session(env, notes)
        started = time.monotonic()
        done = env.run("apply", session_id)
        assert done.returncode == 0, done.stderr
        return time.monotonic() - started


def outside_trial(
    tmp: Path, notes: int, rng: random.Random, git: bool, took: float
) -> dict[str, object]:
    """One trial killed from outside after a random delay: within the last half of the time an
    apply takes, where it writes the checkout."""
    env = Env(tmp)
    if git:
        subprocess.run(["git", "init", "-q", str(env.project)], check=True)
    session_id = pending_session(env, notes)
    apply = subprocess.Popen(
        [*KESTREL, "apply", session_id],
        env=env.vars,
        cwd=env.project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    time.sleep(rng.uniform(0.5, 1.0) * took)
    if apply.poll() is None:
        os.kill(apply.pid, signal.SIGKILL)
    apply.wait()
    after_kill = state(env, notes)
    listed = env.run("sessions", "list")
    after_repair = state(env, notes)
    again = env.run("apply", session_id)
    return {
        "step": "killed" if apply.returncode == -9 else "finished",
        "after_kill": after_kill,
        "after_repair": after_repair,
        "final": state(env, notes),
        "events": applied_events(env, session_id),
        "leftovers": len(leftovers(env)),
        "traceback": "Traceback" in listed.stderr + again.stderr,
    }


def report(mode: str, rows: list[dict[str, object]]) -> None:
    """Print one mode's figures."""
    mixed_kill = sum(row["after_kill"] == "mixed" for row in rows)
    mixed_after = sum(row["after_repair"] == "mixed" for row in rows)
    not_new = sum(row["final"] != "new" for row in rows)
    bad_events = sum(row["events"] != 1 for row in rows)
    left = sum(int(str(row["leftovers"])) > 0 for row in rows)
    tracebacks = sum(bool(row["traceback"]) for row in rows)
    print(f"mode {mode}: {len(rows)} trials")
    print(f"  left mixed by the kill:                     {mixed_kill}")
    kills = Counter(str(row["after_kill"]) for row in rows)
    print("  checkout after the kill: " + ", ".join(f"{k} {v}" for k, v in sorted(kills.items())))
    print(f"  mixed after the next command (want 0):      {mixed_after}")
    print(f"  not fully applied after apply again (0):    {not_new}")
    print(f"  logs without exactly one applied event (0): {bad_events}")
    print(f"  trials with leftover temp files (want 0):   {left}")
    print(f"  tracebacks in any output (want 0):          {tracebacks}")
    steps = Counter(str(row["step"]) for row in rows)
    print("  kill points: " + ", ".join(f"{k} {v}" for k, v in sorted(steps.items())))


def main() -> None:
    """Run the trials and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--mode", choices=("hook", "outside", "both"), default="both")
    parser.add_argument("--notes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    modes = ("hook", "outside") if args.mode == "both" else (args.mode,)
    for mode in modes:
        took = calibrate(args.notes) if mode == "outside" else 0.0
        if mode == "outside":
            print(f"one apply takes {took:.2f} s here; kills land 50-100% of the way in")
        rows = []
        for number in range(args.trials):
            git = number % 2 == 0
            with tempfile.TemporaryDirectory(prefix="apply-kill-") as tmp:
                if mode == "hook":
                    rows.append(hook_trial(Path(tmp), args.notes, rng, git))
                else:
                    rows.append(outside_trial(Path(tmp), args.notes, rng, git, took))
        report(mode, rows)


if __name__ == "__main__":
    main()
