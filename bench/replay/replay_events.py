"""Read Kestrel's stream-json output (docs/events.md) into what the replay report needs: how the
session ended, loop and verification events, refusals, and each command's outcome."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HEAD, TAIL = 400, 800  # characters of a diverged command's output kept in the result line


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """How one tool call ended."""

    exit_code: int | None
    interrupted: bool
    duration_ms: float
    content: str


@dataclass(slots=True)
class SessionSummary:
    """The parts of a session's event stream the replay report uses."""

    n_events: int = 0
    finish: dict[str, Any] | None = None
    loop: list[dict[str, Any]] = field(default_factory=list)
    verify: list[dict[str, Any]] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, ToolOutcome] = field(default_factory=dict)
    n_checkpoints: int = 0
    session_s: float = 0.0


def _records(stream: str) -> list[tuple[float, dict[str, Any]]]:
    out = []
    for line in stream.splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("event"), dict):
            out.append((float(rec.get("at") or 0.0), rec["event"]))
    return out


def _note(summary: SessionSummary, event: dict[str, Any]) -> None:
    kind = event.get("type")
    if kind == "tool_finished":
        summary.tools[str(event.get("call_id"))] = ToolOutcome(
            exit_code=event.get("exit_code"),
            interrupted=bool(event.get("interrupted")),
            duration_ms=float(event.get("duration_ms") or 0.0),
            content=str(event.get("content") or ""),
        )
    elif kind == "permission_decided" and event.get("decision") == "deny":
        summary.denied.append(
            {k: event.get(k) for k in ("call_id", "decided_by", "reason", "source")}
        )
    elif kind == "loop_detected":
        summary.loop.append({k: event.get(k) for k in ("pattern", "action", "detail")})
    elif kind == "verification_finished":
        checks = [(c.get("name"), c.get("status")) for c in event.get("checks") or []]
        summary.verify.append(
            {
                "round": event.get("round"),
                "ok": event.get("ok"),
                "blocking": event.get("blocking"),
                "checks": checks,
                "report": str(event.get("report") or "")[:600],
            }
        )
    elif kind == "error":
        summary.errors.append(str(event.get("message") or event)[:300])
    elif kind == "checkpoint_created":
        summary.n_checkpoints += 1
    elif kind == "session_finished":
        summary.finish = {"reason": event.get("reason"), "detail": event.get("detail") or ""}


def summarize(stream: str) -> SessionSummary:
    """The summary of one session's stream-json output."""
    records = _records(stream)
    summary = SessionSummary(n_events=len(records))
    for _, event in records:
        _note(summary, event)
    if records:
        summary.session_s = round(records[-1][0] - records[0][0], 3)
    return summary


def excerpt(text: str) -> dict[str, str]:
    """The start and the end of a command's output (a traceback's cause is at its end)."""
    if len(text) <= HEAD + TAIL:
        return {"head": text, "tail": ""}
    return {"head": text[:HEAD], "tail": text[-TAIL:]}


def diverged_steps(
    steps: list[dict[str, Any]],
    summary: SessionSummary,
    output_differs: Callable[[str, str], bool] | None = None,
) -> list[dict[str, Any]]:
    """Replayed steps whose exit code differs from the original's, or (given `output_differs`,
    called with the original output's ends and the replay's output) whose output does; each with
    the ends of its output here.

    Turn k of the script is step k, and its call id is `call_<k>_0` (docs/scripted-model.md)."""
    out = []
    for step in steps:
        tool = summary.tools.get(f"call_{step['index']}_0")
        orig = step.get("orig_returncode")
        if tool is None or orig is None:
            continue
        if tool.exit_code != orig:
            why = "exit code"
        else:
            before = f"{step.get('orig_output_head', '')}{step.get('orig_output_tail', '')}"
            if output_differs is None or not output_differs(before, tool.content):
                continue
            why = "output"
        out.append(
            {
                "step": step["index"],
                "why": why,
                "command": step["command"][:300],
                "orig_rc": orig,
                "replay_rc": tool.exit_code,
                "interrupted": tool.interrupted,
                **excerpt(tool.content),
            }
        )
    return out


def steps_ran(steps: list[dict[str, Any]], summary: SessionSummary) -> int:
    """How many of the script's commands Kestrel ran (or refused) before the session ended."""
    return sum(1 for s in steps if f"call_{s['index']}_0" in summary.tools)
