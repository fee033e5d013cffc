"""The run folder: what an evaluation run was asked to do, and one line per finished task.

```
<runs-dir>/<run-id>/run.json        suite, model, settings, started, finished, task ids
<runs-dir>/<run-id>/results.jsonl   one JSON object per finished task, appended when it finishes
<runs-dir>/<run-id>/tasks/<id>/     the task's checkout, session log, patches and test output
```

A task's line is appended with one `write` once the task is over, so a run killed at any moment
has either the whole line or none of it; rerun with the same id, it skips the tasks it finds.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.oserrors import error_text

RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
TASKS_DIR = "tasks"

Status = Literal["resolved", "unresolved", "budget_exhausted", "error"]
STATUSES: tuple[Status, ...] = ("resolved", "unresolved", "budget_exhausted", "error")


class RunError(ConfigError):
    """A run folder is missing, unreadable, or belongs to a different evaluation."""


@dataclass(slots=True)
class RunFolder:
    """One run's folder on disk."""

    root: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def run_id(self) -> str:
        """The run's id: its folder's name."""
        return self.root.name

    @property
    def run_file(self) -> Path:
        """`run.json`."""
        return self.root / RUN_FILE

    @property
    def results_file(self) -> Path:
        """`results.jsonl`."""
        return self.root / RESULTS_FILE

    def task_dir(self, instance_id: str) -> Path:
        """The working folder of one task."""
        return self.root / TASKS_DIR / _safe_name(instance_id)

    def read_run(self) -> dict[str, Any]:
        """`run.json` as a dict; `RunError` when it is missing or malformed."""
        try:
            data = json.loads(self.run_file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise RunError(f"{self.root}: not a run folder (no {RUN_FILE})") from exc
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunError(f"{self.run_file}: cannot read it: {error_text(exc)}") from exc
        if not isinstance(data, dict):
            raise RunError(f"{self.run_file}: expected a JSON object")
        return data

    def write_run(self, data: Mapping[str, Any]) -> None:
        """Replace `run.json` atomically."""
        self.root.mkdir(parents=True, exist_ok=True)
        partial = self.run_file.with_suffix(".json.partial")
        partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(partial, self.run_file)

    def results(self) -> list[dict[str, Any]]:
        """Every finished task's result, in the order they finished.

        A last line cut short (the machine lost power mid-write) is not a finished task.
        """
        try:
            text = self.results_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise RunError(f"{self.results_file}: cannot read it: {error_text(exc)}") from exc
        found: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and isinstance(data.get("instance_id"), str):
                found.append(data)
        return found

    def finished_ids(self) -> set[str]:
        """The instance ids that already have a result."""
        return {r["instance_id"] for r in self.results()}

    def append_result(self, result: Mapping[str, Any]) -> None:
        """Add one finished task's line in a single write, flushed to disk before returning."""
        line = (json.dumps(result, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            self._end_cut_line()
            fd = os.open(self.results_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def _end_cut_line(self) -> None:
        """Start a new line if the file ends in the middle of one, so a new line stays whole."""
        try:
            with self.results_file.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                if handle.tell() == 0:
                    return
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) == b"\n":
                    return
        except FileNotFoundError:
            return
        with self.results_file.open("ab") as handle:
            handle.write(b"\n")


def open_run(runs_dir: Path, run: str) -> RunFolder:
    """A run folder named by a path or by its id in `runs_dir`; `RunError` if there is none."""
    for candidate in (Path(run), runs_dir / run):
        if (candidate / RUN_FILE).is_file():
            return RunFolder(candidate)
    raise RunError(
        f"no evaluation run {run!r} (looked for {RUN_FILE} in {run} and {runs_dir / run})"
    )


def same_run(existing: Mapping[str, Any], wanted: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Refuse to continue a run that was started with a different suite, model or settings."""
    changed = [k for k in keys if existing.get(k) != wanted.get(k)]
    if changed:
        detail = "; ".join(f"{k}: {existing.get(k)!r} then, {wanted.get(k)!r} now" for k in changed)
        raise RunError(
            f"run {existing.get('run_id')!r} was started with other settings ({detail}); "
            "use another --run-id, or the same settings to continue it"
        )


def _safe_name(instance_id: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "-_.+" else "_" for ch in instance_id)
    return cleaned.strip(".") or "_"
