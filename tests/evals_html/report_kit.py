"""A real session log from a scripted headless run, and an evaluation run folder around it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli_kit import Env, fix_script, lines_of

HOSTILE = '<script>alert("from the log")</script>'
"""Text a tool returns that must show as text, never run."""


@dataclass(frozen=True)
class ScriptedSession:
    """A finished session: its environment, id, and exported records."""

    env: Env
    session_id: str
    records: list[dict[str, Any]]


def run_scripted_session(tmp: Path) -> ScriptedSession:
    """Run the fix task headless; the notes it writes and reads back hold a `<script>` tag."""
    env = Env(tmp)
    script = fix_script()
    notes = {"path": "NOTES.md", "content": f"add() subtracted; fixed.\n{HOSTILE}\n"}
    script[4] = {"tool_calls": [{"name": "write_file", "arguments": notes}]}
    script.insert(5, {"tool_calls": [{"name": "read_file", "arguments": {"path": "NOTES.md"}}]})
    env.script.write_text(json.dumps(script))
    done = env.run(*env.headless("--output-format", "json"))
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    exported = env.run("sessions", "export", session_id)
    assert exported.returncode == 0, exported.stderr
    return ScriptedSession(env, session_id, lines_of(exported.stdout))


def task_result(instance_id: str, status: str, **values: Any) -> dict[str, Any]:
    """One line of `results.jsonl` as the runner writes it."""
    return {
        "instance_id": instance_id,
        "status": status,
        "resolved": status == "resolved",
        **values,
    }


def make_run(root: Path, session: ScriptedSession) -> Path:
    """A run folder: four finished tasks (one with the real session's log) and one pending."""
    run_dir = root / "run-1"
    task_dir = run_dir / "tasks" / "calc__calc-1"
    task_dir.mkdir(parents=True)
    # The resolved task's log is the session's export; the others were never started here.
    (task_dir / "session.jsonl").write_text("".join(json.dumps(r) + "\n" for r in session.records))
    run = {
        "run_id": "run-1",
        "suite": "bundled-calc",
        "model": f"scripted:{session.env.script.name}",
        "settings": {"max_turns": 30, "jobs": 2, "sandbox": "bwrap"},
        "started": 1_767_225_600.0,
        "finished": 1_767_225_912.5,
        "task_ids": [
            "calc__calc-1",
            "calc__calc-2",
            "strings__strings-1",
            "dates__dates-0",
            "dates__dates-1",
        ],
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    resolved = task_result(
        "calc__calc-1",
        "resolved",
        session_id=session.session_id,
        session_dir=session.env.vars["KESTREL_DATA_DIR"],
        events_file="tasks/calc__calc-1/session.jsonl",
        turns=8,
        tool_calls={"grep": 1, "read_file": 2, "bash": 2, "edit_file": 1, "write_file": 1},
        edit_apply_success=1.0,
        files_read=["calc.py", "NOTES.md"],
        files_edited=["calc.py", "NOTES.md"],
        gold_files=["calc.py"],
        loc_precision=0.5,
        loc_recall=1.0,
        input_tokens=5_904,
        output_tokens=121,
        cache_read_tokens=0,
        cost_usd=0.0,
        wall_s=3.4,
        retries=0,
        verify_rounds=0,
        loops=0,
        compactions=0,
        token_efficiency=0.31,
        tests={"test_calc.py::test_add": "pass", "test_calc.py::test_double": "pass"},
    )
    unresolved = task_result(
        "calc__calc-2",
        "unresolved",
        session_id="missing-session",
        session_dir="tasks/calc__calc-2",
        turns=14,
        tool_calls={"read_file": 5, "edit_file": 4, "bash": 3},
        edit_apply_success=0.75,
        cost_usd=0.0412,
        input_tokens=48_210,
        output_tokens=2_930,
        wall_s=61.0,
        tests={"test_calc.py::test_add": "fail", "test_calc.py::test_double": "pass"},
    )
    budget = task_result("strings__strings-1", "budget_exhausted", turns=30, cost_usd=0.2875)
    broken = task_result("dates__dates-0", "error", error="setup command 'make' exited 2")
    lines = [json.dumps(t) for t in (resolved, unresolved, budget, broken)]
    # A run killed mid-write leaves half a line; the report must read past it.
    (run_dir / "results.jsonl").write_text("\n".join(lines) + '\n{"instance_id": "dat')
    return run_dir
