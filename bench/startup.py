"""How long the `kestrel` command takes to start: `--help`, `--version` and `sessions list`.

Each command runs `--runs` times as a fresh process of the installed console script (beside this
interpreter, else `python -m kestrel`), with its data directory and home in an empty temporary
folder, so `sessions list` opens a new, empty store. It prints the median and the fastest wall
time of each, and how many modules the process imported (from `python -X importtime`).

    python bench/startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (("--help",), ("--version",), ("sessions", "list"))


def _kestrel() -> list[str]:
    script = Path(sys.executable).parent / "kestrel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kestrel"]


def _env(folder: Path) -> dict[str, str]:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(folder / "data"),
    }


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace')}")
    return elapsed


def _modules(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> int:
    argv = [sys.executable, "-X", "importtime", "-m", "kestrel", *args]
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def main() -> None:
    """Time each command and print one line per command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    folder = Path(tempfile.mkdtemp(prefix="kestrel-startup-"))
    try:
        env, project = _env(folder), folder / "project"
        project.mkdir()
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {runs} runs each")
        for args in COMMANDS:
            argv = [*_kestrel(), *args]
            _time(argv, env, project)  # Warm the file cache and write the .pyc files.
            times = [_time(argv, env, project) for _ in range(runs)]
            print(
                f"kestrel {' '.join(args):<14} median {statistics.median(times) * 1000:6.0f} ms"
                f"  fastest {min(times) * 1000:6.0f} ms  modules {_modules(args, env, project)}"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
