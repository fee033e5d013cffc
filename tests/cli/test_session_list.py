"""Which sessions belong to a repository, and the table that lists them without wrapping."""

from __future__ import annotations

from pathlib import Path

from kestrel.cli.session_list import cut, project_root, render_table, select
from kestrel.store.base import SessionSummary


def summary(session_id: str, cwd: Path, updated: float, **extra: object) -> SessionSummary:
    fields: dict[str, object] = {
        "session_id": session_id,
        "created_at": 1.0,
        "updated_at": updated,
        "task": "fix it",
        "cwd": str(cwd),
        "model": "scripted:x",
        "events": 3,
        "status": "done",
        **extra,
    }
    return SessionSummary(**fields)  # type: ignore[arg-type]


def test_a_session_belongs_to_the_repository_around_its_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    nested = repo / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    loose = tmp_path / "loose"
    loose.mkdir()
    assert project_root(repo / "src" / "pkg") == repo
    assert project_root(nested) == nested
    assert project_root(loose) == loose
    sessions = [
        summary("a", repo, 1.0),
        summary("b", repo / "src" / "pkg", 3.0),
        summary("c", nested, 2.0),
        summary("d", loose, 4.0),
        summary("e", repo, 5.0, parent_session_id="a"),
    ]
    assert [s.session_id for s in select(sessions, repo)] == ["b", "a"]
    assert [s.session_id for s in select(sessions, repo, subagents=True)] == ["e", "b", "a"]
    assert [s.session_id for s in select(sessions, None)] == ["d", "b", "c", "a"]


def test_the_table_never_exceeds_its_width_and_cuts_the_task(tmp_path: Path) -> None:
    rows = [
        summary("k" * 20, tmp_path, 2.0, task="short", turns=12, cost_usd=0.5),
        summary("j" * 20, tmp_path, 1.0, task="a long task " * 20 + "\nsecond line", turns=3),
    ]
    lines = render_table(rows, width=80)
    assert lines[0].split() == ["id", "updated", "status", "turns", "cost", "task"]
    assert all(len(line) <= 80 for line in lines)
    assert lines[1].startswith("k" * 20 + "  ") and lines[1].endswith("  short")
    assert lines[2].endswith("…") and "second line" not in lines[2]
    # Columns line up: every task starts where the heading's does.
    start = lines[0].index("task")
    assert lines[1][start:] == "short" and lines[2][start - 2 : start] == "  "


def test_numbered_rows_and_a_project_column_cut_from_the_left(tmp_path: Path) -> None:
    deep = tmp_path / ("very-long-folder-name-" * 3) / "project"
    lines = render_table(
        [summary("i" * 20, deep, 1.0), summary("h" * 20, deep, 0.5)],
        with_project=True,
        numbered=True,
        width=120,
    )
    assert lines[0].split()[:2] == ["#", "id"] and "project" in lines[0].split()
    assert lines[1].split()[0] == "1." and lines[2].split()[0] == "2."
    project_cell = next(word for word in lines[1].split() if word.startswith("…"))
    assert project_cell.endswith("/project") and len(project_cell) == 32


def test_cut_keeps_short_text_and_marks_what_it_drops() -> None:
    assert cut("fits", 10) == "fits"
    assert cut("a\tb\nc", 10) == "a b c"
    assert cut("abcdefghij", 5) == "abcd…"
    assert cut("/home/me/project", 8, keep_end=True) == "…project"
