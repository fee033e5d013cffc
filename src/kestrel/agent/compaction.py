"""Compaction: fold the older turns of a conversation into one structured message.

When a request would fill the context window past a threshold, the loop keeps the newest turns
as they are and replaces the older ones with a single user turn holding:

- the goal (the session's task) and the person's latest request, word for word;
- a summary of the dropped turns written by the fast model (decisions, what was learnt);
- the files the dropped turns touched and the calls that failed, taken from the turns
  themselves, not from the model;
- a pointer to the log, which keeps everything (the person can rewind to before it).

The rules and memory files live in the system prompt and the task list is appended to every
request (`prompt.with_task_list`), so neither is ever summarised. Large tool outputs in the kept
turns are replaced by a reference to a file holding the whole output, which the model can read.

Everything here is pure: the loop supplies the summary text and a way to store an output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kestrel.context.budget import estimate_tokens
from kestrel.protocol.messages import (
    COMPACTED_TAG,
    AssistantTurn,
    Message,
    ModelRequest,
    ToolResultTurn,
    ToolSpec,
    UserTurn,
    model_turns,
)

COMPACTION_OPEN = f"<{COMPACTED_TAG}"
COMPACTION_CLOSE = f"</{COMPACTED_TAG}>"
EDIT_TOOLS = frozenset({"edit_file", "lazy_edit", "write_file", "apply_patch", "multi_edit"})
_REQUEST = "## The person's latest request (verbatim)"
_FILES = "## Files edited in them"
_FAILED = "## Calls that failed in them"
_PER_MESSAGE_TOKENS = 4  # role and framing that each message costs beyond its text
_FAILURE_CHARS = 200  # of each failed call's output, in the list of failures
_SUMMARY_INPUT_CHARS = 6_000  # of each dropped tool output, in what the fast model reads

SUMMARY_SYSTEM = """\
You summarise the earlier part of a coding agent's session so the agent can carry on without it.
Write plain Markdown with exactly these sections, each a short list of facts:
## Decisions
## What was learnt about the code
## Approaches that failed, and why
## State of the work
Keep file paths, function names, commands and error messages exact. Do not invent anything the
transcript does not show. Do not repeat the goal or the latest request: they are kept verbatim.
"""


class ContextOverflow(Exception):
    """Even after compaction the request does not fit the context window."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """How to compact: the message that replaces the dropped turns and how many turns stay."""

    message: UserTurn
    kept: int
    """How many of the newest messages stay as they are."""
    dropped: tuple[Message, ...]
    tokens_before: int
    tokens_after: int


def message_tokens(message: Message) -> int:
    """Estimated tokens one message costs in a request."""
    match message:
        case UserTurn():
            text = message.text
        case AssistantTurn():
            text = message.text + "".join(c.name + c.arguments for c in message.tool_calls)
        case ToolResultTurn():
            text = message.content
    return estimate_tokens(text) + _PER_MESSAGE_TOKENS


def request_tokens(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
    """Estimated input tokens of a whole request: system prompt, tool specs and messages."""
    specs = sum(estimate_tokens(t.name + t.description + json.dumps(t.input_schema)) for t in tools)
    return estimate_tokens(system) + specs + sum(map(message_tokens, messages))


def split_point(messages: Sequence[Message], keep_tokens: int) -> int:
    """The index of the first message to keep: the newest turns within `keep_tokens`, cut only
    where a turn starts (never between a tool call and its result). At least the last turn is
    kept; 0 means there is nothing older to drop."""
    starts = [i for i, m in enumerate(messages) if not isinstance(m, ToolResultTurn)]
    if not starts:
        return 0
    kept_tokens = 0
    best = starts[-1]
    for start in reversed(starts):
        kept_tokens = sum(message_tokens(m) for m in messages[start:])
        if kept_tokens > keep_tokens and start != starts[-1]:
            break
        best = start
    return best


def is_compacted(message: Message) -> bool:
    """Whether `message` is the turn an earlier compaction left."""
    return isinstance(message, UserTurn) and message.text.startswith(COMPACTION_OPEN)


def _section(text: str, header: str) -> str | None:
    """The body of one section of a compacted turn, or None when it has none."""
    start = text.find(f"\n\n{header}\n")
    if start < 0:
        return None
    body = text[start + len(header) + 3 :]
    end = min(
        (i for i in (body.find("\n\n## "), body.find(f"\n\n{COMPACTION_CLOSE}")) if i >= 0),
        default=len(body),
    )
    return body[:end]


def _items(text: str, header: str) -> list[str]:
    body = _section(text, header)
    return [line[2:] for line in (body or "").splitlines() if line.startswith("- ")]


def latest_request(messages: Sequence[Message]) -> str:
    """The text of the newest user turn (the person's latest words), or "" when there is none;
    a compacted turn gives the request it kept."""
    for message in reversed(messages):
        if not isinstance(message, UserTurn):
            continue
        if not is_compacted(message):
            return message.text
        if (kept := _section(message.text, _REQUEST)) is not None:
            return kept
    return ""


def files_touched(messages: Sequence[Message]) -> list[str]:
    """Paths the edit tools were called on, in first-touched order (with those an earlier
    compacted turn among `messages` lists)."""
    seen: dict[str, None] = {}
    for message in messages:
        if isinstance(message, UserTurn) and is_compacted(message):
            seen.update(dict.fromkeys(_items(message.text, _FILES)))
        if not isinstance(message, AssistantTurn):
            continue
        for call in message.tool_calls:
            if call.name not in EDIT_TOOLS:
                continue
            try:
                arguments = call.parsed_arguments()
            except ValueError:
                continue
            path = arguments.get("path") or arguments.get("file_path")
            if isinstance(path, str):
                seen.setdefault(path, None)
    return list(seen)


def failures(messages: Sequence[Message]) -> list[str]:
    """One line per failed tool call: the tool and the start of what it said."""
    lines = []
    for message in messages:
        if isinstance(message, UserTurn) and is_compacted(message):
            lines += _items(message.text, _FAILED)
        if isinstance(message, ToolResultTurn) and message.is_error:
            first = " ".join(message.content.split())[:_FAILURE_CHARS]
            lines.append(f"{message.name}: {first}")
    return lines


def transcript(messages: Sequence[Message]) -> str:
    """The dropped turns as plain text for the summarising model (long outputs cut)."""
    parts = []
    for message in messages:
        match message:
            case UserTurn():
                parts.append(f"[user]\n{message.text}")
            case AssistantTurn():
                calls = "".join(f"\n-> {c.name}({c.arguments})" for c in message.tool_calls)
                parts.append(f"[assistant]\n{message.text}{calls}")
            case ToolResultTurn():
                content = message.content
                if len(content) > _SUMMARY_INPUT_CHARS:
                    cut = len(content) - _SUMMARY_INPUT_CHARS
                    content = f"{content[:_SUMMARY_INPUT_CHARS]}\n[... {cut} more characters]"
                status = " (error)" if message.is_error else ""
                parts.append(f"[{message.name} result{status}]\n{content}")
    return "\n\n".join(parts)


def summary_request(dropped: Sequence[Message], *, goal: str) -> ModelRequest:
    """The request that asks the fast model to summarise the dropped turns."""
    text = f"The session's goal:\n{goal}\n\nThe transcript to summarise:\n\n{transcript(dropped)}"
    return ModelRequest(
        system=SUMMARY_SYSTEM,
        messages=(UserTurn(text=text),),
        max_output_tokens=2_000,
        metadata={"purpose": "compaction"},
    )


def compaction_message(
    *, goal: str, request: str, summary: str, dropped: Sequence[Message]
) -> UserTurn:
    """The user turn that stands for the dropped turns."""
    touched = files_touched(dropped)
    failed = failures(dropped)
    sections = [
        f'{COMPACTION_OPEN} turns="{model_turns(dropped)}">',
        "Earlier turns of this session were compacted to fit the context window. The session's "
        "log keeps all of them; what follows stands for them.",
        f"## Goal (verbatim)\n{goal}",
        f"{_REQUEST}\n{request}" if request else "",
        f"## Summary of the compacted turns\n{summary.strip() or '(no summary)'}",
        f"{_FILES}\n" + "\n".join(f"- {p}" for p in touched) if touched else "",
        f"{_FAILED}\n" + "\n".join(f"- {f}" for f in failed) if failed else "",
        COMPACTION_CLOSE,
    ]
    return UserTurn(text="\n\n".join(part for part in sections if part))


def reference_outputs(
    messages: Sequence[Message],
    *,
    over_chars: int,
    store: Callable[[ToolResultTurn], str],
    spare_last: int = 1,
) -> list[Message]:
    """`messages` with each tool output longer than `over_chars` replaced by a reference to the
    file `store` wrote it to; the outputs of the last `spare_last` turns stay whole."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, AssistantTurn)]
    spared_from = starts[-spare_last] if spare_last and len(starts) >= spare_last else len(messages)
    result: list[Message] = []
    for index, message in enumerate(messages):
        if (
            index < spared_from
            and isinstance(message, ToolResultTurn)
            and len(message.content) > over_chars
            and not message.content.startswith("[kestrel: output moved")
        ):
            where = store(message)
            head = message.content[: over_chars // 4]
            message = replace(
                message,
                content=f"[kestrel: output moved to {where} ({len(message.content):,} characters) "
                f"to save context; read that file to see all of it]\n{head}\n[...]",
            )
        result.append(message)
    return result


def compact(
    *,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    goal: str,
    summary: str,
    cut: int,
    window_tokens: int,
) -> Compaction:
    """Build the compaction that drops `messages[:cut]` (a cut from `split_point`), with the
    fast model's `summary` of them.

    Raises `ContextOverflow` when the compacted request still does not fit `window_tokens`.
    """
    dropped = tuple(messages[:cut])
    kept = list(messages[cut:])
    # The latest request is repeated only when the kept turns do not hold it already.
    request = "" if latest_request(kept) else latest_request(dropped)
    message = compaction_message(goal=goal, request=request, summary=summary, dropped=dropped)
    before = request_tokens(system, messages, tools)
    after = request_tokens(system, [message, *kept], tools)
    if after > window_tokens:
        raise ContextOverflow(
            f"the request needs about {after:,} tokens after compaction, more than the "
            f"{window_tokens:,}-token context window: the newest turns alone are too large"
        )
    return Compaction(
        message=message, kept=len(kept), dropped=dropped, tokens_before=before, tokens_after=after
    )
