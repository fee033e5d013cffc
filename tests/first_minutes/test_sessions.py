"""A new user's sessions: listed for this repository, every project's with --all, and resumed
without copying an id (a numbered picker on a terminal, a clear refusal elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit import NewUser, Result, assert_clean

LONG_TASK = "rename every helper in the project " + "and keep going " * 12 + "END"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A scripted model that answers once and is done."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"text": "Done here."}]))
    return path


def start(user: NewUser, script: Path, task: str, cwd: Path | None = None) -> str:
    """Run one headless scripted session; return its id."""
    done = user.run(
        "-p",
        task,
        "--model",
        f"scripted:{script}",
        "--sandbox",
        "none",
        "--workspace",
        "direct",
        "--output-format",
        "json",
        cwd=cwd,
    )
    assert done.code == 0, done.text
    return str(json.loads(done.out)["session_id"])


def listed(result: Result) -> list[dict[str, object]]:
    assert result.code == 0, result.text
    assert_clean(result)
    rows: list[dict[str, object]] = json.loads(result.out)
    return rows


def test_with_no_sessions_the_list_says_how_to_start(user: NewUser) -> None:
    done = user.run("sessions", "list")
    assert done.code == 0
    assert done.first_line() == 'No sessions yet: start one with: kestrel "what to do"'
    assert_clean(done)
    assert listed(user.run("sessions", "list", "--json")) == []


def test_the_list_shows_this_repository_s_sessions_in_fixed_columns(
    user: NewUser, script: Path, tmp_path: Path
) -> None:
    sub = user.project / "pkg"
    sub.mkdir()
    first = start(user, script, "first task")
    second = start(user, script, LONG_TASK, cwd=sub)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = start(user, script, "a task in another folder", cwd=elsewhere)

    table = user.run("sessions", "list")
    assert table.code == 0
    assert_clean(table)
    lines = table.out.splitlines()
    assert lines[0].split() == ["id", "updated", "status", "turns", "cost", "task"]
    assert [line.split()[0] for line in lines[1:]] == [second, first]  # Full ids, newest first.
    assert all(len(line) <= 100 for line in lines)  # Piped: no wrapping, at most 100 columns.
    assert "…" in lines[1] and "END" not in table.out
    assert lines[2].split()[3:5] == ["done", "1"] and lines[2].endswith("  first task")
    # From the subfolder it is the same repository.
    assert user.run("sessions", "list", cwd=sub).out == table.out

    everything = user.run("sessions", "list", "--all")
    assert everything.out.splitlines()[0].split() == [
        "id",
        "updated",
        "status",
        "turns",
        "cost",
        "project",
        "task",
    ]
    assert {line.split()[0] for line in everything.out.splitlines()[1:]} == {first, second, other}

    rows = listed(user.run("sessions", "list", "--json"))
    assert [r["session_id"] for r in rows] == [second, first]
    assert rows[0]["project"] == str(user.project) and rows[0]["cwd"] == str(sub)
    assert rows[0]["task"] == LONG_TASK and rows[0]["turns"] == 1 and rows[0]["status"] == "done"
    assert {"created_at", "updated_at", "cost_usd"} <= rows[0].keys()
    (alone,) = listed(user.run("sessions", "list", "--json", cwd=elsewhere))
    assert alone["session_id"] == other and alone["project"] == str(elsewhere)


def test_an_empty_repository_points_at_the_other_projects(
    user: NewUser, script: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    start(user, script, "a task in another folder", cwd=elsewhere)
    done = user.run("sessions", "list")
    assert done.code == 0
    assert done.first_line() == (
        f'No sessions in {user.project} yet: start one with: kestrel "what to do" '
        "(1 session in other projects: kestrel sessions list --all)"
    )


def test_resume_without_an_id_in_a_script_names_the_newest(user: NewUser, script: Path) -> None:
    nothing = user.run("resume")
    assert nothing.code == 2
    assert nothing.first_line("err") == (
        "kestrel resume needs a session id: kestrel resume ID [MESSAGE]; there are no sessions "
        f'in {user.project} yet (start one: kestrel "what to do")'
    )
    assert_clean(nothing)
    first = start(user, script, "first task")
    second = start(user, script, "second task")
    done = user.run("resume", "-p")
    assert done.code == 2
    assert_clean(done)
    assert done.first_line("err") == (
        "kestrel resume needs a session id: kestrel resume ID [MESSAGE]; the newest in "
        f"{user.project}:"
    )
    ids = [line.split()[0] for line in done.err.splitlines()[2:]]
    assert ids == [second, first]


def test_resume_by_id_still_takes_a_follow_up(user: NewUser, script: Path) -> None:
    script.write_text(json.dumps([{"text": "Done here."}, {"text": "Followed up."}]))
    first = start(user, script, "first task")
    done = user.run("resume", first[:8], "and one more thing", "-p")
    assert done.code == 0, done.text
    assert done.first_line() == "Followed up."


def stopped_sessions(user: NewUser, script: Path) -> tuple[str, str]:
    """Two sessions a turn budget stopped after a tool call; each finishes when resumed."""
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}
    script.write_text(json.dumps([read, {"text": "Resumed and done."}]))
    ids = []
    for task in ("first task", "second task"):
        done = user.run(
            "-p", task, "--model", f"scripted:{script}", "--sandbox", "none",
            "--workspace", "direct", "--max-turns", "1", "--output-format", "json",
        )  # fmt: skip
        assert done.code == 3, done.text
        ids.append(str(json.loads(done.out)["session_id"]))
    return ids[0], ids[1]


def statuses(user: NewUser) -> dict[object, object]:
    return {r["session_id"]: r["status"] for r in listed(user.run("sessions", "list", "--json"))}


def test_the_picker_resumes_the_chosen_session(user: NewUser, script: Path) -> None:
    first, second = stopped_sessions(user, script)
    keys = [("Resume which?", "2\n"), ("Resumed and done.", "\n")]
    done = user.run_tty("resume", "--max-turns", "5", keys=keys)
    assert done.code == 0, done.out
    assert_clean(done)
    assert done.first_line() == f"Sessions in {user.project}, most recent first:"
    rows = done.out.splitlines()[2:4]
    assert [row.split()[:2] for row in rows] == [["1.", second], ["2.", first]]
    assert statuses(user) == {first: "done", second: "budget"}


def test_the_picker_takes_enter_for_the_newest_and_q_to_quit(user: NewUser, script: Path) -> None:
    first, second = stopped_sessions(user, script)
    quit_ = user.run_tty("resume", keys=[("Resume which?", "7\n"), ("from 1 to 2", "q\n")])
    assert quit_.code == 0
    assert_clean(quit_)
    assert "Type a number from 1 to 2, Enter for the newest, or q to quit." in quit_.out
    assert statuses(user) == {first: "budget", second: "budget"}
    keys = [("Resume which?", "\n"), ("Resumed and done.", "\n")]
    newest = user.run_tty("resume", "--max-turns", "5", keys=keys)
    assert newest.code == 0, newest.out
    assert statuses(user) == {first: "budget", second: "done"}


def test_ctrl_c_at_the_picker_cancels_cleanly(user: NewUser, script: Path) -> None:
    stopped_sessions(user, script)
    done = user.run_tty("resume", interrupt_when="Resume which?")
    assert done.code == 130, done.out
    assert_clean(done)
