"""`kestrel --plan -p` and `kestrel plan show|approve|reject`, run as real commands."""

from __future__ import annotations

import json
from typing import Any

from cli_kit import BUGGY, Env, lines_of

PLAN = [
    {"id": "fix", "title": "Make add() add", "files": ["calc.py"], "checks": ["pytest"]},
    {"id": "notes", "title": "Write NOTES.md", "files": ["NOTES.md"], "depends_on": ["fix"]},
]
EDITED = [
    {"id": "fix", "title": "Make add() add", "files": ["calc.py"], "checks": ["pytest"]},
    {
        "id": "log",
        "title": "Record the fix in CHANGES.md",
        "files": ["CHANGES.md"],
        "depends_on": ["fix"],
    },
]


def todo(*statuses: str) -> dict[str, object]:
    items = [
        {"id": "fix", "text": "Make add() add", "status": statuses[0]},
        {"id": "log", "text": "Record the fix in CHANGES.md", "status": statuses[1]},
    ]
    return {"tool_calls": [{"name": "todo", "arguments": {"items": items}}]}


def plan_script() -> list[dict[str, object]]:
    """Read, propose; once approved, follow the edited plan and keep the task list current."""
    return [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {
            "text": "Here is my plan.",
            "tool_calls": [
                {"name": "propose_plan", "arguments": {"summary": "Fix add.", "steps": PLAN}}
            ],
        },
        todo("in_progress", "pending"),
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {
                        "path": "calc.py",
                        "old_str": "return a - b",
                        "new_str": "return a + b",
                    },
                }
            ]
        },
        todo("done", "in_progress"),
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "CHANGES.md", "content": "add() adds again.\n"},
                }
            ]
        },
        todo("done", "done"),
        {"text": "Both steps are done."},
    ]


def start_plan(env: Env) -> str:
    """Run the planning part headless; return the session id."""
    env.script.write_text(json.dumps(plan_script()))
    done = env.run(
        "--plan",
        "-p",
        "fix the failing tests",
        "--model",
        f"scripted:{env.script}",
        "--output-format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["reason"] == "plan"
    session_id = str(result["session_id"])
    assert f"kestrel plan approve {session_id}" in done.stderr
    assert f"kestrel plan reject {session_id}" in done.stderr
    return session_id


def events(env: Env, session_id: str) -> list[dict[str, Any]]:
    exported = env.run("sessions", "export", session_id)
    assert exported.returncode == 0, exported.stderr
    return [r["event"] for r in lines_of(exported.stdout)]


def test_headless_plan_is_edited_approved_and_carried_out(env: Env) -> None:
    session_id = start_plan(env)
    assert env.files()["calc.py"] == BUGGY  # Nothing was written while planning.

    shown = env.run("plan", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    full = [{"files": [], "checks": [], "depends_on": [], **step} for step in PLAN]
    assert json.loads(shown.stdout) == {"summary": "Fix add.", "steps": full}
    edited = env.project.parent / "edited.json"
    edited.write_text(json.dumps({"summary": "Fix add, log it.", "steps": EDITED}))

    approved = env.run(
        "plan",
        "approve",
        session_id,
        "--file",
        str(edited),
        "--permission-mode",
        "accept-edits",
        "-p",
    )
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.strip() == "Both steps are done."
    files = env.files()
    assert files["calc.py"] == BUGGY.replace("a - b", "a + b")
    assert files["CHANGES.md"] == "add() adds again.\n"
    assert "NOTES.md" not in files

    log = events(env, session_id)
    kinds = [e["type"] for e in log]
    assert kinds.count("plan_proposed") == 1 and kinds.count("plan_decided") == 1
    decided = next(e for e in log if e["type"] == "plan_decided")
    assert decided["decision"] == "approved" and decided["edited"] is True
    assert decided["permission_mode"] == "accept-edits"
    assert [s["id"] for s in decided["steps"]] == ["fix", "log"]
    lists = [e for e in log if e["type"] == "todo_updated"]
    assert [e["source"] for e in lists] == ["plan", "model", "model", "model"]
    assert [[i["status"] for i in e["items"]] for e in lists][-1] == ["done", "done"]
    # The approval reached the model as the person's message, with the edited plan.
    message = [e for e in log if e["type"] == "user_message"][-1]["text"]
    assert "approved plan" in message and "[log] Record the fix in CHANGES.md" in message
    assert kinds[-1] in ("session_finished", "changes_applied")

    again = env.run("plan", "approve", session_id, "-p")
    assert again.returncode == 2
    assert "has no plan waiting for a decision" in again.stderr
    assert "Traceback" not in again.stderr


def test_a_rejection_sends_the_reason_back_and_the_model_plans_again(env: Env) -> None:
    again = {
        "name": "propose_plan",
        "arguments": {"steps": [{"id": "fix", "title": "Only fix add()"}]},
    }
    script = [*plan_script()[:2], {"tool_calls": [again]}]
    env.script.write_text(json.dumps(script))
    done = env.run("--plan", "-p", "fix it", "--model", f"scripted:{env.script}")
    assert done.returncode == 0, done.stderr
    assert "[fix] Make add() add" in done.stdout  # The text output prints the plan.
    session_id = done.stderr.split("kestrel plan approve ")[1].split("`")[0]

    rejected = env.run("plan", "reject", session_id, "-m", "no notes file, please", "-p")
    assert rejected.returncode == 0, rejected.stderr
    assert "1. [fix] Only fix add()" in rejected.stdout
    log = events(env, session_id)
    decided = [e for e in log if e["type"] == "plan_decided"]
    assert [(e["decision"], e["reason"]) for e in decided] == [
        ("rejected", "no notes file, please")
    ]
    message = [e for e in log if e["type"] == "user_message"][-1]["text"]
    assert "rejected plan" in message and "no notes file, please" in message
    assert [e["type"] for e in log].count("plan_proposed") == 2
    assert env.files()["calc.py"] == BUGGY


def test_bad_decisions_are_clear_errors_and_the_plan_keeps_waiting(env: Env) -> None:
    session_id = start_plan(env)
    cyclic = env.project.parent / "cyclic.json"
    cyclic.write_text(
        json.dumps(
            [
                {"id": "a", "title": "A", "depends_on": ["b"]},
                {"id": "b", "title": "B", "depends_on": ["a"]},
            ]
        )
    )
    broken = env.project.parent / "broken.json"
    broken.write_text('{"steps": [')
    for args, expected in [
        (("plan", "approve", session_id, "--file", str(cyclic)), "cycle: 'a' -> 'b' -> 'a'"),
        (("plan", "approve", session_id, "--file", str(broken)), "not valid JSON"),
        (("plan", "reject", session_id, "-m", "  "), "say why the plan is rejected"),
        (("plan", "approve", session_id, "--plan-id", "nope"), "not nope"),
        (("resume", session_id), f"kestrel plan approve {session_id}"),
    ]:
        done = env.run(*args, "-p")
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert env.run("plan", "show", session_id).returncode == 0  # Still waiting, still whole.
    assert [e["type"] for e in events(env, session_id)].count("plan_decided") == 0
