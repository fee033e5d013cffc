"""A tool call killed inside leaves all of its effects or none once the session is resumed.

Each test runs the real `kestrel` command on a scripted model and SIGKILLs it at a point the test
chooses, never after a delay: a command says it is ready on its output, an edit stops itself
between two writes through `KESTREL_TEST_EDIT_HOOK`. Then `kestrel resume` settles the call, and
the test checks the files and what the model was told.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

KESTREL = [sys.executable, "-m", "kestrel"]
SLOW = "echo half > half.txt && echo READY && sleep 60 && rm old.txt"
"""Writes one file, says so, and would delete another a minute later."""
PATCH = (
    "*** Begin Patch\n*** Update File: README.md\n-Adds numbers.\n+Adds and doubles numbers.\n"
    "*** Add File: docs/usage.md\n+Call add(a, b).\n*** Delete File: old.txt\n*** End Patch\n"
)
PROJECT = {"README.md": "Adds numbers.\n", "old.txt": "stale\n", ".gitignore": "attempted\n"}


def call(name: str, **arguments: str) -> dict[str, Any]:
    """One scripted turn with one tool call."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


class Box:
    """A project, a script, and a home and data directory of their own."""

    def __init__(self, root: Path, turns: list[dict[str, Any]], settings: str = "") -> None:
        self.project = root / "project"
        for name, text in PROJECT.items():
            (self.project / name).parent.mkdir(parents=True, exist_ok=True)
            (self.project / name).write_text(text)
        self.script = root / "script.json"
        self.script.write_text(json.dumps([*turns, {"text": "Done."}]))
        config = root / "home" / ".config" / "kestrel" / "settings.toml"
        config.parent.mkdir(parents=True)
        config.write_text(settings)
        self.vars = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "home" / ".config"),
            "KESTREL_DATA_DIR": str(root / "data"),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "PYTHONUNBUFFERED": "1",
        }

    def args(self, *extra: str) -> list[str]:
        """A headless run of the script that may do anything unasked."""
        model = ["--model", f"scripted:{self.script}", "--permission-mode", "bypass"]
        return ["-p", "do it", *model, "--output-format", "stream-json", *extra]

    def kill_when(
        self,
        seen: tuple[str, ...],
        *extra: str,
        hook: str = "",
        tool_hook: str = "",
        signum: int = signal.SIGKILL,
    ) -> str:
        """Start the run; send it `signum` (SIGKILL) when a stdout line holds every string of
        `seen` (or let a test hook kill it); return the session id."""
        env = {**self.vars, "KESTREL_TEST_EDIT_HOOK": hook, "KESTREL_TEST_TOOL_HOOK": tool_hook}
        proc = subprocess.Popen(
            [*KESTREL, *self.args(*extra)],
            env=env,
            cwd=self.project,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        session_id = ""
        for line in proc.stdout:
            record = json.loads(line)
            session_id = session_id or str(record["session_id"])
            if seen and all(part in line for part in seen):
                proc.send_signal(signum)
                break
        proc.wait(timeout=120)
        proc.stdout.close()
        # SIGTERM ends Kestrel with exit code 143 after it settled the session.
        assert proc.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 143)
        return session_id

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A kestrel command, to its end."""
        return subprocess.run(
            [*KESTREL, *args],
            env=self.vars,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )

    def resume(self, session_id: str, *extra: str) -> dict[str, Any]:
        """`kestrel resume ID -p`; its JSON result."""
        done = self.run("resume", session_id, "-p", "--output-format", "json", *extra)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def events(self, session_id: str) -> list[Any]:
        """The session's events, from its log."""
        store = SQLiteStore(Path(self.vars["KESTREL_DATA_DIR"]) / STORE_FILE_NAME)
        try:
            return [record.event for record in store.read(session_id)]
        finally:
            store.close()

    def result_of(self, session_id: str, name: str) -> Any:
        """The last `tool_finished` of the tool `name`."""
        finished = [
            e for e in self.events(session_id) if e.type == "tool_finished" and e.name == name
        ]
        return finished[-1]

    def files(self) -> dict[str, str]:
        """The checkout's files, besides the ones every test starts with unchanged."""
        return {
            str(p.relative_to(self.project)): p.read_text()
            for p in sorted(self.project.rglob("*"))
            if p.is_file() and PROJECT.get(p.name) != p.read_text()
        }


ROLLED_BACK = "Interrupted and rolled back"
READY = ('"tool_output_chunk"', "READY")


@pytest.mark.parametrize("workspace", ["overlay", "direct"])
def test_a_command_killed_halfway_is_rolled_back_and_the_model_told(
    tmp_path: Path, workspace: str
) -> None:
    box = Box(tmp_path, [call("bash", command=SLOW)])
    session_id = box.kill_when(READY, "--workspace", workspace)
    if workspace == "direct":
        assert (box.project / "half.txt").exists()  # the half the crash left in the checkout
    result = box.resume(session_id, "--workspace", workspace)
    assert result["reason"] == "done"
    finished = box.result_of(session_id, "bash")
    assert finished.interrupted and finished.is_error
    assert ROLLED_BACK in finished.content and "nothing of it remains" in finished.content
    assert box.files() == {}, "the cut-short command left part of its work"
    assert (box.project / "old.txt").read_text() == "stale\n"
    resumed = [e for e in box.events(session_id) if e.type == "session_resumed"]
    assert resumed[0].interrupted_calls == (finished.call_id,)


@pytest.mark.parametrize("workspace", ["overlay", "direct"])
def test_a_command_stopped_by_sigterm_is_rolled_back_at_once(
    tmp_path: Path, workspace: str
) -> None:
    box = Box(tmp_path, [call("bash", command=SLOW)])
    session_id = box.kill_when(READY, "--workspace", workspace, signum=signal.SIGTERM)
    finished = box.result_of(session_id, "bash")
    assert finished.interrupted and ROLLED_BACK in finished.content
    assert "stopped by SIGTERM" in finished.content
    events = box.events(session_id)
    assert events[-1].type == "session_finished" and events[-1].reason == "cancelled"
    kept = [e for e in events if e.type == "checkpoint_created" and "stop left" in e.label]
    assert len(kept) == 1  # the files as the stop left them, for a rewind
    if workspace == "direct":
        assert box.files() == {}, "the stopped command left part of its work"
    done = box.run("diff", session_id)
    assert done.returncode == 0 and "half.txt" not in done.stdout, done.stderr


def test_a_crashed_session_is_not_applied_before_the_rollback(tmp_path: Path) -> None:
    box = Box(tmp_path, [call("bash", command=SLOW)])
    session_id = box.kill_when(READY)
    for command in ("apply", "diff"):
        refused = box.run(command, session_id)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"kestrel resume {session_id}" in refused.stderr
    assert box.files() == {}
    box.resume(session_id)
    assert box.files() == {}


def test_a_patch_killed_between_two_files_is_finished_whole(tmp_path: Path) -> None:
    box = Box(tmp_path, [call("apply_patch", patch=PATCH)])
    session_id = box.kill_when((), hook="kill:1")
    box.resume(session_id)
    finished = box.result_of(session_id, "apply_patch")
    assert not finished.is_error and "finished as announced" in finished.content
    assert box.files() == {
        "README.md": "Adds and doubles numbers.\n",
        "docs/usage.md": "Call add(a, b).\n",
    }
    assert not (box.project / "old.txt").exists()


def test_a_patch_whose_kept_content_is_gone_is_rolled_back_whole(tmp_path: Path) -> None:
    box = Box(tmp_path, [call("apply_patch", patch=PATCH)])
    session_id = box.kill_when((), hook="kill:1")
    shutil.rmtree(tmp_path / "data" / "artifacts" / session_id / "writes")
    box.resume(session_id)
    finished = box.result_of(session_id, "apply_patch")
    assert finished.interrupted and ROLLED_BACK in finished.content
    assert box.files() == {}
    assert (box.project / "old.txt").read_text() == "stale\n"


def test_an_edit_killed_before_its_write_is_run_again(tmp_path: Path) -> None:
    box = Box(tmp_path, [call("write_file", path="notes.md", content="ok\n")])
    session_id = box.kill_when((), hook="kill:0")
    box.resume(session_id)
    finished = box.result_of(session_id, "write_file")
    assert not finished.is_error and not finished.interrupted
    assert box.files() == {"notes.md": "ok\n"}


def test_a_read_killed_inside_is_run_again(tmp_path: Path) -> None:
    box = Box(tmp_path, [call("read_file", path="README.md")])
    session_id = box.kill_when((), tool_hook="kill:read_file")
    box.resume(session_id)
    finished = box.result_of(session_id, "read_file")
    assert not finished.is_error and "Adds numbers." in finished.content
    started = [e for e in box.events(session_id) if e.type == "tool_started"]
    assert len(started) == 2


TEST_FILE = """\
import os, sys, time, unittest


class Slow(unittest.TestCase):
    def test_slow(self):
        with open("junk.txt", "w") as junk:
            junk.write("from the test run\\n")
        if not os.path.exists("attempted"):
            open("attempted", "w").close()
            print("READY", flush=True)
            time.sleep(60)
"""


def test_a_test_run_is_run_again_after_its_rollback_when_the_setting_says_so(
    tmp_path: Path,
) -> None:
    command = "python3 -m unittest -q test_slow.py"
    box = Box(tmp_path, [call("bash", command=command)], "[tools]\nrerun_interrupted = true\n")
    (box.project / "test_slow.py").write_text(TEST_FILE)
    session_id = box.kill_when(READY)
    box.resume(session_id)
    finished = box.result_of(session_id, "bash")
    assert not finished.interrupted and not finished.is_error, finished.content
    assert [e.type for e in box.events(session_id)].count("tool_started") == 2
    assert box.files()["junk.txt"] == "from the test run\n"


WRITER = """---
name: writer
description: Writes files and runs commands.
tools: write_file, bash
model: fast
---
Do the task.
"""


@pytest.mark.parametrize("workspace", ["overlay", "direct"])
def test_a_writing_subagent_killed_inside_is_rolled_back_whole(
    tmp_path: Path, workspace: str
) -> None:
    child = tmp_path / "child.json"
    child.write_text(
        json.dumps(
            [call("write_file", path="notes.md", content="draft\n"), call("bash", command="ls")]
        )
    )
    task = call("task", description="write notes", prompt="Write notes.", agent="writer")
    box = Box(tmp_path, [task], f'[models]\nfast = ["scripted:{child}"]\n')
    agents = tmp_path / "home" / ".config" / "kestrel" / "agents"
    agents.mkdir()
    (agents / "writer.md").write_text(WRITER)
    # Killed as the subagent's second call starts: its first one has written notes.md.
    session_id = box.kill_when((), "--workspace", workspace, tool_hook="kill:bash")
    if workspace == "direct":
        assert (box.project / "notes.md").exists()
    result = box.resume(session_id, "--workspace", workspace)
    assert result["reason"] == "done"
    finished = box.result_of(session_id, "task")
    assert finished.interrupted and ROLLED_BACK in finished.content
    assert box.files() == {}, "the cut-short subagent left part of its work"
    events = box.events(session_id)
    ended = [e for e in events if e.type == "subagent_finished"]
    assert [e.reason for e in ended] == ["cancelled"]
    assert [e.type for e in events].count("subagent_started") == 1  # nothing ran it again
    child_events = box.events(ended[0].child_session_id)
    assert child_events[-1].type == "session_finished"


def test_tasks_of_writing_subagents_run_alone_after_a_checkpoint(tmp_path: Path) -> None:
    child = tmp_path / "child.json"
    child.write_text(json.dumps([call("write_file", path="notes.md", content="draft\n")]))
    task = call("task", description="write notes", prompt="Write notes.", agent="writer")
    box = Box(tmp_path, [task], f'[models]\nfast = ["scripted:{child}"]\n')
    agents = tmp_path / "home" / ".config" / "kestrel" / "agents"
    agents.mkdir()
    (agents / "writer.md").write_text(WRITER)
    done = box.run(*box.args())
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout.splitlines()[0])["session_id"]
    events = box.events(session_id)
    requested = next(e for e in events if e.type == "tool_call_requested")
    assert not requested.read_only
    after = [e for e in events if e.type == "checkpoint_created" and e.call_ids]
    assert [e.call_ids for e in after] == [(requested.call.id,)]
    assert "notes.md" in str(after[0].changes)
