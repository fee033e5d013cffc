"""Kill a scripted session with SIGKILL at random instants, resume it, and compare the outcome
with an uninterrupted run: the checkout's bytes, leftover temporary files, the events shown before
the kill, and how the session ends.

    python bench/crash_resume.py --trials 500 --seed 1 --jobs 2 --keep-failures /tmp/crash
    python bench/crash_resume.py --trials 500 --seed 1 --workspace direct

Each trial runs in its own temporary directory: a small project, a scripted model, and its own
HOME, XDG_CONFIG_HOME and KESTREL_DATA_DIR. Half of the kills come after a random number of
streamed stdout lines, half after a random delay up to the reference run's wall time. Two
commands spread their effects over time (write, sleep, delete; a directory tree built in two
halves), so that many kills land inside one; a resume must leave each call that a kill cut
short whole or absent: the checkout ends as the reference, or as the reference without exactly
one whole step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kestrel.protocol.codec import record_to_json
from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

KESTREL = [sys.executable, "-m", "kestrel"]
Files = dict[str, bytes]
Record = dict[str, Any]
Strategy = Literal["lines", "time", "apply"]
Workspace = Literal["overlay", "direct"]

TEST_CMD = "python3 -B -m unittest -q"
WRITE_CMD = "mkdir -p out && echo x > out/a.txt && sleep 0.6 && rm old.txt"
TREE_CMD = (
    "mkdir -p tree/a/b && echo 1 > tree/a/b/one.txt && sleep 0.4 && "
    "mkdir -p tree/c && echo 2 > tree/c/two.txt"
)
PROJECT: dict[str, str] = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n",
    "test_calc.py": (
        "import unittest\n\nfrom calc import add, double\n\n\n"
        "class CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_double(self):\n        self.assertEqual(double(4), 8)\n"
    ),
    "README.md": "# calc\n\nAdds numbers.\n\nSee calc.py.\n",
    "legacy.py": "OLD = True\n",
    "old.txt": "stale\n",
}
PATCH = (
    "*** Begin Patch\n*** Update File: README.md\n # calc\n \n-Adds numbers.\n+Adds and doubles "
    "numbers.\n \n See calc.py.\n*** Add File: docs/usage.md\n+Call add(a, b) or double(x).\n"
    "*** Delete File: legacy.py\n*** End Patch\n"
)


def turn(*calls: tuple[str, dict[str, str]], text: str = "") -> dict[str, Any]:
    """One model turn of the script: some text, then tool calls."""
    spoken = {"text": text} if text else {}
    return spoken | {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


SCRIPT = [
    turn(("grep", {"pattern": "add"}), text="Looking for add."),
    turn(("read_file", {"path": "calc.py"}), ("read_file", {"path": "README.md"})),
    turn(("edit_file", {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"})),
    turn(("write_file", {"path": "NOTES.md", "content": "ok\n"})),
    turn(("apply_patch", {"patch": PATCH})),
    turn(("bash", {"command": WRITE_CMD})),
    turn(("bash", {"command": TREE_CMD})),
    turn(("bash", {"command": TEST_CMD})),
    turn(text="Fixed add, documented it, cleaned up."),
]
STEPS: dict[str, tuple[str, ...]] = {
    "call_2_0": ("calc.py",),
    "call_3_0": ("NOTES.md",),
    "call_4_0": ("README.md", "docs/usage.md", "legacy.py"),
    "call_5_0": ("out/a.txt", "old.txt"),
    "call_6_0": ("tree/a/b/one.txt", "tree/c/two.txt"),
}
"""The calls that change files (by the scripted call ids: turn, then place) and the paths each
one changes: a call cut short by the kill may be missing whole from the end state."""
RULES = ["Bash(mkdir:*)", "Bash(echo:*)", "Bash(rm:*)", "Bash(sleep:*)", f"Bash({TEST_CMD}:*)"]
TEMP = re.compile(r"\.kestrel-|^\..+\.[0-9a-f]{12}\.tmp$")
"""Names of temporary files: the apply journal's, and those of an atomic write."""
PHASES = (
    "before start",
    "during model streaming",
    "after the final answer, in verification",
    "during a tool",
    "after finish, before changes_applied",
    "after changes_applied",
    "no kill: the run had ended",
)
TOOL_EVENTS = {"tool_call_requested", "permission_decided", "tool_started", "tool_output_chunk"}
TOOL_EVENTS |= {"tool_finished", "file_changed", "checkpoint_created"}


class Sandbox:
    """One trial's directory: the project, the script, and an isolated home and data directory."""

    def __init__(self, root: Path, workspace: Workspace = "overlay") -> None:
        self.root = root
        self.project = root / "project"
        for name, text in PROJECT.items():
            (self.project / name).parent.mkdir(parents=True, exist_ok=True)
            (self.project / name).write_text(text)
        (root / "script.json").write_text(json.dumps(SCRIPT))
        settings = root / "home" / ".config" / "kestrel" / "settings.toml"
        settings.parent.mkdir(parents=True)
        rules = f"[permissions]\nallow = {json.dumps(RULES)}\n"
        settings.write_text(f"workspace = {json.dumps(workspace)}\n{rules}")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "home" / ".config"),
            "KESTREL_DATA_DIR": str(root / "data"),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }
        self.spawn: dict[str, Any] = {"env": env, "cwd": self.project, "text": True}
        self.spawn["stdin"] = subprocess.DEVNULL

    def args(self) -> list[str]:
        """The headless run of the scripted task, streaming its events."""
        script = f"scripted:{self.root / 'script.json'}"
        mode = ["--permission-mode", "accept-edits", "--output-format", "stream-json"]
        return ["-p", "fix calc", "--model", script, *mode]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a kestrel command to the end."""
        return subprocess.run([*KESTREL, *args], **self.spawn, capture_output=True, timeout=300)

    def start(self) -> subprocess.Popen[str]:
        """Start the scripted run, its stdout a pipe."""
        pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        return subprocess.Popen([*KESTREL, *self.args()], **self.spawn, **pipes)

    def files(self) -> Files:
        """The checkout's files, without caches."""
        return {
            str(p.relative_to(self.project)): p.read_bytes()
            for p in sorted(self.project.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }

    def export(self, session_id: str) -> list[Record]:
        """The session's log as `kestrel sessions export ID` prints it."""
        with self.store() as store:
            return [json.loads(record_to_json(r)) for r in store.read(store.resolve(session_id))]

    def sessions(self) -> list[str]:
        """The ids `kestrel sessions list --json` shows."""
        with self.store() as store:
            return [s.session_id for s in store.sessions()]

    @contextlib.contextmanager
    def store(self) -> Iterator[SQLiteStore]:
        """The event log, read in this process: the `kestrel sessions` commands read it the same
        way but spend about 4 s starting (the reference run checks that they agree)."""
        store = SQLiteStore(self.root / "data" / STORE_FILE_NAME)
        try:
            yield store
        finally:
            store.close()


def lines(text: str) -> list[Record]:
    """Parse JSON Lines."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def kinds(records: list[Record]) -> list[str]:
    """The event types of records, in order."""
    return [str(r["event"]["type"]) for r in records]


@dataclass(frozen=True, slots=True)
class Reference:
    """What an uninterrupted run leaves: files, stdout lines, events, wall time."""

    files: Files
    stream_lines: int
    types: list[str]
    tail: list[str]
    wall_s: float
    workspace: Workspace = "overlay"


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


@dataclass(slots=True)
class Trial:
    """One trial's kill and what the checks found."""

    number: int
    strategy: Strategy
    point: float
    phase: str = ""
    ending: str = ""
    """complete, one step short, or half-done (the checkout after the resume)."""
    last_event: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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
