"""Trajectory metrics of one session, computed from its event log and nothing else.

The log records every model call, tool call, file write, verification and retry, so everything
here is a fold over its records; the gold files come from the task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kestrel.agent.state import replay
from kestrel.protocol.events import (
    FileChanged,
    FinishReason,
    ModelCompleted,
    Record,
    SessionFinished,
    SessionStarted,
    ToolCallRequested,
    ToolFinished,
    ToolKind,
    VerificationFinished,
)
from kestrel.tools.registry import default_tools

READ_TOOLS = frozenset({"read_file", "outline"})
"""Tools whose `path` argument names one file the agent looked at."""


def _tool_kinds() -> dict[str, ToolKind]:
    code = ("search_code", "find_symbol", "find_references", "outline", "repo_map")
    kinds: dict[str, ToolKind] = dict.fromkeys(code, "read")
    kinds.update({tool.name: tool.kind for tool in default_tools()})
    return kinds


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    """What one session did and spent, scored against the task's gold files."""

    session_id: str = ""
    finish_reason: FinishReason | None = None
    turns: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    """Calls per tool name."""
    tool_calls_by_kind: dict[str, int] = field(default_factory=dict)
    """Calls per kind of tool: read, edit, execute (or `other` for tools Kestrel does not ship)."""
    edit_calls: int = 0
    edit_apply_success: float | None = None
    """Share of edit-tool calls that landed; None without any."""
    files_read: tuple[str, ...] = ()
    files_edited: tuple[str, ...] = ()
    gold_files: tuple[str, ...] = ()
    loc_precision: float | None = None
    """Share of the files read that are gold files; None when nothing was read."""
    loc_recall: float | None = None
    """Share of the gold files that were read; None without gold files."""
    gold_edit_recall: float | None = None
    """Share of the gold files that were edited; None without gold files."""
    input_tokens: int = 0
    """Input tokens not read from the cache (cache writes included)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    retries: int = 0
    verify_rounds: int = 0
    loops: int = 0
    compactions: int = 0
    token_efficiency: float | None = None
    """Tokens spent up to the model call that first edited a gold file, over all tokens."""


def _skipped(event: VerificationFinished) -> bool:
    return any(check.status == "skipped" for check in event.checks)


def compute(records: Sequence[Record], gold_files: Sequence[str] = ()) -> Metrics:
    """Score one session's records."""
    if not records:
        return Metrics(gold_files=tuple(gold_files))
    started = records[0].event
    cwd = started.cwd if isinstance(started, SessionStarted) else ""
    gold = tuple(_norm(p, cwd) for p in gold_files)
    kinds = _tool_kinds()
    calls: dict[str, ToolCallRequested] = {}
    results: dict[str, ToolFinished] = {}
    edited: list[str] = []
    first_gold_edit: str | None = None
    completions: list[ModelCompleted] = []
    counts: Counter[str] = Counter()
    finish: FinishReason | None = None
    for record in records:
        event = record.event
        counts[event.type] += 1
        match event:
            case ToolCallRequested():
                calls[event.call.id] = event
            case ToolFinished():
                results[event.call_id] = event
            case FileChanged():
                path = _norm(event.path, cwd)
                edited.append(path)
                if first_gold_edit is None and path in gold:
                    first_gold_edit = event.call_id
            case ModelCompleted():
                completions.append(event)
            case VerificationFinished() if not event.ok and _skipped(event):
                counts[event.type] -= 1  # Checks could not run (no sandbox): not a round.
            case SessionFinished():
                finish = event.reason
    names = Counter(c.call.name for c in calls.values())
    by_kind = Counter(kinds.get(name, "other") for name in _each(names))
    edits = [i for i, c in calls.items() if kinds.get(c.call.name) == "edit"]
    landed = [i for i in edits if i in results and not results[i].is_error]
    read = _files_read(calls, results, cwd)
    hits = set(read) & set(gold)
    totals = replay(records).totals
    return Metrics(
        session_id=records[0].session_id,
        finish_reason=finish,
        turns=len(completions),
        tool_calls=dict(sorted(names.items())),
        tool_calls_by_kind=dict(sorted(by_kind.items())),
        edit_calls=len(edits),
        edit_apply_success=len(landed) / len(edits) if edits else None,
        files_read=read,
        files_edited=tuple(dict.fromkeys(edited)),
        gold_files=gold,
        loc_precision=len(hits) / len(read) if read else None,
        loc_recall=len(hits) / len(gold) if gold else None,
        gold_edit_recall=len(set(edited) & set(gold)) / len(gold) if gold else None,
        input_tokens=sum(c.usage.input_tokens + c.usage.cache_write_tokens for c in completions),
        output_tokens=sum(c.usage.output_tokens for c in completions),
        cache_read_tokens=sum(c.usage.cache_read_tokens for c in completions),
        cost_usd=sum(c.usage.cost_usd for c in completions),
        wall_s=totals.wall_s,
        retries=counts["model_retrying"],
        verify_rounds=counts["verification_finished"],
        loops=counts["loop_detected"],
        compactions=sum(n for kind, n in counts.items() if "compact" in kind),
        token_efficiency=_efficiency(completions, first_gold_edit),
    )


def _each(names: Counter[str]) -> list[str]:
    return [name for name, n in names.items() for _ in range(n)]


def _files_read(
    calls: dict[str, ToolCallRequested], results: dict[str, ToolFinished], cwd: str
) -> tuple[str, ...]:
    """Files a read tool returned successfully, in the order first read."""
    read: list[str] = []
    for call_id, requested in calls.items():
        finished = results.get(call_id)
        if requested.call.name not in READ_TOOLS or finished is None or finished.is_error:
            continue
        try:
            path = requested.call.parsed_arguments().get("path")
        except ValueError:
            continue
        if isinstance(path, str) and path:
            read.append(_norm(path, cwd))
    return tuple(dict.fromkeys(read))


def _efficiency(completions: Sequence[ModelCompleted], call_id: str | None) -> float | None:
    def tokens(c: ModelCompleted) -> int:
        return c.usage.total_input_tokens + c.usage.output_tokens

    total = sum(tokens(c) for c in completions)
    if call_id is None or total == 0:
        return None
    spent = 0
    for completion in completions:
        spent += tokens(completion)
        if any(call.id == call_id for call in completion.message.tool_calls):
            return spent / total
    return None


def _norm(path: str, cwd: str) -> str:
    """A path relative to the workspace, in posix form, without `./`."""
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() and cwd:
        try:
            pure = pure.relative_to(cwd)
        except ValueError:
            return str(pure)
    parts = [p for p in pure.parts if p not in (".", "")]
    return "/".join(parts) or "."
