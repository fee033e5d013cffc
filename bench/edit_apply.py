"""Edit application benchmark: runs the shared fast-apply runner through `kestrel.edits.apply_edit`.

    python bench/edit_apply.py [--cases PATH] [runner options, e.g. --formats udiff --limit 50]
    python bench/edit_apply.py --lazy [runner options]   # lazy-edit cases (bench/lazy_cases.py)

`--cases` defaults to the dev split beside the repository (`../shared/bench/edits/`). Goals: 0
wrong overall and per format; at least 95% correct; every ambiguous and no_match case refused;
p95 latency on the large slice under 5 ms in-process.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from kestrel.edits import apply_edit

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CASES = REPO.parent / "shared" / "bench" / "edits" / "cases_dev.jsonl.gz"


def timed_apply(files: dict[str, str], edit: object, fmt: str) -> tuple[dict[str, str], float]:
    """`apply_edit`, returning its in-process time so the runner's overhead is not counted."""
    start = time.perf_counter()
    result = apply_edit(files, edit, fmt)
    return result, time.perf_counter() - start


def _runner_args(argv: list[str]) -> tuple[Path, list[str]]:
    cases = DEFAULT_CASES
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--cases":
            cases = Path(next(it))
        elif arg.startswith("--cases="):
            cases = Path(arg.split("=", 1)[1])
        elif arg == "--lazy":
            cases = _lazy_cases()
        else:
            rest.append(arg)
    return cases, rest


def _lazy_cases() -> Path:
    """The lazy-edit cases built from the dev split's commits (generated on first use)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import lazy_cases

    made = lazy_cases.OUT.stat().st_mtime if lazy_cases.OUT.exists() else 0.0
    inputs = (DEFAULT_CASES, Path(lazy_cases.__file__))
    if any(path.stat().st_mtime > made for path in inputs):
        lazy_cases.build(DEFAULT_CASES, lazy_cases.OUT)
    return lazy_cases.OUT


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    """Run the shared runner on `cases` with this engine and print its tables."""
    cases, rest = _runner_args(argv)
    runner = cases.parent / "run_bench.py"
    if not runner.exists():
        runner = DEFAULT_CASES.parent / "run_bench.py"
    command = [
        sys.executable,
        str(runner),
        "--impl",
        "edit_apply:timed_apply",
        "--cases",
        str(cases),
        "--name",
        "kestrel.edits",
        "--out",
        str(Path(tempfile.gettempdir()) / "kestrel-bench" / "kestrel.edits.jsonl"),
        *rest,
    ]
    # The runner imports `--impl` from the working directory, so run it from here.
    return subprocess.run(
        command, cwd=Path(__file__).resolve().parent, env=env, check=False
    ).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
