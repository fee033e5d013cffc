"""Checkpoint timings on a real checkout: the first checkpoint, later ones, and a restore.

    python bench/checkpoint_speed.py --repo PATH_OR_URL [--commit REV] [--runs 3]
                                     [--layouts direct,kernel,copy] [--touch 50]
                                     [--modes seeded,unseeded] [--venv]

`--repo` is a git repository (a local path or a URL; a URL is cloned once into a temporary
directory). Each run works on a fresh `git clone --shared` of it (checked out at `--commit`,
default its HEAD), so the repository given is never changed. Per layout and run, with a fresh
shadow repository:

1. the session's first checkpoint;
2. a checkpoint after appending a line to 1 tracked file, then to `--touch` other tracked files;
3. a checkpoint with nothing changed;
4. a restore to the first checkpoint (which also saves the unrecorded state first).

Layouts: `direct` checkpoints the clone itself; `kernel` opens the session's kernel overlay over
the clone and checkpoints the merged view at the clone's path (as an overlay session does);
`copy` checkpoints the copy fallback's tree in the session's layer. `kernel` is skipped when
this process cannot enter a private user and mount namespace. `--modes` says how first
checkpoints are built: `seeded` (the default: from the checkout's own index) and/or `unseeded`
(every file hashed, the path taken when that index is missing or unusable); with both, each run
measures one after the other, so a changing load hits both alike. `--venv` puts a hard-linked
copy of the running Python's virtual environment at `.venv` in each clone, untracked and not
ignored by most projects, as in many developers' checkouts.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kestrel.workspace import CheckpointStore
from kestrel.workspace.overlay import discard_layer, layer_for, open_view, prepare_namespace
from kestrel.workspace.upper_index import OverlayLayers

STEPS = ("first", "after 1 file", "after N files", "nothing changed", "restore to first")
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def git(*args: str, cwd: Path | None = None) -> str:
    """Run the user's side of git (isolated from this machine's config); its stdout."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def source_of(repo: str, temp: Path) -> Path:
    """A local repository to clone from: the path given, or a clone of the URL given."""
    local = Path(repo).expanduser()
    if local.exists():
        return local.resolve()
    target = temp / "source"
    git("clone", "--quiet", "--bare", repo, str(target))
    return target


def fresh_clone(source: Path, target: Path, commit: str | None) -> list[str]:
    """A shared clone of `source` at `commit`; its tracked regular files, sorted."""
    git("clone", "--quiet", "--shared", "--no-checkout", str(source), str(target))
    git("checkout", "--quiet", "--detach", commit or "HEAD", cwd=target)
    listing = git("ls-files", "-s", "-z", cwd=target).split("\0")
    return sorted(entry.split("\t", 1)[1] for entry in listing if entry.startswith("100644"))


def touch(root: Path, paths: list[str], count: int, offset: int) -> None:
    """Append a line to `count` tracked files spread over the list, starting at `offset`."""
    step = max(1, len(paths) // count)
    for number in range(count):
        path = root / paths[(offset + number * step) % len(paths)]
        with path.open("ab") as file:
            file.write(f"\n# touched {offset} {number}\n".encode())


def timed(action: Callable[[], object]) -> tuple[float, object]:
    """Seconds that one call of `action` took, and what it returned."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def add_venv(checkout: Path) -> None:
    """Hard-link this Python's virtual environment into the checkout as `.venv`."""
    if sys.prefix == sys.base_prefix:
        raise SystemExit("--venv needs this bench to run from a virtual environment")
    shutil.copytree(sys.prefix, checkout / ".venv", symlinks=True, copy_function=os.link)


def one_run(
    worktree: Path,
    shadow: Path,
    paths: list[str],
    mode: str,
    touch_count: int,
    layers: OverlayLayers | None = None,
) -> dict:
    """The five timings of one run on `worktree` with a fresh shadow repository."""
    extra = {"seed": False} if mode == "unseeded" else {}
    store = CheckpointStore(worktree, shadow, session="bench", layers=layers, **extra)
    figures: dict[str, float] = {}
    figures["first"], first = timed(lambda: store.snapshot("first"))
    assert first is not None
    touch(worktree, paths, 1, 0)
    figures["after 1 file"], _ = timed(lambda: store.snapshot("one"))
    touch(worktree, paths, touch_count, 1)
    figures["after N files"], _ = timed(lambda: store.snapshot("many"))
    figures["nothing changed"], _ = timed(lambda: store.snapshot("none"))
    figures["restore to first"], _ = timed(lambda: store.restore(first.id))  # type: ignore[attr-defined]
    return figures


def layout_runs(
    layout: str, source: Path, temp: Path, options: argparse.Namespace
) -> dict[str, list[dict]]:
    """Every run of one layout, per mode."""
    runs: dict[str, list[dict]] = {mode: [] for mode in options.modes}
    for run in range(options.runs):
        for mode in options.modes:
            base = temp / f"{layout}-{mode}-{run}"
            checkout = base / "checkout"
            paths = fresh_clone(source, checkout, options.commit)
            if options.venv:
                add_venv(checkout)
            # A checkout is rarely made in the second before a session starts; right after one,
            # git re-reads every file written in the same second as the index ("racily clean").
            time.sleep(1.1)
            if layout == "direct":
                runs[mode].append(one_run(checkout, base / "shadow", paths, mode, options.touch))
            else:
                runs[mode].append(overlay_run(layout, base, paths, mode, options.touch))
            shutil.rmtree(base, ignore_errors=True)
    return runs


def overlay_run(layout: str, base: Path, paths: list[str], mode: str, touch_count: int) -> dict:
    """One run on the session's overlay of `base/checkout`, as an overlay session works."""
    layer = layer_for(base / "data", "bench")
    view = open_view(base / "checkout", layer, kernel=layout == "kernel")
    try:
        if view.kind != layout:
            raise SystemExit(f"the {layout} overlay could not be opened")
        layers = OverlayLayers(upper=layer.upper, lower=layer.lower)  # as a session's store has
        return one_run(view.root, base / "shadow", paths, mode, touch_count, layers)
    finally:
        view.close()
        discard_layer(layer)


def report(layout: str, mode: str, runs: list[dict], options: argparse.Namespace) -> None:
    """One table row per step: median, min and max over the runs, in milliseconds."""
    for step in STEPS:
        samples = [run[step] * 1000 for run in runs]
        name = step.replace("N", str(options.touch))
        print(
            f"| {layout} | {mode} | {name} | {statistics.median(samples):,.0f} "
            f"| {min(samples):,.0f} | {max(samples):,.0f} |"
        )


def main() -> None:
    """Parse the options, run each layout, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True, help="a git repository: a path or a URL")
    parser.add_argument("--commit", default=None, help="what to check out (default: HEAD)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--touch", type=int, default=50, help="files touched in step 2b")
    parser.add_argument("--layouts", default="direct,kernel,copy")
    parser.add_argument("--modes", default="seeded", help="seeded and/or unseeded")
    parser.add_argument("--venv", action="store_true", help="add a virtualenv to each clone")
    options = parser.parse_args()
    options.modes = [name.strip() for name in options.modes.split(",") if name.strip()]
    if not options.modes or set(options.modes) - {"seeded", "unseeded"}:
        parser.error("--modes takes seeded, unseeded or both")
    layouts = [name.strip() for name in options.layouts.split(",") if name.strip()]
    unknown = set(layouts) - {"direct", "kernel", "copy"}
    if unknown:
        parser.error(f"unknown layouts: {', '.join(sorted(unknown))}")
    # The kernel overlay needs the private namespace, entered while this process has one thread.
    why_not = prepare_namespace() if "kernel" in layouts else None
    if why_not is not None:
        print(f"kernel layout skipped: {why_not}", file=sys.stderr)
        layouts.remove("kernel")
    load = os.getloadavg()[0]
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f}, "
        f"{git('--version').strip()}, Python {platform.python_version()}"
        + (", a virtualenv in each clone" if options.venv else "")
    )
    with tempfile.TemporaryDirectory(prefix="kestrel-ckpt-") as name:
        temp = Path(name)
        source = source_of(options.repo, temp)
        print("\n| layout | first checkpoint | step | median ms | min ms | max ms |")
        print("|---|---|---|---|---|---|")
        for layout in layouts:
            for mode, runs in layout_runs(layout, source, temp, options).items():
                report(layout, mode, runs, options)


if __name__ == "__main__":
    main()
