"""Workspace timings on a generated git repository: overlay, checkpoints and apply.

    python bench/workspace.py [--files 5000] [--seed 7] [--overlay-runs 50] [--copy-runs 3]
                              [--first-runs 3] [--runs 20]

Builds a repository of `--files` Python and text files of 1-8 KB, about 20 per folder in nested
folders, committed once, in a temporary directory (the same bytes for the same seed). Times:

1. the kernel overlay (`open_view`: layer folders, bind, mount) and its discard (`View.close` +
   `discard_layer`), each session with its own layer; skipped when this process cannot enter a
   private user and mount namespace, which it tries first, while it still has one thread;
2. the copy fallback (`open_view(..., kernel=False)`) and its discard;
3. a session's first checkpoint (fresh shadow repository each run), then incremental checkpoints
   after rewriting 1 file, 10 files and none;
4. `apply_changes` of 50 modified files, 2 added and 2 deleted, each run on a fresh copy of the
   checkout (copied and flushed to disk outside the timed region), directly and through a kernel
   overlay's bind of the checkout, the journal in the session's layer (as a session applies), and
   `CheckpointStore.change_set()` of that change.

Goals: overlay create + discard under 50 ms, an incremental checkpoint under 200 ms, the apply
under 100 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kestrel.workspace import CheckpointStore
from kestrel.workspace.apply import apply_changes
from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.overlay import discard_layer, layer_for, open_view, prepare_namespace

WORDS = ("def", "class", "return", "import", "value", "result", "items", "config", "parse", "self")
PER_FOLDER = 20
SUBFOLDERS = 6
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_AUTHOR_DATE": "@1700000000 +0000",
    "GIT_COMMITTER_DATE": "@1700000000 +0000",
}


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the figures table: samples in seconds, and the goal in ms if there is one."""

    what: str
    samples: list[float]
    goal_ms: float | None = None


def text_of(rng: random.Random, size: int) -> bytes:
    """Source-like text of about `size` bytes."""
    lines: list[str] = []
    total = 0
    while total < size:
        line = "    " * rng.randint(0, 3) + " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def build_repo(root: Path, files: int, rng: random.Random) -> list[str]:
    """Write `files` files, ~20 per folder in a tree of folders, and commit them; their paths."""
    folders = [""]
    for number in range(1, -(-files // PER_FOLDER)):
        parent = folders[(number - 1) // SUBFOLDERS]
        folders.append(f"{parent}pkg{number}/")
    paths: list[str] = []
    for number in range(files):
        suffix = ".py" if rng.random() < 0.8 else rng.choice((".md", ".txt"))
        path = f"{folders[number // PER_FOLDER]}mod{number}{suffix}"
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text_of(rng, rng.randint(1_024, 8_192)))
        paths.append(path)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "initial"]):
        subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=root, env=env, check=True)
    return paths


def timed(action: Callable[[], object]) -> float:
    """Seconds that one call of `action` took."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def rewrite(rng: random.Random, root: Path, paths: list[str], count: int) -> None:
    """Give `count` random files new content."""
    for path in rng.sample(paths, count):
        (root / path).write_bytes(text_of(rng, rng.randint(1_024, 8_192)))


def kernel_overlay(repo: Path, data: Path, runs: int) -> list[Row] | str:
    """Create and discard a kernel overlay `runs` times; a reason string when it cannot be."""
    create: list[float] = []
    discard: list[float] = []
    total: list[float] = []
    for run in range(runs):
        layer = layer_for(data, f"kernel-{run}")
        started = time.perf_counter()
        view = open_view(repo, layer)
        opened = time.perf_counter()
        mounted = os.path.ismount(repo)
        view.close()
        discard_layer(layer)
        done = time.perf_counter()
        if view.kind != "kernel" or not mounted:
            discard_layer(layer)
            return "open_view fell back to a copy"
        if layer.root.exists():
            return f"discard_layer left {layer.root} behind"
        create.append(opened - started)
        discard.append(done - opened)
        total.append(done - started)
    return [
        Row("overlay (kernel): create", create),
        Row("overlay (kernel): discard", discard),
        Row("overlay (kernel): create + discard", total, 50),
    ]


def copy_overlay(repo: Path, data: Path, runs: int) -> list[Row]:
    """Create and discard the copy fallback `runs` times."""
    create: list[float] = []
    discard: list[float] = []
    for run in range(runs):
        layer = layer_for(data, f"copy-{run}")
        started = time.perf_counter()
        view = open_view(repo, layer, kernel=False)
        opened = time.perf_counter()
        view.close()
        discard_layer(layer)
        discard.append(time.perf_counter() - opened)
        create.append(opened - started)
    return [Row("overlay (copy): create", create), Row("overlay (copy): discard", discard)]


def checkpoints(repo: Path, temp: Path, paths: list[str], options: argparse.Namespace) -> list[Row]:
    """First checkpoints in fresh shadow repositories, then incremental ones in a single store."""
    rng = random.Random(options.seed + 1)
    first: list[float] = []
    for run in range(options.first_runs):
        fresh = CheckpointStore(repo, temp / f"shadow-first-{run}", session="first")
        first.append(timed(partial(fresh.snapshot, "first")))
    store = CheckpointStore(repo, temp / "shadow", session="bench")
    store.snapshot("baseline")
    one: list[float] = []
    ten: list[float] = []
    none: list[float] = []
    for _ in range(options.runs):
        rewrite(rng, repo, paths, 1)
        one.append(timed(lambda: store.snapshot("one")))
        rewrite(rng, repo, paths, 10)
        ten.append(timed(lambda: store.snapshot("ten")))
        none.append(timed(lambda: store.snapshot("none")))
    return [
        Row(f"checkpoint: first, {len(paths):,} files", first),
        Row("checkpoint: incremental, 1 file", one, 200),
        Row("checkpoint: incremental, 10 files", ten, 200),
        Row("checkpoint: incremental, nothing changed", none),
    ]


def change_of(rng: random.Random, repo: Path, paths: list[str]) -> ChangeSet:
    """50 files modified (a line changed, lines added), 2 added and 2 deleted."""
    chosen = rng.sample(paths, 54)
    changes: list[Change] = []
    for path in chosen[:50]:
        old = (repo / path).read_bytes()
        lines = old.split(b"\n")
        lines[len(lines) // 2] = b"    return changed_by_the_session"
        new = b"\n".join(lines) + text_of(rng, 200)
        changes.append(Change(path, base=Entry("file", old), new=Entry("file", new)))
    for path in chosen[50:52]:
        changes.append(Change(path, base=Entry("file", (repo / path).read_bytes()), new=None))
    for number, path in enumerate(chosen[52:]):
        added = str(Path(path).with_name(f"added_{number}.py"))
        changes.append(Change(added, base=None, new=Entry("file", text_of(rng, 3_000))))
    return ChangeSet(changes=tuple(sorted(changes, key=lambda c: c.path)))


def apply_rows(
    repo: Path, temp: Path, paths: list[str], options: argparse.Namespace, kernel: bool
) -> list[Row]:
    """Apply the 54-path change to fresh copies, directly and (when `kernel`) the way a session
    does it, through its overlay's bind of the checkout; then read it back from two checkpoints."""
    changes = change_of(random.Random(options.seed + 2), repo, paths)
    applying: list[float] = []
    through: list[float] = []
    for run in range(options.runs):
        for via_view in (False, True) if kernel else (False,):
            copy = temp / f"apply-{run}"
            subprocess.run(["cp", "-a", str(repo), str(copy)], check=True)
            view = open_view(copy, layer_for(temp / "data", f"apply-{run}")) if via_view else None
            real, journal = (view.real, view.journal) if view else (copy, temp / "journal")
            os.sync()  # the copy's dirty pages would otherwise be flushed by the apply's fsyncs
            started = time.perf_counter()
            result = apply_changes(real, changes, journal)
            (through if via_view else applying).append(time.perf_counter() - started)
            if not result.applied or len(result.written) + len(result.deleted) != 54:
                raise SystemExit(f"the apply did not go through: {result}")
            if view is not None:
                view.close()
                discard_layer(view.layer)
            shutil.rmtree(copy)
    store = CheckpointStore(repo, temp / "shadow", session="bench")
    before = store.head_id()
    apply_changes(repo, changes, temp / "journal-repo")
    store.snapshot("the 54-path change")
    reading: list[float] = []
    for _ in range(options.runs):
        reading.append(timed(lambda: store.change_set(base=before)))
    if store.change_set(base=before).paths() != changes.paths():
        raise SystemExit("change_set() does not give back the applied change")
    rows = [Row("apply_changes: 50 modified, 2 added, 2 deleted", applying, 100)]
    if through:
        rows.append(Row("the same apply through a kernel overlay's bind", through, 100))
    return [*rows, Row("change_set() of those 54 paths", reading)]


def machine(temp: Path) -> str:
    """CPU model, cores, kernel, Python, git and the temp directory's filesystem."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(temp)], capture_output=True, text=True)
    git = subprocess.run(["git", "--version"], capture_output=True, text=True)
    return (
        f"{model}, {os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, "
        f"CPython {platform.python_version()}, {git.stdout.strip()}, "
        f"temp dir {temp} on {fs.stdout.strip()}"
    )


def table(rows: list[Row]) -> str:
    """The figures as a Markdown table, in milliseconds."""
    lines = [
        "| what | runs | p50 ms | p95 ms | max ms | goal | met? |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ordered = sorted(row.samples)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        cells = [statistics.median(ordered), p95, ordered[-1]]
        figures = " | ".join(f"{value * 1000:,.1f}" for value in cells)
        goal = f"< {row.goal_ms:g} ms" if row.goal_ms else ""
        met = "" if row.goal_ms is None else "yes" if p95 * 1000 < row.goal_ms else "no (p95)"
        lines.append(f"| {row.what} | {len(ordered)} | {figures} | {goal} | {met} |")
    return "\n".join(lines)


def main() -> None:
    """Enter the namespace, build the repository, time each part and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--overlay-runs", type=int, default=50)
    parser.add_argument("--copy-runs", type=int, default=3)
    parser.add_argument("--first-runs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    unavailable = prepare_namespace()  # first: only a single-threaded process may enter it
    with tempfile.TemporaryDirectory(prefix="kestrel-bench-") as name:
        temp = Path(name)
        print(machine(temp), flush=True)
        repo, data = temp / "repo", temp / "data"
        paths = build_repo(repo, options.files, random.Random(options.seed))
        size = sum((repo / p).stat().st_size for p in paths) / 1e6
        print(f"repository: {len(paths):,} files, {size:.1f} MB, one commit", flush=True)
        rows: list[Row] = []
        kernel = unavailable or kernel_overlay(repo, data, options.overlay_runs)
        if isinstance(kernel, str):
            print(f"kernel overlay skipped: {kernel}")
        else:
            rows += kernel
        rows += copy_overlay(repo, data, options.copy_runs)
        rows += checkpoints(repo, temp, paths, options)
        rows += apply_rows(repo, temp, paths, options, not isinstance(kernel, str))
        print(table(rows))


if __name__ == "__main__":
    main()
