"""User-configured hook commands, run at points of a session under Claude Code's hook contract.

A hook reads one JSON object on stdin and answers with its exit code (0 fine, 2 block, anything
else a non-blocking error) and, optionally, a JSON object on stdout. Existing Claude Code hook
scripts therefore work unchanged; `CLAUDE_PROJECT_DIR` is set for them as Claude Code sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import signal
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

from kestrel.protocol.oserrors import os_error_text

HookEvent = Literal[
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "SubagentStop",
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
Outcome = Literal["ok", "block", "error", "timeout", "crash"]
Decision = Literal["allow", "deny", "ask"]

_TOOL_EVENTS: frozenset[HookEvent] = frozenset({"PreToolUse", "PostToolUse"})
_BLOCKING_EVENTS: frozenset[HookEvent] = frozenset(
    {"PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"}
)
# Events whose hooks may inject context by printing plain text on stdout.
_PLAIN_CONTEXT_EVENTS: frozenset[HookEvent] = frozenset({"UserPromptSubmit", "SessionStart"})
_KEEP_BYTES = 1 << 20  # per stream: enough for any sane JSON answer, bounded for a runaway hook
_SHOWN_CHARS = 10_000  # what a HookResult keeps of each stream (Claude Code's cap on context)
_DRAIN_GRACE_S = 0.5  # how long a pipe may stay open after its command has ended
_DECISIONS: tuple[Decision, ...] = ("allow", "deny", "ask")
_DECISIONS_BY_STRENGTH: tuple[Decision, ...] = ("deny", "ask", "allow")


@dataclass(frozen=True, slots=True, kw_only=True)
class HookCommand:
    """One shell command to run for an event, and what its failure means to PreToolUse."""

    command: str
    timeout_s: float = 60.0
    on_error: Literal["deny", "continue"] = "deny"

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise ValueError("a hook command must not be empty")
        if self.timeout_s <= 0:
            raise ValueError(
                f"hook {self.command!r}: timeout must be positive, not {self.timeout_s}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class HookMatcher:
    """Commands that run when a tool name fullmatches `matcher` ("" or "*": every tool)."""

    matcher: str = ""
    hooks: tuple[HookCommand, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookResult:
    """What one command did: how it ended, what it printed, and its parsed JSON answer."""

    event: HookEvent
    command: str
    exit_code: int | None
    duration_ms: float
    outcome: Outcome
    stderr: str
    stdout: str
    output: dict[str, Any] | None
    error: str = ""  # why the outcome is "error", "timeout" or "crash"; empty otherwise


@dataclass(frozen=True, slots=True, kw_only=True)
class HookVerdict:
    """The answers of every command run for one event, combined."""

    decision: Decision | None
    reason: str
    block: bool
    updated_input: dict[str, Any] | None
    additional_context: str
    stop_session: bool
    stop_reason: str
    system_message: str
    results: tuple[HookResult, ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    pattern: re.Pattern[str] | None  # None: every tool
    matcher: HookMatcher


class HookRunner:
    """Runs the configured hooks of an event concurrently and combines their answers."""

    def __init__(
        self,
        config: Mapping[HookEvent, Sequence[HookMatcher]],
        *,
        cwd: Path,
        session_id: str,
        env: Mapping[str, str] | None = None,
        transcript_path: str | None = None,
    ) -> None:
        self._entries: dict[HookEvent, list[_Entry]] = {}
        for event, matchers in config.items():
            if event not in HOOK_EVENTS:
                raise ValueError(f"unknown hook event {event!r}; known: {', '.join(HOOK_EVENTS)}")
            self._entries[event] = [_Entry(_compile(event, m.matcher), m) for m in matchers]
        self._cwd = cwd
        self._session_id = session_id
        self._transcript_path = transcript_path
        base = os.environ if env is None else env
        self._env = {**base, "KESTREL_PROJECT_DIR": str(cwd), "CLAUDE_PROJECT_DIR": str(cwd)}

    def matching(
        self, event: HookEvent, tool_names: Collection[str] = ()
    ) -> tuple[HookCommand, ...]:
        """The commands to run for `event`, in config order, each identical command once."""
        found: list[HookCommand] = []
        for entry in self._entries.get(event, ()):
            # Patterns exist only for tool events; the others run every configured command.
            if entry.pattern is not None and not any(map(entry.pattern.fullmatch, tool_names)):
                continue
            found.extend(hook for hook in entry.matcher.hooks if hook not in found)
        return tuple(found)

    def restricted_to(self, events: Collection[HookEvent]) -> HookRunner:
        """The same runner with only the hooks of `events` (e.g. a subagent's tool hooks)."""
        narrowed = copy.copy(self)
        narrowed._entries = {e: list(found) for e, found in self._entries.items() if e in events}
        return narrowed

    async def run(
        self, event: HookEvent, payload: Mapping[str, Any], *, tool_names: Collection[str] = ()
    ) -> HookVerdict:
        """Run every matching command of `event` with `payload` on stdin; combine the answers."""
        hooks = self.matching(event, tool_names)
        stdin = dict(payload)
        stdin.update(session_id=self._session_id, cwd=str(self._cwd), hook_event_name=event)
        if self._transcript_path is not None:
            stdin["transcript_path"] = self._transcript_path
        data = json.dumps(stdin).encode()
        results = await asyncio.gather(
            *(_run_command(hook, event, data, self._cwd, self._env) for hook in hooks)
        )
        return _combine(event, list(zip(hooks, results, strict=True)))


def _compile(event: HookEvent, matcher: str) -> re.Pattern[str] | None:
    if event not in _TOOL_EVENTS or matcher in ("", "*"):
        return None
    try:
        return re.compile(matcher)
    except re.error as exc:
        raise ValueError(f"invalid {event} hook matcher {matcher!r}: {exc}") from exc


# --- running one command -------------------------------------------------------------------


@dataclass(slots=True)
class _Capture:
    """The head of one output stream, kept up to a bound while the rest is read and dropped."""

    kept: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, data: bytes) -> None:
        room = _KEEP_BYTES - len(self.kept)
        self.kept += data[:room]
        self.dropped += max(0, len(data) - room)

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


async def _run_command(
    hook: HookCommand, event: HookEvent, stdin: bytes, cwd: Path, env: Mapping[str, str]
) -> HookResult:
    """Run one command in its own session; on timeout kill its whole process group."""
    started = time.monotonic()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            hook.command,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=out_write,
            stderr=err_write,
            start_new_session=True,
        )
    except BaseException as exc:
        os.close(out_read)
        os.close(err_read)
        if not isinstance(exc, OSError):
            raise
        return _make_result(
            hook, event, started, None, "", "", "crash", f"could not start: {os_error_text(exc)}"
        )
    finally:
        # The child holds its own copies; ours would keep the pipes open forever.
        os.close(out_write)
        os.close(err_write)
    # Our own pipes rather than asyncio's, so they can be closed under a child that never exits.
    pipes = [os.fdopen(out_read, "rb", 0), os.fdopen(err_read, "rb", 0)]
    out, err = _Capture(), _Capture()
    readers = [asyncio.create_task(_read(pipes[0], out)), asyncio.create_task(_read(pipes[1], err))]
    feeder = asyncio.create_task(_feed(proc, stdin))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), hook.timeout_s)
        except TimeoutError:
            timed_out = True
            await _kill_group(proc)
        # A background child may hold a pipe open after the command ends: give it a moment,
        # then kill the group and stop listening.
        _, pending = await asyncio.wait(readers, timeout=_DRAIN_GRACE_S)
        if pending:
            await _kill_group(proc)
            await asyncio.wait(pending, timeout=_DRAIN_GRACE_S)
    except BaseException:
        await _kill_group(proc)
        raise
    finally:
        for task in (*readers, feeder):
            task.cancel()
        await asyncio.gather(*readers, feeder, return_exceptions=True)
        for pipe in pipes:
            pipe.close()
    if timed_out:
        error = f"timed out after {hook.timeout_s:g} s"
        return _make_result(hook, event, started, None, out.text(), err.text(), "timeout", error)
    return _classify(hook, event, started, proc.returncode, out, err)


async def _read(pipe: BinaryIO, sink: _Capture) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while data := await reader.read(65536):
            sink.add(data)
    finally:
        transport.close()


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    if proc.stdin is None:
        return
    try:
        # A hook that ignores its input may exit before reading it: that is no error.
        with contextlib.suppress(ConnectionError):
            proc.stdin.write(data)
            await proc.stdin.drain()
    finally:
        proc.stdin.close()


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        if proc.returncode is None:
            proc.kill()
    await proc.wait()


def _classify(
    hook: HookCommand,
    event: HookEvent,
    started: float,
    returncode: int | None,
    out: _Capture,
    err: _Capture,
) -> HookResult:
    """Turn an exit status and the captured streams into a result."""
    stdout, stderr = out.text(), err.text()
    code = 0 if returncode is None else returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        error = f"killed by {name}"
        return _make_result(hook, event, started, 128 - code, stdout, stderr, "crash", error)
    if code in (126, 127):
        error = f"exited {code}: command not found or not executable"
        return _make_result(hook, event, started, code, stdout, stderr, "crash", error)
    if code == 2:
        return _make_result(hook, event, started, code, stdout, stderr, "block", "")
    if code != 0:
        error = f"exited {code}"
        return _make_result(hook, event, started, code, stdout, stderr, "error", error)
    if not stdout.lstrip().startswith("{"):
        return _make_result(hook, event, started, 0, stdout, stderr, "ok", "")
    if out.dropped:
        error = f"JSON output longer than {_KEEP_BYTES} bytes"
        return _make_result(hook, event, started, 0, stdout, stderr, "error", error)
    try:
        output = json.loads(stdout)
    except json.JSONDecodeError as exc:
        error = f"stdout is not valid JSON: {exc}"
        return _make_result(hook, event, started, 0, stdout, stderr, "error", error)
    if problem := _check_output(output):
        error = f"invalid hook output: {problem}"
        return _make_result(hook, event, started, 0, stdout, stderr, "error", error)
    return _make_result(hook, event, started, 0, stdout, stderr, "ok", "", output)


def _check_output(output: dict[str, Any]) -> str:
    """What is wrong with the fields of a JSON answer that we act on; empty when nothing is."""
    types: dict[str, type] = {
        "continue": bool,
        "stopReason": str,
        "systemMessage": str,
        "reason": str,
        "hookSpecificOutput": dict,
    }
    for key, kind in types.items():
        if output.get(key) is not None and not isinstance(output[key], kind):
            return f"{key} must be a {kind.__name__}"
    if output.get("decision") not in (None, "approve", "block"):
        return f'decision must be "approve" or "block", not {output["decision"]!r}'
    specific = output.get("hookSpecificOutput") or {}
    inner: dict[str, type] = {
        "permissionDecisionReason": str,
        "additionalContext": str,
        "updatedInput": dict,
    }
    for key, kind in inner.items():
        if specific.get(key) is not None and not isinstance(specific[key], kind):
            return f"hookSpecificOutput.{key} must be a {kind.__name__}"
    if specific.get("permissionDecision") not in (None, *_DECISIONS):
        return (
            f"permissionDecision must be allow, deny or ask, not {specific['permissionDecision']!r}"
        )
    return ""


def _make_result(
    hook: HookCommand,
    event: HookEvent,
    started: float,
    exit_code: int | None,
    stdout: str,
    stderr: str,
    outcome: Outcome,
    error: str,
    output: dict[str, Any] | None = None,
) -> HookResult:
    return HookResult(
        event=event,
        command=hook.command,
        exit_code=exit_code,
        duration_ms=(time.monotonic() - started) * 1000,
        outcome=outcome,
        stderr=_trim(stderr),
        stdout=_trim(stdout),
        output=output,
        error=error,
    )


def _trim(text: str) -> str:
    if len(text) <= _SHOWN_CHARS:
        return text
    half = _SHOWN_CHARS // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters omitted …]\n{text[-half:]}"


# --- combining answers ---------------------------------------------------------------------


def _combine(event: HookEvent, runs: list[tuple[HookCommand, HookResult]]) -> HookVerdict:
    """Fold the results of one event's commands into a verdict."""
    decision: Decision | None = None
    reason = ""
    updated: dict[str, Any] | None = None
    if event == "PreToolUse":
        decision, reason, updated = _permission(runs)
    block_reasons = [_block_reason(r) for _, r in runs if event in _BLOCKING_EVENTS]
    blocks = [text for text in block_reasons if text is not None]
    contexts: list[str] = []
    stops: list[str] = []
    messages: list[str] = []
    stop_session = False
    for _, result in runs:
        out = result.output or {}
        specific = out.get("hookSpecificOutput") or {}
        if specific.get("additionalContext"):
            contexts.append(specific["additionalContext"])
        elif _plain_context(event, result):
            contexts.append(result.stdout.strip())
        if out.get("continue") is False:
            stop_session = True
            stops.append(out.get("stopReason") or f"stopped by hook: {result.command}")
        if out.get("systemMessage"):
            messages.append(out["systemMessage"])
    return HookVerdict(
        decision=decision,
        reason=reason if event == "PreToolUse" else "\n".join(blocks),
        block=bool(blocks),
        updated_input=updated,
        additional_context="\n".join(contexts),
        stop_session=stop_session,
        stop_reason="\n".join(stops),
        system_message="\n".join(messages),
        results=tuple(result for _, result in runs),
    )


def _plain_context(event: HookEvent, result: HookResult) -> bool:
    """Whether the hook's plain stdout is context for the model, as for these events it is."""
    plain = result.outcome == "ok" and result.output is None and bool(result.stdout.strip())
    return plain and event in _PLAIN_CONTEXT_EVENTS


def _permission(
    runs: list[tuple[HookCommand, HookResult]],
) -> tuple[Decision | None, str, dict[str, Any] | None]:
    """PreToolUse: deny beats ask beats allow; a failed hook denies unless it may fail open."""
    votes: list[tuple[Decision, str, dict[str, Any] | None]] = []
    for hook, result in runs:
        if result.outcome in ("error", "timeout", "crash"):
            if hook.on_error == "deny":
                why = f"hook {result.command!r} failed ({result.error}); denied to be safe"
                votes.append(("deny", why, None))
        elif result.outcome == "block":
            votes.append(("deny", result.stderr.strip() or _default_reason(result), None))
        elif (vote := _json_vote(result)) is not None:
            votes.append(vote)
    for decision in _DECISIONS_BY_STRENGTH:
        chosen = [vote for vote in votes if vote[0] == decision]
        if not chosen:
            continue
        reason = "\n".join(why for _, why, _ in chosen if why)
        updated: dict[str, Any] | None = None
        if decision != "deny":
            # Rewrites of the input by hooks that let the call go on, in config order.
            for _, _, rewrite in votes:
                if rewrite is not None:
                    updated = {**(updated or {}), **rewrite}
        return decision, reason, updated
    return None, "", None


def _json_vote(result: HookResult) -> tuple[Decision, str, dict[str, Any] | None] | None:
    out = result.output or {}
    specific = out.get("hookSpecificOutput") or {}
    decision = specific.get("permissionDecision")
    if decision in _DECISIONS:
        reason = specific.get("permissionDecisionReason") or ""
        if decision == "deny":
            return decision, reason or _default_reason(result), None
        return decision, reason, specific.get("updatedInput")
    # The older top-level form, still written by many hook scripts.
    if out.get("decision") == "block":
        return "deny", out.get("reason") or _default_reason(result), None
    if out.get("decision") == "approve":
        return "allow", out.get("reason") or "", specific.get("updatedInput")
    return None


def _block_reason(result: HookResult) -> str | None:
    if result.outcome == "block":
        return result.stderr.strip() or _default_reason(result)
    out = result.output or {}
    if out.get("decision") == "block":
        return out.get("reason") or _default_reason(result)
    return None


def _default_reason(result: HookResult) -> str:
    return f"blocked by hook: {result.command}"
