"""Hooks around subagents: `SubagentStop` when one finishes, the parent's tool hooks on its calls,
and none of the session hooks (a subagent's end is not the session's `Stop`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from subagent_kit import Scripts, make_parent

from kestrel.models.scripted import call, say
from kestrel.policy.gate import PermissionGate
from kestrel.policy.hooks import HookCommand, HookMatcher, HookRunner
from kestrel.protocol.events import (
    HookRan,
    PermissionDecided,
    SubagentStarted,
    ToolFinished,
)

PROMPT = "look"
# Blocks the first stop (exit 2, reason on stderr), lets the second one through.
SUBAGENT_STOP = (
    'input=$(cat); printf "%s\\n" "$input" >> subagent-stop.log; '
    'case "$input" in *\'"stop_hook_active": true\'*) exit 0;; esac; '
    "echo 'check the tests too' >&2; exit 2"
)


def _gate(root: Path) -> PermissionGate:
    config = {
        "SubagentStop": [HookMatcher(hooks=(HookCommand(command=SUBAGENT_STOP),))],
        "Stop": [HookMatcher(hooks=(HookCommand(command="echo stop >> stop.log"),))],
        "PreToolUse": [
            HookMatcher(
                matcher="grep", hooks=(HookCommand(command="echo 'no grep here' >&2; exit 2"),)
            )
        ],
    }
    return PermissionGate(
        hooks=HookRunner(config, cwd=root, session_id="s", env={"PATH": "/bin:/usr/bin"})
    )


def test_subagent_stop_hooks_run_and_may_send_it_back(tmp_path: Path) -> None:
    scripts = Scripts(
        parent=[call("task", description="look", prompt=PROMPT), say("ok")],
        children={PROMPT: [say("first report"), say("second report")]},
    )
    parent = make_parent(tmp_path, scripts, gate=_gate(tmp_path))
    asyncio.run(parent.loop.run())

    events = parent.events()
    result = next(e for e in events if isinstance(e, ToolFinished) and e.name == "task")
    assert result.content == "second report"
    ran = [e for e in events if isinstance(e, HookRan) and e.hook_event == "SubagentStop"]
    assert [(e.outcome, e.call_id) for e in ran] == [
        ("block", result.call_id),
        ("ok", result.call_id),
    ]
    sent = [json.loads(line) for line in (tmp_path / "subagent-stop.log").read_text().splitlines()]
    started = next(e for e in events if isinstance(e, SubagentStarted))
    assert [s["stop_hook_active"] for s in sent] == [False, True]
    assert sent[0]["agent"] == "explore"
    assert sent[0]["subagent_session_id"] == started.child_session_id
    assert sent[0]["hook_event_name"] == "SubagentStop"
    child = [r.event for r in parent.store.read(started.child_session_id)]
    told = [e for e in child if e.type == "user_message"]
    assert told[-1].text == "[SubagentStop hook] check the tests too"  # type: ignore[union-attr]
    # Stop ran once: for the parent, never for its subagent.
    assert (tmp_path / "stop.log").read_text() == "stop\n"


def test_the_parents_tool_hooks_guard_the_subagents_calls(tmp_path: Path) -> None:
    scripts = Scripts(
        parent=[call("task", description="look", prompt=PROMPT), say("ok")],
        children={PROMPT: [call("grep", pattern="x"), say("could not grep")]},
    )
    parent = make_parent(tmp_path, scripts, gate=_gate(tmp_path))
    asyncio.run(parent.loop.run())
    started = next(e for e in parent.events() if isinstance(e, SubagentStarted))
    child = [r.event for r in parent.store.read(started.child_session_id)]
    decided = next(e for e in child if isinstance(e, PermissionDecided))
    assert (decided.decision, decided.decided_by) == ("deny", "hook")
    assert "no grep here" in decided.reason
