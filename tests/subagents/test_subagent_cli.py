"""Subagents through the real `kestrel` command: the fast role's model, the session list, and
definition files that are wrong."""

from __future__ import annotations

import json
from pathlib import Path

from cli_kit import Env, lines_of

PROMPT = "Where is add defined? Report path:line."


def _scripts(env: Env) -> Path:
    parent = [
        {
            "tool_calls": [
                {
                    "name": "task",
                    "arguments": {"description": "find add", "prompt": PROMPT, "agent": "explore"},
                }
            ]
        },
        {"text": "add is in calc.py."},
    ]
    child = [
        {"tool_calls": [{"name": "grep", "arguments": {"pattern": "def add"}}]},
        {"text": "add is defined at calc.py:1."},
    ]
    script = env.project.parent / "parent.json"
    script.write_text(json.dumps(parent))
    (env.project.parent / "child.json").write_text(json.dumps(child))
    settings = env.project / ".kestrel" / "settings.toml"
    settings.parent.mkdir()
    # The explore agent answers on the fast role: here a script of its own.
    settings.write_text(
        f"[models]\nfast = [{json.dumps('scripted:' + str(env.project.parent / 'child.json'))}]\n"
    )
    return script


def test_a_subagent_runs_on_the_fast_role_and_nests_under_its_parent(env: Env) -> None:
    script = _scripts(env)
    done = env.run(
        "-p", "find add", "--model", f"scripted:{script}", "--output-format", "stream-json"
    )
    assert done.returncode == 0, done.stderr
    records = lines_of(done.stdout)
    result = next(
        r["event"]
        for r in records
        if r["event"]["type"] == "tool_finished" and r["event"]["name"] == "task"  # type: ignore[index]
    )
    assert result["content"] == "add is defined at calc.py:1."  # type: ignore[index]
    started = next(r["event"] for r in records if r["event"]["type"] == "subagent_started")  # type: ignore[index]
    child_id = started["child_session_id"]  # type: ignore[index]
    assert started["model"] == f"scripted:{env.project.parent / 'child.json'}"  # type: ignore[index]

    listed = json.loads(env.run("sessions", "list", "--json").stdout)
    assert [s["parent_session_id"] for s in listed] == [None]
    parent_id = listed[0]["session_id"]
    everything = json.loads(env.run("sessions", "list", "--subagents", "--json").stdout)
    assert {s["session_id"]: s["parent_session_id"] for s in everything} == {
        parent_id: None,
        child_id: parent_id,
    }
    env.vars["COLUMNS"] = "300"  # Room for the whole task in the table.
    table = env.run("sessions", "list", "--subagents").stdout
    assert f"subagent of {parent_id}: {PROMPT}" in table
    assert table.count("subagent of") == 1

    shown = env.run("sessions", "show", parent_id)
    assert shown.returncode == 0, shown.stderr
    assert "subagents (1):" in shown.stdout
    assert f"{child_id}  explore: find add (done, 2 turns" in shown.stdout
    child_shown = env.run("sessions", "show", child_id)
    assert f"subagent session of {parent_id}" in child_shown.stdout


def test_a_malformed_definition_stops_the_run_with_its_file_and_line(env: Env) -> None:
    script = _scripts(env)
    bad = env.project / ".kestrel" / "agents" / "bad.md"
    bad.parent.mkdir()
    bad.write_text("---\ndescription: broken\ncolour: red\n---\nbody\n")
    done = env.run("-p", "find add", "--model", f"scripted:{script}")
    assert done.returncode != 0
    assert f"{bad}:3: unknown key 'colour'" in done.stderr
    assert "Traceback" not in done.stderr
    # The session was opened but nothing ran: fix the file and resume it.
    (listed,) = json.loads(env.run("sessions", "list", "--json").stdout)
    exported = lines_of(env.run("sessions", "export", listed["session_id"]).stdout)
    assert [r["event"]["type"] for r in exported] == ["session_started", "user_message"]  # type: ignore[index]
