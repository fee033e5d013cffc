"""Kill a scripted session with SIGKILL at random instants, resume it, and compare the outcome
with an uninterrupted run: the checkout's bytes, leftover temporary files, the events shown before
the kill, and how the session ends.

    python bench/crash_resume.py --trials 500 --seed 1 --jobs 2 --keep-failures /tmp/crash
    python bench/crash_resume.py --trials 500 --seed 1 --workspace direct

Each trial runs in its own temporary directory: a small project, a scripted model, and its own
HOME, XDG_CONFIG_HOME and KESTREL_DATA_DIR. Half of the kills come after a random number of
streamed stdout lines, half after a random delay up to the reference run's wall time. Two
commands spread their effects over time (write, sleep, delete; a directory tree built in two
halves), and a `task` call hands a writing subagent a file write and a slow command, so that
many kills land inside one; a resume must leave each call that a kill cut
short whole or absent: the checkout ends as the reference, or as the reference without exactly
one whole step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from crash_kit import (
    PHASES,
    PROJECT,
    SCRIPT,
    STEPS,
    TEMP,
    TOOL_EVENTS,
    Files,
    Record,
    Reference,
    Sandbox,
    Trial,
    Workspace,
    kinds,
    lines,
)


def reference(jobs: int, workspace: Workspace) -> Reference:
    """Run the task uninterrupted `jobs` times at once (the load of the trials); all must agree."""

    def one(_: int) -> tuple[Files, int, list[str], float]:
        with tempfile.TemporaryDirectory(prefix="kestrel-ref-") as tmp:
            box = Sandbox(Path(tmp), workspace)
            began = time.monotonic()
            done = box.run(*box.args())
            wall = time.monotonic() - began
            assert done.returncode == 0, done.stderr
            shown = lines(done.stdout)
            log = box.export(str(shown[0]["session_id"]))
            exported = box.run("sessions", "export", str(shown[0]["session_id"])).stdout
            assert lines(exported) == log, "the in-process export differs from the command's"
            listed = json.loads(box.run("sessions", "list", "--json").stdout)
            assert [s["session_id"] for s in listed] == box.sessions(), "the lists differ"
            return box.files(), len(shown), kinds(log), wall

    with ThreadPoolExecutor(jobs) as pool:
        runs = list(pool.map(one, range(jobs)))
    files, shown, types, _ = runs[0]
    steady = [t for t in types if t != "tool_output_chunk"]  # chunking varies with timing
    for other in runs[1:]:
        assert other[0] == files, "reference runs left different files"
        assert [t for t in other[2] if t != "tool_output_chunk"] == steady, "different events"
    last = len(types) - 1 - types[::-1].index("session_finished")
    end = "changes_applied" if workspace == "overlay" else "session_finished"
    assert types.count("changes_applied") == (end == "changes_applied") and types[-1] == end, types
    return Reference(files, shown, types, types[last:], max(r[3] for r in runs), workspace)


def kill_run(box: Sandbox, trial: Trial, ref: Reference) -> list[Record]:
    """Start the run, SIGKILL it at the trial's point, return every stdout record it printed.

    While waiting, the checkout is sampled: each file must be whole, as before or as after.
    """
    proc = box.start()
    assert proc.stdout is not None
    shown: list[Record] = []
    began = time.monotonic()
    reached = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                shown.append(json.loads(line))
            if trial.strategy == "lines" and len(shown) >= trial.point and not reached.is_set():
                proc.send_signal(signal.SIGKILL)  # at once, as the line arrives
                reached.set()
        reached.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = began + trial.point if trial.strategy == "time" else began + 300
    poll = 0.001 if trial.strategy == "apply" else 0.05
    while not reached.is_set() and time.monotonic() < deadline:
        reached.wait(min(poll, max(0.0, deadline - time.monotonic())))
        if trial.strategy == "apply" and any(TEMP.search(p.name) for p in box.project.rglob("*")):
            break  # the journal is putting the change in place: kill now
        if not reached.is_set() and trial.strategy != "apply":
            trial.problems += sample(box, ref)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.returncode != -signal.SIGKILL:
        trial.phase = PHASES[6]
        trial.notes.append(f"the run had already exited ({proc.returncode})")
    reader.join(timeout=60)
    proc.stdout.close()
    return shown


def sample(box: Sandbox, ref: Reference) -> list[str]:
    """Problems with the checkout mid-run: a file that is neither its old nor its new content."""
    try:
        now = {p: b for p, b in box.files().items() if not TEMP.search(Path(p).name)}
    except FileNotFoundError:  # a file renamed or removed while listing
        return []
    return [
        f"mid-run: {path} is neither its original nor its final content: {data[:60]!r}"
        for path, data in now.items()
        if data != PROJECT.get(path, "").encode() and data != ref.files.get(path)
    ]


def allowed_files(ref: Reference, interrupted: set[str]) -> dict[str, Files]:
    """The end states the checkout may have, by name: the reference ("complete"), or, for each
    call that changes files and that the kill cut short (the resume rolls it back, and the
    scripted model does not run it again), the reference without that call's whole step."""
    states = {"complete": ref.files}
    for call_id in sorted(interrupted & set(STEPS)):
        short = dict(ref.files)
        for path in STEPS[call_id]:
            short.pop(path, None)
            if path in PROJECT:
                short[path] = PROJECT[path].encode()
        states[f"one step short ({call_id})"] = short
    return states


def phase_of(first_run: list[str]) -> str:
    """Where the kill landed, from the events logged before it."""
    if "changes_applied" in first_run:
        return PHASES[5]
    if "session_finished" in first_run:
        return PHASES[4]
    last = first_run[-1]
    if last == "model_completed" and first_run.count("model_completed") == len(SCRIPT):
        return PHASES[2]
    return PHASES[3] if last in TOOL_EVENTS or last.startswith("verification") else PHASES[1]


def plan(number: int, seed: int, ref: Reference, kill: str | None) -> Trial:
    """Trial `number`'s kill, drawn from the seed and the number alone; `kill` (lines:N,
    time:SECONDS or time:FROM-TO) fixes the strategy and the point or range; `apply` kills as
    soon as a temporary file of the apply journal shows in the checkout."""
    rng = random.Random(f"{seed}-{number}")
    strategy, _, point = (kill or "").partition(":")
    if strategy == "apply":
        return Trial(number, "apply", 0)
    if not strategy:
        strategy = "lines" if rng.random() < 0.5 else "time"
    low, _, high = point.partition("-")
    if strategy == "lines":
        return Trial(number, "lines", int(low) if low else rng.randint(1, ref.stream_lines))
    assert strategy == "time", "--kill is lines:N, time:SECONDS, time:FROM-TO or apply"
    span = (float(low), float(high or low)) if low else (0.0, ref.wall_s)
    return Trial(number, "time", round(rng.uniform(*span), 3))


def run_trial(trial: Trial, ref: Reference, keep: Path | None) -> Trial:
    """Kill, resume and check one run."""
    number = trial.number
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"kestrel-crash-{number}-"))
    try:
        box = Sandbox(root, ref.workspace)
        check_trial(box, trial, ref, kill_run(box, trial, ref))
    except Exception as exc:  # a crash of the harness or of kestrel is a failed trial
        trial.problems.append(f"harness: {type(exc).__name__}: {exc}")
    trial.seconds = time.monotonic() - began
    if trial.problems and keep is not None:
        with contextlib.suppress(shutil.Error):  # overlay whiteouts are devices: not copied
            shutil.copytree(root, keep / f"trial-{number}", symlinks=True, dirs_exist_ok=True)
        (keep / f"trial-{number}" / "trial.json").write_text(json.dumps(as_json(trial), indent=1))
    shutil.rmtree(root, ignore_errors=True)
    return trial


def check_trial(box: Sandbox, trial: Trial, ref: Reference, shown: list[Record]) -> None:
    """Resume the killed session and check files, leftovers, shown events and the ending."""
    if shown:
        session_id = str(shown[0]["session_id"])
    else:
        trial.phase = "before start"
        listed = box.sessions()
        if box.files() != {k: v.encode() for k, v in PROJECT.items()}:
            trial.problems.append("killed before start, yet the checkout changed")
        if len(listed) > 1:
            trial.problems.append(f"killed before start, yet {len(listed)} sessions are listed")
        if not listed:
            return
        session_id = listed[0]
    first_run = kinds(box.export(session_id))
    trial.last_event = first_run[-1] if first_run else ""
    trial.phase = trial.phase or phase_of(first_run)
    resumed = box.run("resume", session_id, "-p", "--output-format", "json")
    log = box.export(session_id)
    types = kinds(log)
    if len(box.sessions()) != 1:
        trial.problems.append(f"{len(box.sessions())} sessions in the log, not 1")
    if resumed.returncode != 0:
        trial.notes.append(f"resume exit {resumed.returncode}: {resumed.stderr.strip()[-300:]}")
    else:
        reason = json.loads(resumed.stdout).get("reason")
        if reason != "done":
            trial.problems.append(f"resume ended {reason!r}, not 'done'")
    interrupted: set[str] = set()
    for record in log:
        if record["event"]["type"] == "session_resumed":
            interrupted |= set(record["event"].get("interrupted_calls", []))
    if interrupted:
        trial.notes.append(f"interrupted calls: {sorted(interrupted)}")
    check_files(box, trial, ref, interrupted)
    check_log(trial, ref, shown, log, types)


def check_files(box: Sandbox, trial: Trial, ref: Reference, interrupted: set[str]) -> None:
    """Checks 1 and 2: the checkout's bytes, no temporary file, no half-written file."""
    files = box.files()
    temps = [p for p in files if TEMP.search(Path(p).name)]
    if temps:
        trial.problems.append(f"temporary files left in the checkout: {temps}")
    for path, data in files.items():
        want = ref.files.get(path)
        if want is not None and data != want and want.startswith(data):
            trial.problems.append(f"half-written: {path} holds {len(data)} of {len(want)} bytes")
    states = allowed_files(ref, interrupted)
    ending = next((name for name, state in states.items() if files == state), None)
    trial.ending = "half-done" if ending is None else ending.split(" (")[0]
    if files == {k: v.encode() for k, v in PROJECT.items()}:
        trial.ending = "untouched"  # Nothing applied: not half of anything (an error shows why).
    if ending is None:
        trial.problems.append("files differ from the reference: " + diff(ref.files, files))
    elif ending != "complete":
        trial.notes.append(f"{ending}: rolled back whole: " + diff(ref.files, files))


def check_log(
    trial: Trial, ref: Reference, shown: list[Record], log: list[Record], types: list[str]
) -> None:
    """Checks 3 and 4: every shown event is logged unchanged, and the session ends applied once."""
    by_seq = {r["seq"]: r for r in log}
    lost = [r for r in shown if by_seq.get(r["seq"]) != r]
    if lost:
        first = lost[0]
        trial.problems.append(
            f"{len(lost)} shown events not in the log as shown; first seq {first['seq']} "
            f"{first['event']['type']}: logged as {json.dumps(by_seq.get(first['seq']))[:200]}"
        )
    if "session_finished" not in types:
        trial.problems.append(f"no session_finished; the log ends {types[-6:]}")
        return
    last = len(types) - 1 - types[::-1].index("session_finished")
    finished = log[last]["event"]
    tail = types[last:]
    applied = [r["event"] for r in log[last:] if r["event"]["type"] == "changes_applied"]
    if finished.get("reason") != "done":
        trial.problems.append(f"the session finished {finished.get('reason')!r}")
    if ref.workspace == "direct":  # Nothing to hand over: the session worked on the checkout.
        if applied or tail != ["session_finished"]:
            trial.problems.append(f"after the last session_finished: {tail}")
        return
    if len(applied) != 1 or applied[0].get("outcome") != "applied":
        outcomes = [a.get("outcome") for a in applied]
        trial.problems.append(f"after the last session_finished: {tail}, outcomes {outcomes}")
    elif tail[-1] != "changes_applied":
        trial.problems.append(f"events after changes_applied: {tail}")
    if types.count("changes_applied") != 1:
        trial.notes.append(f"{types.count('changes_applied')} changes_applied in the log")


def diff(want: Files, got: Files) -> str:
    """Which paths are missing, extra or different."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(p for p in set(want) & set(got) if want[p] != got[p])
    parts = [f"missing {missing}"] * bool(missing) + [f"extra {extra}"] * bool(extra)
    parts += [f"{p}: {got[p][:80]!r} != {want[p][:80]!r}" for p in changed]
    return "; ".join(parts) or "none"


def as_json(trial: Trial) -> dict[str, Any]:
    """A trial as a JSON object for the failure log, with the options that run it again."""
    repro = f"--only {trial.number} --kill {trial.strategy}:{trial.point:g}"
    return {"repro": repro} | {k: v for k, v in asdict(trial).items() if k != "seconds"}


def summary(trials: list[Trial], wall: float) -> None:
    """Print the figures."""
    ok = sum(not t.problems for t in trials)
    median = statistics.median(t.seconds for t in trials)
    print(f"\ntrials {len(trials)}, successes {ok}, success rate {100 * ok / len(trials):.1f}%")
    print(f"wall time {wall / 60:.1f} min, median {median:.2f} s per trial")
    print("kills by phase: trials (failures)")
    for phase in PHASES:
        of = [t for t in trials if t.phase == phase]
        print(f"  {phase:38} {len(of):4} ({sum(bool(t.problems) for t in of)})")
    endings = Counter(t.ending or "no check" for t in trials)
    temps = sum(any(p.startswith("temporary files") for p in t.problems) for t in trials)
    print(f"checkout after the resume: {dict(endings)}; trials with temporary files: {temps}")
    print(f"kill strategies: {dict(Counter(t.strategy for t in trials))}")
    print(f"last event logged before the kill: {dict(Counter(t.last_event for t in trials))}")
    for note, count in Counter(n.split(":")[0] for t in trials for n in t.notes).most_common():
        print(f"  note: {note}: {count}")
    for t in trials:
        if t.problems:
            print(json.dumps(as_json(t)))


def main() -> None:
    """Run the trials and print a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="trials run at once")
    parser.add_argument("--only", type=int, help="run only this trial number (to reproduce it)")
    parser.add_argument(
        "--kill", help="lines:N, time:SECONDS, time:FROM-TO or apply, for every trial"
    )
    parser.add_argument(
        "--workspace",
        choices=["overlay", "direct"],
        default="overlay",
        help="where the session works: an overlay applied at the end, or the checkout itself",
    )
    parser.add_argument("--keep-failures", type=Path, help="copy failed trials' directories here")
    opts = parser.parse_args()
    if opts.keep_failures:
        opts.keep_failures.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    ref = reference(opts.jobs, opts.workspace)
    print(
        f"reference: {len(ref.files)} files, {ref.stream_lines} stdout lines, "
        f"{len(ref.types)} events, {ref.wall_s:.2f} s; ends {ref.tail}",
        flush=True,
    )
    numbers = [opts.only] if opts.only is not None else list(range(opts.trials))
    trials: list[Trial] = []
    with ThreadPoolExecutor(opts.jobs) as pool:
        plans = [plan(n, opts.seed, ref, opts.kill) for n in numbers]
        runs = pool.map(lambda t: run_trial(t, ref, opts.keep_failures), plans)
        for trial in runs:
            trials.append(trial)
            if trial.problems:
                print(f"FAIL {json.dumps(as_json(trial))}", flush=True)
            if len(trials) % 25 == 0 or opts.only is not None:
                ok = sum(not t.problems for t in trials)
                print(
                    f"{len(trials)} trials, {ok} ok, {time.monotonic() - began:.0f} s", flush=True
                )
    summary(trials, time.monotonic() - began)


if __name__ == "__main__":
    main()
