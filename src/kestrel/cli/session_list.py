"""Which sessions belong to a repository, and the fixed-column table that lists them.

A session records the directory it ran in; its project is the git work tree holding that
directory, or the directory itself outside any repository.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kestrel.cli.usage_text import dollars
from kestrel.store.base import SessionSummary

DEFAULT_WIDTH = 100
"""The table's width when standard output is not a terminal and COLUMNS is not set."""
_MIN_TASK = 16
_PROJECT_MAX = 32


def project_root(cwd: Path) -> Path:
    """The top level of the git work tree holding `cwd`, or `cwd` itself outside any."""
    here = Path(os.path.abspath(cwd))
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return here


@lru_cache(maxsize=1024)
def _project_of(cwd: str) -> Path:
    return project_root(Path(cwd))


def session_project(summary: SessionSummary) -> Path:
    """The project a session belongs to: the repository around the directory it ran in."""
    return _project_of(summary.cwd)


def select(
    sessions: Iterable[SessionSummary], project: Path | None, *, subagents: bool = False
) -> list[SessionSummary]:
    """`project`'s sessions (every project's with None), most recently active first.

    Subagents' sessions are left out unless `subagents`.
    """
    rows = [
        s
        for s in sessions
        if (subagents or s.parent_session_id is None)
        and (project is None or session_project(s) == project)
    ]
    return sorted(rows, key=lambda s: s.updated_at, reverse=True)


def as_json(summary: SessionSummary) -> dict[str, object]:
    """One session for `kestrel sessions list --json`."""
    return {
        "session_id": summary.session_id,
        "project": str(session_project(summary)),
        "status": summary.status,
        "created_at": summary.created_at,
        "updated_at": summary.updated_at,
        "task": summary.task,
        "turns": summary.turns,
        "cost_usd": summary.cost_usd,
        "cost_known": summary.cost_known,
        "cwd": summary.cwd,
        "model": summary.model,
        "events": summary.events,
        "parent_session_id": summary.parent_session_id,
    }


@dataclass(frozen=True, slots=True)
class Column:
    """A column of the table: its heading, width, and whether it is right-aligned."""

    heading: str
    width: int
    right: bool = False


def table_width() -> int:
    """COLUMNS, else the terminal's width, else `DEFAULT_WIDTH` (piped output)."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def render_table(
    rows: Sequence[SessionSummary],
    *,
    with_project: bool = False,
    numbered: bool = False,
    width: int | None = None,
) -> list[str]:
    """The sessions as lines of fixed columns that never wrap: the task is cut to fit with …."""
    home = str(Path.home())
    cells = [_cells(s, with_project, home) for s in rows]
    columns = [
        Column("id", max([len("id"), *(len(c[0]) for c in cells)])),
        Column("updated", len("2000-01-01 00:00")),
        Column("status", max([len("status"), *(len(c[2]) for c in cells)])),
        Column("turns", max([len("turns"), *(len(c[3]) for c in cells)]), right=True),
        Column("cost", max([len("cost"), *(len(c[4]) for c in cells)]), right=True),
    ]
    if with_project:
        longest = max([len("project"), *(len(c[5]) for c in cells)])
        columns.append(Column("project", min(longest, _PROJECT_MAX)))
    if numbered:
        columns.insert(0, Column("#", len(str(len(rows))) + 1, right=True))
        cells = [[f"{n}.", *row] for n, row in enumerate(cells, 1)]
    used = sum(c.width + 2 for c in columns)
    task = Column("task", max(_MIN_TASK, (width or table_width()) - used))
    columns.append(task)
    lines = [_line(columns, [c.heading for c in columns])]
    lines += [_line(columns, row) for row in cells]
    return lines


def _cells(s: SessionSummary, with_project: bool, home: str) -> list[str]:
    when = dt.datetime.fromtimestamp(s.updated_at).strftime("%Y-%m-%d %H:%M")
    first = s.task.splitlines()[0] if s.task.strip() else "(no task)"
    if s.parent_session_id is not None:
        first = f"subagent of {s.parent_session_id}: {first}"
    row = [s.session_id, when, s.status, str(s.turns), dollars(s.cost_usd, known=s.cost_known)]
    if with_project:
        project = str(session_project(s))
        if project == home or project.startswith(home + os.sep):
            project = "~" + project[len(home) :]
        row.append(project)
    row.append(first)
    return row


def _line(columns: Sequence[Column], cells: Sequence[str]) -> str:
    parts = []
    for column, cell in zip(columns, cells, strict=True):
        text = cut(cell, column.width, keep_end=column.heading == "project")
        parts.append(text.rjust(column.width) if column.right else text.ljust(column.width))
    return "  ".join(parts).rstrip()


def cut(text: str, width: int, *, keep_end: bool = False) -> str:
    """`text` in at most `width` characters, cut with … (at the start with `keep_end`)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    if keep_end:
        return "…" + text[len(text) - width + 1 :]
    return text[: width - 1] + "…"
