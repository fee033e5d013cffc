"""Kill `kestrel apply` at a chosen journal step, then see what the next command makes of it.

Used by tests/cli/test_apply_kill.py (a few trials) and bench/apply_kill.py (many). The kill
point is the apply's test hook (`KESTREL_TEST_APPLY_HOOK`, see docs/workspace.md): the process
sends itself SIGKILL just before that step, as a crash or `kill -9` there would end it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli_kit import BUGGY, KESTREL, Env

from kestrel.protocol.events import ChangesApplied
from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

HOOK = "KESTREL_TEST_APPLY_HOOK"
FIXED = BUGGY.replace("return a - b", "return a + b")


def many_files_script(count: int) -> list[dict[str, object]]:
    """A scripted session that fixes calc.py and writes `count` notes, one tool call each."""
    turns: list[dict[str, object]] = [
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
        }
    ]
    for number in range(count):
        call = {
            "name": "write_file",
            "arguments": {"path": f"notes/n{number}.md", "content": "x\n"},
        }
        turns.append({"tool_calls": [call]})
    turns.append({"text": "Fixed, with notes."})
    return turns


def pending_session(env: Env, notes: int) -> str:
    """Run the session in the default mode, so that its change waits; its id."""
    env.script.write_text(json.dumps(many_files_script(notes)))
    done = env.run(
        "-p", "fix it", "--allow", "Edit(**)",
        "--model", f"scripted:{env.script}", "--output-format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (env.project / "calc.py").read_text() == BUGGY
    return str(json.loads(done.stdout)["session_id"])


def apply_with_hook(env: Env, session_id: str, hook: str) -> subprocess.CompletedProcess[str]:
    """`kestrel apply` with the test hook set."""
    return subprocess.run(
        [*KESTREL, "apply", session_id],
        env={**env.vars, HOOK: hook},
        cwd=env.project,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def state(env: Env, notes: int) -> str:
    """ "old", "new" or "mixed": what the checkout holds of the session's change."""
    fixed = (env.project / "calc.py").read_text() == FIXED
    written = [(env.project / "notes" / f"n{number}.md").exists() for number in range(notes)]
    if fixed and all(written):
        return "new"
    if not fixed and not any(written):
        return "old"
    return "mixed"


def applied_events(env: Env, session_id: str) -> int:
    """How many `changes_applied` events with outcome `applied` the session's log holds."""
    store = SQLiteStore(Path(env.vars["KESTREL_DATA_DIR"]) / STORE_FILE_NAME)
    try:
        events = [record.event for record in store.read(session_id)]
    finally:
        store.close()
    return sum(isinstance(e, ChangesApplied) and e.outcome == "applied" for e in events)


def leftovers(env: Env) -> list[str]:
    """Temp files an apply leaves beside its targets while it runs (none once repaired)."""
    return [str(p) for p in env.project.rglob("*.kestrel-*")]


@dataclass(frozen=True, slots=True)
class Trial:
    """What one killed apply left, and what the next command made of it."""

    step: str
    killed: bool
    after_kill: str
    after_repair: str
    repair_output: str
    events_after_repair: int
    final: str
    events_final: int
    leftovers: tuple[str, ...]


def trial(env: Env, notes: int, step: str, git: bool) -> Trial:
    """Make a pending change, kill its apply before `step`, run `kestrel sessions list`, then
    `kestrel apply` again; report the checkout and the log at each point."""
    if git:
        subprocess.run(["git", "init", "-q", str(env.project)], check=True)
    session_id = pending_session(env, notes)
    killed = apply_with_hook(env, session_id, f"kill:{step}")
    after_kill = state(env, notes)
    listed = env.run("sessions", "list")
    after_repair = state(env, notes)
    events = applied_events(env, session_id)
    again = env.run("apply", session_id)
    assert again.returncode == 0, again.stderr
    return Trial(
        step=step,
        killed=killed.returncode == -9,
        after_kill=after_kill,
        after_repair=after_repair,
        repair_output=listed.stdout + listed.stderr + again.stderr,
        events_after_repair=events,
        final=state(env, notes),
        events_final=applied_events(env, session_id),
        leftovers=tuple(leftovers(env)),
    )
