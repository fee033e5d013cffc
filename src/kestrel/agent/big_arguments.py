"""Tool-call arguments too long for the conversation are kept in a file and run from there.

A model that writes a 2 MB file in one call would otherwise carry those 2 MB in every later
request: the context overflows for good and the session can never be resumed. The conversation
keeps a stand-in instead, itself a JSON object (providers require one), with the start of the
arguments, their size and the file's path; the call runs with the full arguments read back.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import replace
from pathlib import Path

from kestrel.protocol.messages import AssistantTurn, ToolCall

MAX_ARGUMENT_CHARS = 64 * 1024
"""Longest arguments (JSON text) a call keeps in the conversation."""

SHOWN_CHARS = 2000
"""How much of moved arguments the stand-in still shows."""

MOVED_KEY = "kestrel_moved_arguments"
"""The one key of a stand-in."""

_MOVED_NAME = re.compile(r"arguments-[A-Za-z0-9_-]{0,64}-[0-9a-f]{8}\.json")


def shrink_message(
    message: AssistantTurn, artifacts_dir: Path, limit: int = MAX_ARGUMENT_CHARS
) -> AssistantTurn:
    """`message` with every call's arguments past `limit` moved to a file under `artifacts_dir`."""
    if all(len(c.arguments) <= limit for c in message.tool_calls):
        return message
    calls = tuple(
        c if len(c.arguments) <= limit else _moved(c, artifacts_dir) for c in message.tool_calls
    )
    return replace(message, tool_calls=calls)


def full_call(call: ToolCall, artifacts_dir: Path) -> ToolCall:
    """`call` with the arguments a stand-in points to; as it is when it holds no stand-in, or one
    pointing anywhere but a file of moved arguments in `artifacts_dir` (a model may write one)."""
    path = moved_path(call)
    if path is None:
        return call
    saved = Path(path)
    if saved.parent != artifacts_dir.resolve() or not _MOVED_NAME.fullmatch(saved.name):
        return call  # The tool refuses the stand-in's unknown key: the model learns of it.
    try:
        text = saved.read_text(encoding="utf-8")
    except OSError:
        return call
    return replace(call, arguments=text)


def moved_path(call: ToolCall) -> str | None:
    """The file a stand-in's arguments were moved to, or None for ordinary arguments."""
    if MOVED_KEY not in call.arguments[:100]:
        return None
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != {MOVED_KEY}:
        return None
    moved = value[MOVED_KEY]
    path = moved.get("path") if isinstance(moved, dict) else None
    return path if isinstance(path, str) else None


def _moved(call: ToolCall, artifacts_dir: Path) -> ToolCall:
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    safe_id = re.sub(r"[^A-Za-z0-9_-]", "_", call.id)[:64]
    path = (artifacts_dir / f"arguments-{safe_id}-{secrets.token_hex(4)}.json").resolve()
    path.write_text(call.arguments, encoding="utf-8")
    note = (
        f"The arguments of this {call.name} call ({len(call.arguments):,} characters) were too "
        f"long to keep in the conversation; they are saved whole in {path}, and the call ran "
        "with them. Only their start is shown here."
    )
    stand_in = {
        MOVED_KEY: {
            "note": note,
            "path": str(path),
            "chars": len(call.arguments),
            "start": call.arguments[:SHOWN_CHARS],
        }
    }
    return replace(call, arguments=json.dumps(stand_in))


class DeltaCap:
    """Passes on each streamed call's first `limit` characters of arguments, then nothing."""

    def __init__(self, limit: int = MAX_ARGUMENT_CHARS) -> None:
        self._limit = limit
        self._seen: dict[int, int] = {}

    def take(self, index: int, delta: str) -> str:
        """The part of `delta` still within the limit for call `index`."""
        seen = self._seen.get(index, 0)
        self._seen[index] = seen + len(delta)
        return delta[: max(self._limit - seen, 0)]
