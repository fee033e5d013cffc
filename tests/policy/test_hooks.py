"""Hook commands under Claude Code's contract, run as real scripts."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from kestrel.policy.hooks import (
    HOOK_EVENTS,
    HookCommand,
    HookEvent,
    HookMatcher,
    HookRunner,
    HookVerdict,
)

BASH = ("bash", "Bash")


def script(tmp_path: Path, name: str, body: str) -> str:
    """Write an executable script into tmp_path and return its path as a command."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip())
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def emit(tmp_path: Path, name: str, answer: dict[str, Any]) -> str:
    """A hook that reads its input and prints `answer` as JSON."""
    return script(tmp_path, name, f"#!/bin/sh\ncat >/dev/null\necho '{json.dumps(answer)}'\n")


def pre(decision: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    """A PreToolUse answer in the hookSpecificOutput form."""
    specific = {"hookEventName": "PreToolUse", "permissionDecision": decision, **extra}
    if reason:
        specific["permissionDecisionReason"] = reason
    return {"hookSpecificOutput": specific}


def runner(tmp_path: Path, event: HookEvent, *hooks: HookCommand, matcher: str = "") -> HookRunner:
    return HookRunner(
        {event: [HookMatcher(matcher=matcher, hooks=hooks)]}, cwd=tmp_path, session_id="s-1"
    )


async def run_pre(tmp_path: Path, *hooks: HookCommand) -> HookVerdict:
    payload = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    return await runner(tmp_path, "PreToolUse", *hooks).run("PreToolUse", payload, tool_names=BASH)


@pytest.mark.parametrize("decision", ["allow", "deny", "ask"])
async def test_json_permission_decision(tmp_path: Path, decision: str) -> None:
    hook = HookCommand(command=emit(tmp_path, "h.sh", pre(decision, f"because {decision}")))
    verdict = await run_pre(tmp_path, hook)
    assert (verdict.decision, verdict.reason) == (decision, f"because {decision}")
    assert [r.outcome for r in verdict.results] == ["ok"]
    assert verdict.results[0].output == pre(decision, f"because {decision}")


@pytest.mark.parametrize(("legacy", "expected"), [("approve", "allow"), ("block", "deny")])
async def test_legacy_top_level_decision(tmp_path: Path, legacy: str, expected: str) -> None:
    hook = HookCommand(command=emit(tmp_path, "h.sh", {"decision": legacy, "reason": "old style"}))
    verdict = await run_pre(tmp_path, hook)
    assert (verdict.decision, verdict.reason) == (expected, "old style")


async def test_exit_2_denies_with_stderr_as_reason(tmp_path: Path) -> None:
    body = "#!/bin/sh\necho 'rm -rf is not allowed' >&2\nexit 2\n"
    verdict = await run_pre(tmp_path, HookCommand(command=script(tmp_path, "h.sh", body)))
    assert (verdict.decision, verdict.reason) == ("deny", "rm -rf is not allowed")
    result = verdict.results[0]
    assert (result.outcome, result.exit_code, result.output) == ("block", 2, None)


async def test_no_answer_means_no_decision(tmp_path: Path) -> None:
    verdict = await run_pre(tmp_path, HookCommand(command="true"))
    assert (verdict.decision, verdict.reason, verdict.block) == (None, "", False)
    assert verdict.results[0].outcome == "ok"


async def test_updated_input_merges_allowing_hooks_in_config_order(tmp_path: Path) -> None:
    first = emit(tmp_path, "a.sh", pre("allow", updatedInput={"command": "ls -a", "x": 1}))
    second = emit(tmp_path, "b.sh", pre("allow", updatedInput={"command": "ls -la"}))
    verdict = await run_pre(tmp_path, HookCommand(command=first), HookCommand(command=second))
    assert verdict.decision == "allow"
    assert verdict.updated_input == {"command": "ls -la", "x": 1}


async def test_updated_input_is_dropped_when_denied(tmp_path: Path) -> None:
    allow = emit(tmp_path, "a.sh", pre("allow", updatedInput={"command": "ls -a"}))
    deny = emit(tmp_path, "d.sh", pre("deny", "no"))
    verdict = await run_pre(tmp_path, HookCommand(command=allow), HookCommand(command=deny))
    assert (verdict.decision, verdict.updated_input) == ("deny", None)


async def test_deny_beats_ask_beats_allow(tmp_path: Path) -> None:
    allow = HookCommand(command=emit(tmp_path, "allow.sh", pre("allow", "fine")))
    ask = HookCommand(command=emit(tmp_path, "ask.sh", pre("ask", "unsure")))
    deny1 = HookCommand(command=emit(tmp_path, "deny1.sh", pre("deny", "first no")))
    deny2 = HookCommand(command=emit(tmp_path, "deny2.sh", pre("deny", "second no")))
    verdict = await run_pre(tmp_path, allow, deny1, ask, deny2)
    assert (verdict.decision, verdict.reason) == ("deny", "first no\nsecond no")
    assert [r.command for r in verdict.results] == [h.command for h in (allow, deny1, ask, deny2)]
    verdict = await run_pre(tmp_path, allow, ask)
    assert (verdict.decision, verdict.reason) == ("ask", "unsure")


PYTHON_CRASH = "#!/usr/bin/env python3\nimport sys\nsys.stdin.read()\nraise RuntimeError('boom')\n"


async def test_python_crash_denies_unless_allowed_to_fail_open(tmp_path: Path) -> None:
    command = script(tmp_path, "crash.py", PYTHON_CRASH)
    verdict = await run_pre(tmp_path, HookCommand(command=command))
    result = verdict.results[0]
    assert (result.outcome, result.exit_code, result.error) == ("error", 1, "exited 1")
    assert "RuntimeError: boom" in result.stderr
    assert verdict.decision == "deny"
    assert "crash.py" in verdict.reason and "exited 1" in verdict.reason

    lenient = HookCommand(command=command, on_error="continue")
    allow = HookCommand(command=emit(tmp_path, "allow.sh", pre("allow")))
    verdict = await run_pre(tmp_path, lenient, allow)
    assert verdict.decision == "allow"
    assert [r.outcome for r in verdict.results] == ["error", "ok"]


async def test_missing_command_is_a_crash(tmp_path: Path) -> None:
    verdict = await run_pre(tmp_path, HookCommand(command="./no-such-hook.sh"))
    result = verdict.results[0]
    assert (result.outcome, result.exit_code) == ("crash", 127)
    assert verdict.decision == "deny"
    lenient = HookCommand(command="./no-such-hook.sh", on_error="continue")
    assert (await run_pre(tmp_path, lenient)).decision is None


async def test_killed_by_signal_is_a_crash(tmp_path: Path) -> None:
    verdict = await run_pre(tmp_path, HookCommand(command="kill -9 $$"))
    result = verdict.results[0]
    assert (result.outcome, result.exit_code, result.error) == ("crash", 137, "killed by SIGKILL")
    assert verdict.decision == "deny"


async def test_command_that_cannot_start_is_a_crash(tmp_path: Path) -> None:
    hooks: dict[HookEvent, list[HookMatcher]] = {
        "PreToolUse": [HookMatcher(hooks=(HookCommand(command="true"),))]
    }
    gone = HookRunner(hooks, cwd=tmp_path / "missing", session_id="s")
    verdict = await gone.run("PreToolUse", {}, tool_names=BASH)
    result = verdict.results[0]
    assert (result.outcome, result.exit_code) == ("crash", None)
    assert result.error.startswith("could not start")
    assert verdict.decision == "deny"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize(
    "body",
    [
        "#!/bin/sh\nsleep 30\n",
        # The child holds stdout open after its parent is killed.
        "#!/bin/sh\nsleep 30 &\necho $! > child.pid\nsleep 30\n",
    ],
    ids=["sleep", "background-child"],
)
async def test_timeout_kills_the_group_and_denies(tmp_path: Path, body: str) -> None:
    hook = HookCommand(command=script(tmp_path, "slow.sh", body), timeout_s=0.5)
    started = time.monotonic()
    verdict = await run_pre(tmp_path, hook)
    assert time.monotonic() - started < 5
    result = verdict.results[0]
    assert (result.outcome, result.exit_code, result.error) == (
        "timeout",
        None,
        "timed out after 0.5 s",
    )
    assert verdict.decision == "deny" and "timed out" in verdict.reason
    if (pid_file := tmp_path / "child.pid").exists():
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not _alive(pid)


async def test_cancelling_a_run_kills_its_hooks(tmp_path: Path) -> None:
    hook = HookCommand(command="sleep 30 & echo $! > child.pid; sleep 30", timeout_s=60)
    task = asyncio.create_task(run_pre(tmp_path, hook))
    pid_file = tmp_path / "child.pid"
    while not pid_file.exists() or not pid_file.read_text().strip():
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(pid)


async def test_deny_without_a_reason_names_the_hook(tmp_path: Path) -> None:
    command = emit(tmp_path, "h.sh", pre("deny"))
    verdict = await run_pre(tmp_path, HookCommand(command=command))
    assert (verdict.decision, verdict.reason) == ("deny", f"blocked by hook: {command}")


async def test_finished_hook_whose_child_holds_stdout_returns_promptly(tmp_path: Path) -> None:
    body = f"#!/bin/sh\nsleep 30 &\necho '{json.dumps(pre('allow', 'ok'))}'\n"
    hook = HookCommand(command=script(tmp_path, "bg.sh", body), timeout_s=20)
    started = time.monotonic()
    verdict = await run_pre(tmp_path, hook)
    assert time.monotonic() - started < 5
    assert (verdict.decision, verdict.reason) == ("allow", "ok")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("{not json", "stdout is not valid JSON"),
        ('{"hookSpecificOutput": {"permissionDecision": "maybe"}}', "permissionDecision must be"),
        ('{"continue": "no"}', "continue must be a bool"),
    ],
)
async def test_bad_json_answer_is_an_error_that_denies(
    tmp_path: Path, stdout: str, message: str
) -> None:
    hook = HookCommand(command=f"echo '{stdout}'")
    verdict = await run_pre(tmp_path, hook)
    result = verdict.results[0]
    assert (result.outcome, result.exit_code, result.output) == ("error", 0, None)
    assert message in result.error
    assert verdict.decision == "deny" and message in verdict.reason


async def test_post_tool_use_context_and_block(tmp_path: Path) -> None:
    context = {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint ok"}
    }
    blocker = {"decision": "block", "reason": "tests fail"}
    hooks = (
        HookCommand(command=emit(tmp_path, "ctx.sh", context)),
        HookCommand(command=emit(tmp_path, "block.sh", blocker)),
        HookCommand(command="exit 1"),  # an error after the fact blocks nothing
    )
    payload = {"tool_name": "Bash", "tool_input": {}, "tool_response": {"exit_code": 0}}
    verdict = await runner(tmp_path, "PostToolUse", *hooks).run(
        "PostToolUse", payload, tool_names=BASH
    )
    assert (verdict.block, verdict.reason) == (True, "tests fail")
    assert verdict.additional_context == "lint ok"
    assert verdict.decision is None
    assert [r.outcome for r in verdict.results] == ["ok", "ok", "error"]


async def test_post_tool_use_errors_do_not_block(tmp_path: Path) -> None:
    hook = HookCommand(command="exit 1")
    verdict = await runner(tmp_path, "PostToolUse", hook).run("PostToolUse", {}, tool_names=BASH)
    assert (verdict.block, verdict.reason, verdict.decision) == (False, "", None)


async def test_user_prompt_submit_plain_stdout_is_context(tmp_path: Path) -> None:
    json_context = {"hookSpecificOutput": {"additionalContext": "branch: main"}}
    hooks = (
        HookCommand(command="echo 'today is Monday'"),
        HookCommand(command=emit(tmp_path, "ctx.sh", json_context)),
    )
    verdict = await runner(tmp_path, "UserPromptSubmit", *hooks).run(
        "UserPromptSubmit", {"prompt": "hi"}
    )
    assert verdict.additional_context == "today is Monday\nbranch: main"
    assert not verdict.block


async def test_user_prompt_submit_exit_2_blocks(tmp_path: Path) -> None:
    hook = HookCommand(command="echo 'prompt mentions a secret' >&2; exit 2")
    verdict = await runner(tmp_path, "UserPromptSubmit", hook).run("UserPromptSubmit", {})
    assert (verdict.block, verdict.reason) == (True, "prompt mentions a secret")


async def test_plain_stdout_is_not_context_for_tool_events(tmp_path: Path) -> None:
    hook = HookCommand(command="echo chatter")
    verdict = await run_pre(tmp_path, hook)
    assert verdict.additional_context == ""
    assert verdict.results[0].stdout == "chatter\n"


async def test_session_start_stdout_is_context(tmp_path: Path) -> None:
    hook = HookCommand(command="echo 'read NOTES.md first'")
    verdict = await runner(tmp_path, "SessionStart", hook).run(
        "SessionStart", {"source": "startup"}
    )
    assert verdict.additional_context == "read NOTES.md first"


@pytest.mark.parametrize("event", ["Stop", "SubagentStop"])
async def test_stop_block_keeps_the_agent_going(tmp_path: Path, event: HookEvent) -> None:
    hook = HookCommand(command=emit(tmp_path, "h.sh", {"decision": "block", "reason": "run tests"}))
    verdict = await runner(tmp_path, event, hook).run(event, {"stop_hook_active": False})
    assert (verdict.block, verdict.reason) == (True, "run tests")


async def test_session_end_only_reports(tmp_path: Path) -> None:
    hook = HookCommand(command="echo bye; exit 2")
    verdict = await runner(tmp_path, "SessionEnd", hook).run("SessionEnd", {"reason": "exit"})
    assert (verdict.block, verdict.decision, verdict.additional_context) == (False, None, "")
    assert verdict.results[0].outcome == "block"


async def test_continue_false_stops_the_session(tmp_path: Path) -> None:
    answer = {"continue": False, "stopReason": "budget spent", "systemMessage": "bye"}
    hook = HookCommand(command=emit(tmp_path, "h.sh", answer))
    verdict = await runner(tmp_path, "PostToolUse", hook).run("PostToolUse", {}, tool_names=BASH)
    assert (verdict.stop_session, verdict.stop_reason) == (True, "budget spent")
    assert verdict.system_message == "bye"


async def test_stdin_payload_and_environment(tmp_path: Path) -> None:
    body = """\
        #!/usr/bin/env python3
        import json, os, sys
        seen = json.load(sys.stdin)
        names = ("CLAUDE_PROJECT_DIR", "KESTREL_PROJECT_DIR", "MINE")
        seen["env"] = {name: os.environ.get(name) for name in names}
        seen["pwd"] = os.getcwd()
        open("seen.json", "w").write(json.dumps(seen))
        """
    command = HookCommand(command=script(tmp_path, "s.py", body))
    hooks: dict[HookEvent, list[HookMatcher]] = {"PreToolUse": [HookMatcher(hooks=(command,))]}
    env = {"PATH": os.environ["PATH"], "MINE": "yes"}
    hook_runner = HookRunner(
        hooks, cwd=tmp_path, session_id="s-42", env=env, transcript_path="/t/log.jsonl"
    )
    payload = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    await hook_runner.run("PreToolUse", payload, tool_names=BASH)
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "t1",
        "session_id": "s-42",
        "cwd": str(tmp_path),
        "hook_event_name": "PreToolUse",
        "transcript_path": "/t/log.jsonl",
        "env": {
            "CLAUDE_PROJECT_DIR": str(tmp_path),
            "KESTREL_PROJECT_DIR": str(tmp_path),
            "MINE": "yes",
        },
        "pwd": str(tmp_path),
    }


async def test_hooks_run_concurrently(tmp_path: Path) -> None:
    # The first waits for a file only the second writes: run one after the other, it times out.
    waiter = HookCommand(command="while [ ! -f go ]; do sleep 0.05; done", timeout_s=5)
    starter = HookCommand(command="touch go")
    verdict = await run_pre(tmp_path, waiter, starter)
    assert [r.outcome for r in verdict.results] == ["ok", "ok"]


async def test_runaway_output_is_capped(tmp_path: Path) -> None:
    hook = HookCommand(command="head -c 5000000 /dev/zero | tr '\\0' x")
    verdict = await runner(tmp_path, "SessionEnd", hook).run("SessionEnd", {})
    result = verdict.results[0]
    assert result.outcome == "ok"
    assert 1000 < len(result.stdout) < 20_000
    assert "characters omitted" in result.stdout


def _matcher_runner(tmp_path: Path, matcher: str) -> HookRunner:
    return runner(tmp_path, "PreToolUse", HookCommand(command="true"), matcher=matcher)


@pytest.mark.parametrize(
    ("matcher", "names", "matches"),
    [
        ("Bash", ("Bash",), True),
        ("Bash", ("BashOutput",), False),  # the whole name must match
        ("Bash", ("bash", "Bash"), True),  # any alias will do
        ("bash", ("Edit",), False),
        ("Edit|Write", ("Write",), True),
        ("Edit|Write", ("MultiEdit",), False),
        ("mcp__.*", ("mcp__github__search",), True),
        ("*", ("anything",), True),
        ("", ("anything",), True),
        ("Bash", (), False),
    ],
)
def test_matcher(tmp_path: Path, matcher: str, names: tuple[str, ...], matches: bool) -> None:
    assert bool(_matcher_runner(tmp_path, matcher).matching("PreToolUse", names)) is matches


def test_matcher_is_ignored_for_events_without_tools(tmp_path: Path) -> None:
    hook = HookCommand(command="true")
    session = runner(tmp_path, "SessionStart", hook, matcher="startup")
    assert session.matching("SessionStart") == (hook,)
    assert session.matching("Stop") == ()


def test_identical_commands_run_once(tmp_path: Path) -> None:
    hook = HookCommand(command="true")
    config: dict[HookEvent, list[HookMatcher]] = {
        "PreToolUse": [HookMatcher(matcher="Bash", hooks=(hook,)), HookMatcher(hooks=(hook,))]
    }
    assert HookRunner(config, cwd=tmp_path, session_id="s").matching("PreToolUse", BASH) == (hook,)


def test_invalid_configuration_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"invalid PreToolUse hook matcher 'Bash\('"):
        _matcher_runner(tmp_path, "Bash(")
    with pytest.raises(ValueError, match="unknown hook event 'BeforeTool'"):
        HookRunner({"BeforeTool": []}, cwd=tmp_path, session_id="s")  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="timeout must be positive"):
        HookCommand(command="true", timeout_s=0)
    assert "PreToolUse" in HOOK_EVENTS and len(HOOK_EVENTS) == 8
