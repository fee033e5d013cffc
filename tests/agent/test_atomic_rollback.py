"""Rolling a cut-short command back on resume, in process: real files, a real shadow git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_kit import make_loop

from kestrel.agent.loop import AgentLoop
from kestrel.agent.rollback import ResumePolicy, is_idempotent, roll_back_command
from kestrel.agent.session import KEPT_LABEL, ResumeEnvironment, resume, rewind
from kestrel.app import GitCheckpointer
from kestrel.models.scripted import call, say
from kestrel.protocol.events import (
    CheckpointCreated,
    ModelCompleted,
    PermissionDecided,
    ToolCallRequested,
    ToolFinished,
    ToolStarted,
)
from kestrel.protocol.messages import AssistantTurn, ToolCall, Usage
from kestrel.service.sessions import resume_policy
from kestrel.settings import Settings
from kestrel.workspace import CheckpointStore

pytestmark = pytest.mark.system


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / "old.txt").write_text("stale\n")
    return root


def checkpointer(tmp_path: Path, root: Path) -> GitCheckpointer:
    return GitCheckpointer(CheckpointStore(root, tmp_path / "shadow", session="s"))


async def crashed_in_command(tmp_path: Path, root: Path, command: str) -> AgentLoop:
    """A session that edited a.txt, then started `command` and was killed inside it: the
    command's half is on disk, its result is not in the log."""
    turns = [call("edit_file", path="a.txt", old_str="one", new_str="two"), say("stop here")]
    loop = make_loop(root, turns, checkpointer=checkpointer(tmp_path, root))
    assert (await loop.run()).reason == "done"
    the_call = ToolCall(id="cut", name="bash", arguments=json.dumps({"command": command}))
    usage = Usage(model="scripted")
    loop.emit(
        ModelCompleted(request_id="r", message=AssistantTurn(tool_calls=(the_call,)), usage=usage)
    )
    loop.emit(ToolCallRequested(call=the_call, read_only=loop.tools.kind(the_call.name) == "read"))
    loop.emit(PermissionDecided(call_id="cut", decision="allow", decided_by="mode"))
    loop.emit(ToolStarted(call_id="cut", name="bash"))
    (root / "half.txt").write_text("half\n")  # what the command did before the kill
    return loop


def environment(loop: AgentLoop, policy: ResumePolicy | None = None) -> ResumeEnvironment:
    env = loop.environment
    return ResumeEnvironment(
        root=env.root,
        artifacts_dir=env.artifacts_dir,
        checkpointer=loop.checkpointer,
        policy=policy or ResumePolicy(),
    )


async def test_a_cut_short_command_is_rolled_back_to_just_before_it(
    tmp_path: Path, work: Path
) -> None:
    loop = await crashed_in_command(tmp_path, work, "echo half > half.txt; sleep 9; rm old.txt")
    resumed = await resume(loop.state, loop.emit, loop.tools.kind, environment(loop))
    assert resumed.interrupted_calls == ("cut",)
    # The finished edit stays; the command's half is gone.
    assert files(work) == {"a.txt": "two\n", "old.txt": "stale\n"}
    result = loop.state.results["cut"]
    assert result.interrupted and "nothing of it remains" in result.content


async def test_the_files_the_rollback_replaced_are_kept_in_a_logged_checkpoint(
    tmp_path: Path, work: Path
) -> None:
    loop = await crashed_in_command(tmp_path, work, "echo half > half.txt")
    (work / "mine.txt").write_text("written by the person after the crash\n")
    await resume(loop.state, loop.emit, loop.tools.kind, environment(loop))
    assert not (work / "mine.txt").exists()
    kept = [
        r.event
        for r in loop.store.read(loop.session_id)
        if isinstance(r.event, CheckpointCreated) and r.event.label == KEPT_LABEL
    ]
    assert len(kept) == 1
    assert loop.checkpointer is not None
    await rewind(loop.state, loop.emit, loop.checkpointer, kept[0].checkpoint_id)
    assert (work / "mine.txt").read_text() == "written by the person after the crash\n"


async def test_after_the_rollback_the_log_ends_with_the_files_as_they_are(
    tmp_path: Path, work: Path
) -> None:
    loop = await crashed_in_command(tmp_path, work, "echo half > half.txt")
    await resume(loop.state, loop.emit, loop.tools.kind, environment(loop))
    assert loop.checkpointer is not None
    assert loop.state.marks.files == await loop.checkpointer.head_id()


async def test_a_checkpoint_recorded_but_never_logged_is_logged_on_resume(
    tmp_path: Path, work: Path
) -> None:
    turns = [call("bash", command="echo x > x.txt"), say("done")]
    loop = make_loop(work, turns, checkpointer=checkpointer(tmp_path, work))
    await loop.run()
    (work / "y.txt").write_text("y\n")
    assert loop.checkpointer is not None
    unlogged = await loop.checkpointer.snapshot("after a call; the process died before logging")
    assert unlogged is not None and loop.state.marks.files != unlogged.checkpoint_id
    resumed = await resume(loop.state, loop.emit, loop.tools.kind, environment(loop))
    assert resumed.interrupted_calls == ()
    assert loop.state.marks.files == unlogged.checkpoint_id


async def test_a_test_run_is_run_again_after_its_rollback_when_allowed(
    tmp_path: Path, work: Path
) -> None:
    loop = await crashed_in_command(tmp_path, work, "pytest -q")
    policy = ResumePolicy(rerun_idempotent=True)
    resumed = await resume(loop.state, loop.emit, loop.tools.kind, environment(loop, policy))
    assert resumed.interrupted_calls == ()
    assert not (work / "half.txt").exists()
    assert [c.id for c in loop.state.unfinished] == ["cut"]


def test_the_message_names_what_no_rollback_undoes() -> None:
    the_call = ToolCall(id="c", name="bash", arguments='{"command": "curl -O x"}')
    policy = ResumePolicy(outside="the network hosts pypi.org")
    settled = roll_back_command(the_call, "0123456789abcdef", policy, idempotent=False)
    assert settled.restore == "0123456789abcdef"
    assert isinstance(settled.result, ToolFinished)
    assert "It could reach the network hosts pypi.org" in settled.result.content
    assert "was not undone" in settled.result.content


def test_without_a_rollback_point_the_effects_are_unknown() -> None:
    the_call = ToolCall(id="c", name="bash", arguments='{"command": "make"}')
    settled = roll_back_command(the_call, None, ResumePolicy(), idempotent=False)
    assert settled.restore is None and settled.result is not None
    assert "effects are unknown" in settled.result.content


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q tests/test_x.py", True),
        ("python3 -m unittest -q", True),
        ("npm test", True),
        ("go test ./...", True),
        ("pytest && rm -rf build", False),
        ("pytest > out.txt", False),
        ("rm -rf build", False),
        ("python3 setup.py test", False),
    ],
)
def test_only_commands_that_just_run_tests_are_idempotent(command: str, expected: bool) -> None:
    the_call = ToolCall(id="c", name="bash", arguments=json.dumps({"command": command}))
    assert is_idempotent(the_call, "execute") is expected


def test_reads_and_verify_are_idempotent_and_edits_are_not() -> None:
    assert is_idempotent(ToolCall(id="c", name="grep", arguments="{}"), "read")
    assert is_idempotent(ToolCall(id="c", name="verify", arguments="{}"), "execute")
    assert not is_idempotent(ToolCall(id="c", name="write_file", arguments="{}"), "edit")


def test_what_commands_could_reach_comes_from_the_sandbox_settings() -> None:
    assert resume_policy(Settings()).outside == ""
    allowed = Settings(network="allowlist", network_allow=["pypi.org", "*.pythonhosted.org"])
    assert resume_policy(allowed).outside == "the network hosts pypi.org, *.pythonhosted.org"
    assert resume_policy(Settings(network="host")).outside == "the network"
    assert "unsandboxed" in resume_policy(Settings(sandbox="none")).outside
    rerun = Settings.model_validate({"tools": {"rerun_interrupted": True}})
    assert resume_policy(rerun).rerun_idempotent


async def test_a_session_killed_after_its_final_answer_finishes_from_it(work: Path) -> None:
    # The log ends with the model's final answer, as when a kill came during the verification
    # that follows it: the resumed run finishes from that answer, without asking the model
    # again (the script has nothing more to say).
    loop = make_loop(work, [])
    answer = AssistantTurn(text="All done.")
    loop.emit(ModelCompleted(request_id="r", message=answer, usage=Usage(model="scripted")))
    finished = await loop.run()
    assert finished.reason == "done" and finished.final_text == "All done."
    types = [r.event.type for r in loop.store.read(loop.session_id)]
    assert "model_request_started" not in types
