"""Settling tool calls a crash left without a result, against the real files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from loop_kit import make_loop, transcript

from kestrel.agent.session import reconcile
from kestrel.models.scripted import call, say
from kestrel.protocol.events import (
    FileChanged,
    ModelCompleted,
    PermissionDecided,
    SessionResumed,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
)
from kestrel.protocol.messages import AssistantTurn, ToolCall, Usage


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def crashed_mid_call(root: Path, tool: str, arguments: str, write: FileChanged | None):
    """A loop whose log stops after the call started (and maybe announced a write)."""
    # Turn 0 of the script stands for the turn logged before the crash; it is not replayed.
    loop = make_loop(root, [say("(the turn before the crash)"), say("after the crash")])
    the_call = ToolCall(id="c1", name=tool, arguments=arguments)
    loop.emit(
        ModelCompleted(
            request_id="r",
            message=AssistantTurn(tool_calls=(the_call,)),
            usage=Usage(model="scripted"),
        )
    )
    loop.emit(ToolCallRequested(call=the_call, read_only=loop.tools.kind(the_call.name) == "read"))
    loop.emit(PermissionDecided(call_id="c1", decision="allow", decided_by="mode"))
    loop.emit(ToolStarted(call_id="c1", name=tool))
    if write is not None:
        loop.emit(write)
    return loop


def edit_args() -> str:
    return '{"path": "f.txt", "old_str": "old", "new_str": "new"}'


def announced() -> FileChanged:
    return FileChanged(
        call_id="c1", path="f.txt", before_hash=sha("old\n"), after_hash=sha("new\n")
    )


async def test_an_edit_whose_write_landed_is_reported_done_not_redone(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("new\n")
    loop = crashed_mid_call(tmp_path, "edit_file", edit_args(), announced())
    resumed = reconcile(loop.state, loop.emit, loop.tools.kind)
    assert resumed.interrupted_calls == ("c1",)
    result = loop.state.results["c1"]
    assert not result.is_error and "written before the session was interrupted" in result.content
    assert (await loop.run()).reason == "done"
    assert (tmp_path / "f.txt").read_text() == "new\n"


async def test_an_edit_whose_write_did_not_land_runs_again(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old\n")
    loop = crashed_mid_call(tmp_path, "edit_file", edit_args(), announced())
    resumed = reconcile(loop.state, loop.emit, loop.tools.kind)
    assert resumed.interrupted_calls == ()
    finished = await loop.run()
    assert finished.reason == "done"
    assert (tmp_path / "f.txt").read_text() == "new\n"
    assert not loop.state.results["c1"].is_error


async def test_a_file_changed_by_someone_else_is_reported_interrupted(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("something else\n")
    loop = crashed_mid_call(tmp_path, "edit_file", edit_args(), announced())
    reconcile(loop.state, loop.emit, loop.tools.kind)
    result = loop.state.results["c1"]
    assert result.is_error and result.interrupted and "Read the files" in result.content
    assert (tmp_path / "f.txt").read_text() == "something else\n"


async def test_a_command_is_never_rerun(tmp_path: Path) -> None:
    loop = crashed_mid_call(tmp_path, "bash", '{"command": "echo hi >> log.txt"}', None)
    reconcile(loop.state, loop.emit, loop.tools.kind)
    await loop.run()
    assert not (tmp_path / "log.txt").exists()
    result = loop.state.results["c1"]
    assert result.interrupted and "effects are unknown" in result.content


async def test_a_read_is_simply_run_again(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello\n")
    loop = crashed_mid_call(tmp_path, "read_file", '{"path": "f.txt"}', None)
    reconcile(loop.state, loop.emit, loop.tools.kind)
    await loop.run()
    assert "hello" in loop.state.results["c1"].content
    lines = transcript(loop.store.read(loop.session_id))
    assert lines.count("call read_file") == 1 and lines.count("tool started") == 2


async def test_a_command_that_never_started_runs_after_resume(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, [call("bash", command="echo ran > out.txt"), say("ok")])
    the_call = ToolCall(id="call_0_0", name="bash", arguments='{"command": "echo ran > out.txt"}')
    loop.emit(
        ModelCompleted(
            request_id="r",
            message=AssistantTurn(tool_calls=(the_call,)),
            usage=Usage(model="scripted"),
        )
    )
    loop.emit(ToolCallRequested(call=the_call, read_only=loop.tools.kind(the_call.name) == "read"))
    loop.emit(PermissionDecided(call_id="call_0_0", decision="allow", decided_by="mode"))
    reconcile(loop.state, loop.emit, loop.tools.kind)
    assert (await loop.run()).reason == "done"
    assert (tmp_path / "out.txt").read_text() == "ran\n"
    events = [r.event for r in loop.store.read(loop.session_id)]
    assert sum(isinstance(e, SessionResumed) for e in events) == 1
    assert sum(isinstance(e, ToolFinished) for e in events) == 1


async def test_a_write_killed_before_its_rename_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old\n")
    leftover = tmp_path / ".f.txt.0123456789ab.tmp"
    leftover.write_text("ne")  # The half-written new content.
    unrelated = tmp_path / ".f.txt.notours.tmp"
    unrelated.write_text("keep")
    loop = crashed_mid_call(tmp_path, "edit_file", edit_args(), announced())
    reconcile(loop.state, loop.emit, loop.tools.kind)
    assert not leftover.exists() and unrelated.exists()
    await loop.run()
    assert (tmp_path / "f.txt").read_text() == "new\n"


async def test_a_patch_caught_halfway_is_finished_from_its_kept_content(tmp_path: Path) -> None:
    from kestrel.tools.paths import stage_write, staged_write

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("new a\n")  # landed
    (root / "c.txt").write_text("doomed\n")  # its deletion did not
    loop = crashed_mid_call(root, "apply_patch", '{"patch": "..."}', None)
    artifacts = loop.environment.artifacts_dir
    for path, before, after in [
        ("a.txt", "old a\n", "new a\n"),
        ("b.txt", None, "brand new\n"),
        ("c.txt", "doomed\n", None),
    ]:
        if after is not None:
            stage_write(staged_write(artifacts, sha(after)), after.encode())
        loop.emit(
            FileChanged(
                call_id="c1",
                path=path,
                before_hash=None if before is None else sha(before),
                after_hash=None if after is None else sha(after),
            )
        )
    resumed = reconcile(loop.state, loop.emit, loop.tools.kind, root, artifacts)
    assert resumed.interrupted_calls == ("c1",)
    result = loop.state.results["c1"]
    assert not result.is_error and "finished as announced" in result.content
    assert (root / "b.txt").read_text() == "brand new\n"
    assert not (root / "c.txt").exists()
    assert (root / "a.txt").read_text() == "new a\n"


async def test_a_halfway_patch_without_kept_content_is_reported_interrupted(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("new a\n")
    loop = crashed_mid_call(root, "apply_patch", '{"patch": "..."}', None)
    for path, before, after in [("a.txt", "old a\n", "new a\n"), ("b.txt", None, "b\n")]:
        loop.emit(
            FileChanged(
                call_id="c1",
                path=path,
                before_hash=sha(before) if before else None,
                after_hash=sha(after),
            )
        )
    reconcile(loop.state, loop.emit, loop.tools.kind, root, loop.environment.artifacts_dir)
    assert loop.state.results["c1"].is_error
    assert not (root / "b.txt").exists()
