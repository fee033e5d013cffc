"""How a server's sessions read in the terminal: the list's table, a session's heading, its
events as the local views show them, and following a run live until it ends."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kestrel.cli.drive import EXIT_CODES
from kestrel.cli.exit_codes import EXIT_DONE, EXIT_ERROR
from kestrel.cli.frontends import shorten
from kestrel.cli.remote_client import Remote, RemoteSession, quoted
from kestrel.cli.render import ConsoleFrontend
from kestrel.cli.session_list import Column, cut, table_width
from kestrel.cli.usage_text import compact_count, dollars
from kestrel.protocol.codec import DecodeError, record_from_dict
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    Record,
    SessionFinished,
    SessionResumed,
    UserMessage,
)

SETTLE_S = 30.0
"""How long a finished run may take to be marked idle before following goes on regardless."""
_MIN_TASK = 16


def state_text(session: RemoteSession) -> str:
    """`queued`, `running`, or how an idle session's last run ended (`done`, `error`, …)."""
    if session.status == "idle":
        return session.finished or "idle"
    return session.status


def age_text(created_at: float, now: float | None = None) -> str:
    """How long ago: `40s`, `12m`, `3h`, `5d`."""
    seconds = max(0, int((now if now is not None else time.time()) - created_at))
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def session_table(rows: Sequence[RemoteSession], width: int | None = None) -> list[str]:
    """The sessions as fixed columns that never wrap; the task is cut to fit with …."""
    cells = [
        [
            s.id,
            state_text(s),
            s.waiting_on,
            age_text(s.created_at),
            dollars(s.cost_usd),
            s.model,
            s.task.splitlines()[0] if s.task.strip() else "(no task)",
        ]
        for s in rows
    ]
    names = ("id", "status", "waits on", "age", "cost", "model")
    columns = [
        Column(name, max([len(name), *(len(c[i]) for c in cells)]), right=name in ("age", "cost"))
        for i, name in enumerate(names)
    ]
    columns[-1] = Column("model", min(columns[-1].width, 28))
    used = sum(c.width + 2 for c in columns)
    columns.append(Column("task", max(_MIN_TASK, (width or table_width()) - used)))
    lines = []
    for row in [[c.heading for c in columns], *cells]:
        parts = [
            cut(cell, c.width).rjust(c.width) if c.right else cut(cell, c.width).ljust(c.width)
            for c, cell in zip(columns, row, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return lines


def heading_lines(session: RemoteSession) -> list[str]:
    """What `show` prints above the events: where the session stands and what it spent."""
    waits = f" · waits on {session.waiting_on}" if session.waiting_on else ""
    when = dt.datetime.fromtimestamp(session.created_at).strftime("%Y-%m-%d %H:%M")
    return [
        f"session {session.id} · {state_text(session)}{waits}",
        f"{session.model} · {compact_count(session.tokens)} tokens · "
        f"{dollars(session.cost_usd)} · created {when}",
        f"task: {shorten(session.task, 300)}",
    ]


class RemoteView:
    """Prints a server's records: as the local views do, or as JSON Lines (`as_json`)."""

    def __init__(self, console: Console, *, as_json: bool, hint_server: str) -> None:
        self.console = console
        self.as_json = as_json
        self.hint_server = hint_server
        """What the printed commands add to reach the server (`--server URL`, or nothing)."""
        self._local = ConsoleFrontend(console, resume_hint=False)

    def show(self, item: dict[str, Any]) -> Record | None:
        """Print one record of the log's JSON form; the record, or None for one this version
        of Kestrel cannot read (a newer server's event)."""
        if self.as_json:
            print(json.dumps(item, ensure_ascii=False), flush=True)
        try:
            record = record_from_dict(item)
        except DecodeError:
            kind = item.get("event", {}).get("type") if isinstance(item.get("event"), dict) else ""
            if not self.as_json:
                self.console.print(f"[dim](an event this Kestrel cannot show: {kind})[/dim]")
            return None
        if not self.as_json:
            self._local.render(record)
            self._extra(record)
        return record

    def _extra(self, record: Record) -> None:
        """What the local view leaves to its prompt: the person's messages and the questions."""
        event = record.event
        match event:
            case UserMessage():
                self.console.print(Text("> " + event.text, style="bold"), soft_wrap=True)
            case ApprovalRequested():
                self.console.print(
                    f"[yellow]? waiting for approval of {escape(event.name)} "
                    f"({escape(event.reason)}): kestrel sessions approve {record.session_id} "
                    f"{event.call_id}{escape(self.hint_server)} [--deny -m WHY][/yellow]",
                    soft_wrap=True,
                )
            case ApprovalDecided():
                verdict = "[green]✓ allowed[/green]" if event.allow else "[red]✗ denied[/red]"
                said = f": {escape(event.message)}" if event.message else ""
                self.console.print(f"  {verdict} [dim]by {escape(event.by)}{said}[/dim]")

    def next_steps(self, session: RemoteSession) -> None:
        """Say what the session waits on a person for, and the command that gives it."""
        if self.as_json or not session.waiting_on:
            return
        sid, on = session.id, self.hint_server
        steps = {
            "approval": f"answer it: kestrel sessions approve {sid}{on} [--deny -m WHY]",
            "plan": f"decide: kestrel sessions plan {sid}{on} --approve | --reject -m WHY",
            "review": f"see it: kestrel sessions diff {sid}{on}; then kestrel sessions review "
            f"{sid}{on} --apply | --discard | --reject -m WHAT",
        }
        step = steps.get(session.waiting_on, "")
        self.console.print(
            f"[dim]waits on {escape(session.waiting_on)}; {escape(step)}[/dim]", soft_wrap=True
        )


def follow(remote: Remote, view: RemoteView, session_id: str, after: int = 0) -> int:
    """Print the session's records after `after`, then new ones as they are logged, until its
    run ends; the exit code of how it ended."""
    path = f"/sessions/{quoted(session_id)}/events/stream"
    finished: SessionFinished | None = None
    last = after
    if remote.session(session_id).status == "idle":  # Nothing runs: print what there is.
        for item in remote.events(session_id, after):
            finished = _ending(view.show(item)) or finished
        return _exit_code(remote, view, session_id, finished)
    ending = False
    """Whether the run has finished: what follows its `session_finished` (the change it leaves,
    say) may still come, then it is marked idle."""
    for item in remote.stream(path, after, on_reconnect=_say):
        if item is None or "seq" not in item:
            # A quiet moment, or the session went idle: has the run stopped (a crash too)?
            quiet_or_idle = item is None or item.get("status") == "idle"
            if quiet_or_idle and _settled(remote, session_id, last, wait=False):
                break
            continue
        record = view.show(item)
        last = int(item["seq"])
        event = record.event if record is not None else None
        if isinstance(event, SessionFinished):
            finished, ending = event, True
        elif isinstance(event, SessionResumed | UserMessage):
            ending = False  # The next run begins.
        if ending and _settled(remote, session_id, last, wait=True):
            break
    return _exit_code(remote, view, session_id, finished)


def _ending(record: Record | None) -> SessionFinished | None:
    event = record.event if record is not None else None
    return event if isinstance(event, SessionFinished) else None


def _settled(remote: Remote, session_id: str, seq: int, *, wait: bool) -> bool:
    """Whether the session's run is over at event `seq`: it is idle and nothing came after.
    With `wait`, give a run that just finished time to be marked idle."""
    deadline = time.monotonic() + (SETTLE_S if wait else 0)
    while True:
        if remote.events(session_id, seq, limit=1):
            return False  # More is coming: a run that goes on, or the next one.
        status = remote.session(session_id).status
        if status == "idle":
            return not remote.events(session_id, seq, limit=1)
        if status == "queued" or time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _exit_code(
    remote: Remote, view: RemoteView, session_id: str, finished: SessionFinished | None
) -> int:
    session = remote.session(session_id)
    view.next_steps(session)
    if finished is not None:
        return EXIT_CODES.get(finished.reason, EXIT_ERROR)
    if session.status == "idle" and session.finished is None:
        _say(
            f"session {session_id} stopped without finishing; see what it did with: "
            f"kestrel sessions show {session_id}{view.hint_server}"
        )
        return EXIT_ERROR
    return EXIT_DONE


def _say(line: str) -> None:
    print(f"kestrel: {line}", file=sys.stderr, flush=True)
