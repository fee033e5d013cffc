"""Drive one session from a terminal: start or resume it, show its events, handle Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.console import Console

from kestrel.cli import interrupts
from kestrel.cli.exit_codes import EXIT_CANCELLED as EXIT_CANCELLED
from kestrel.cli.exit_codes import EXIT_DONE as EXIT_DONE
from kestrel.cli.exit_codes import EXIT_ERROR as EXIT_ERROR
from kestrel.cli.exit_codes import EXIT_LIMIT as EXIT_LIMIT
from kestrel.cli.exit_codes import EXIT_TERMINATED as EXIT_TERMINATED
from kestrel.cli.exit_codes import EXIT_USAGE as EXIT_USAGE
from kestrel.cli.exit_codes import OutputFormat as OutputFormat
from kestrel.cli.exit_codes import report_error as report_error
from kestrel.cli.line_input import read_line
from kestrel.cli.remote_cancel import watch_for_cancel
from kestrel.cli.render import (
    ConsoleFrontend,
    Frontend,
    QuietFrontend,
    StreamJsonFrontend,
)
from kestrel.protocol.events import SessionFinished
from kestrel.service.decisions import requested_at
from kestrel.store.base import EventStore

if TYPE_CHECKING:  # The agent loop imports every tool; the commands that run one import it.
    from kestrel.agent.loop import AgentLoop


EXIT_CODES = {
    "done": EXIT_DONE,
    "error": EXIT_ERROR,
    "budget": EXIT_LIMIT,
    "loop": EXIT_LIMIT,
    "cancelled": EXIT_CANCELLED,
    "hook": EXIT_ERROR,
    "unverified": EXIT_ERROR,
    "plan": EXIT_DONE,
}

HANDOFF_EXIT_CODES = {"conflicts": EXIT_ERROR, "refused": EXIT_ERROR}
"""A finished session whose change could not be applied (nothing was written) exits 1."""
_handed_off: dict[str, str] = {}


def note_handoff(session_id: str, outcome: str | None) -> None:
    """Remember what became of the session's change in this process, for its exit code."""
    if outcome is not None:
        _handed_off[session_id] = outcome


FollowUp = Callable[[], Awaitable[str | None]]
AfterRun = Callable[[SessionFinished], Awaitable[None]]


def make_frontend(
    headless: bool, output_format: OutputFormat, console: Console, *, waits: bool = False
) -> Frontend:
    """The frontend for an output mode; `waits`: the run waits for answers from the log."""
    if not headless:
        return ConsoleFrontend(console)
    if output_format == "stream-json":
        return StreamJsonFrontend()
    return QuietFrontend(waits=waits)


async def drive(
    store: EventStore,
    loop: AgentLoop,
    frontend: Frontend,
    *,
    message: str | None,
    after_seq: int,
    follow_up: FollowUp | None = None,
    after: AfterRun | None = None,
) -> SessionFinished:
    """Run the loop while `frontend` renders its events; Ctrl-C or SIGTERM cancels cleanly.

    `after` runs once the conversation is over, while the frontend still shows new events. A
    signal cancels the run: the loop records the session as cancelled (or, between runs, it is
    left as its log says); `interrupts.received()` then names the signal.
    """
    consumer = asyncio.create_task(frontend.consume(store.subscribe(loop.session_id, after_seq)))
    main = asyncio.current_task()
    assert main is not None
    watch_from = requested_at(after_seq)
    watcher = asyncio.create_task(watch_for_cancel(store, loop.session_id, watch_from, main.cancel))
    with interrupts.on_signals(main.cancel):
        try:
            finished = await (loop.send(message) if message is not None else loop.run())
            while follow_up is not None:
                await frontend.caught_up(loop.state.last_seq)
                text = await follow_up()
                if not text:
                    break
                finished = await loop.send(text)
            if after is not None:
                await after(finished)
        except asyncio.CancelledError:
            if interrupts.received() is None:
                raise  # Not a signal: whoever cancelled the task is waiting for it to end.
            main.uncancel()
            interrupts.settle(store, loop.session_id)  # Stopped between the loop's own runs.
            from kestrel.agent.state import replay

            settled = loop.state.finished or replay(store.read(loop.session_id)).finished
            assert settled is not None
            finished = settled
        finally:
            if shown := store.read(loop.session_id):  # Empty when the log was deleted meanwhile.
                await frontend.caught_up(shown[-1].seq)
            for task in (consumer, watcher):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return finished


def print_result(
    finished: SessionFinished,
    session_id: str,
    output_format: OutputFormat,
    headless: bool,
    unverified: str | None = None,
) -> int:
    """Print what a headless run prints at its end; return the exit code (130 or 143 when a
    signal stopped the run). `unverified`: why the run's change went unverified, if it did."""
    stopped = interrupts.received() is not None
    code = interrupts.exit_code() if stopped else EXIT_CODES[finished.reason]
    if code == EXIT_DONE:
        code = HANDOFF_EXIT_CODES.get(_handed_off.get(session_id, ""), code)
    if headless and output_format == "json":
        totals = finished.totals
        print(
            json.dumps(
                {
                    "type": "result",
                    "session_id": session_id,
                    "reason": finished.reason,
                    "detail": finished.detail,
                    "final_text": finished.final_text,
                    "exit_code": code,
                    "not_verified": unverified,
                    "totals": {
                        **{f: getattr(totals, f) for f in totals.__dataclass_fields__},
                        "tokens": totals.tokens,
                    },
                },
                ensure_ascii=False,
            )
        )
    if stopped:
        if headless:  # At a terminal the session's view says it.
            print(interrupts.stopped_line(session_id), file=sys.stderr)
            interrupts.mark_said()
    elif headless and output_format == "text":
        if finished.final_text:
            print(finished.final_text)
        if unverified is not None:
            print(f"kestrel: {unverified}", file=sys.stderr)
        if finished.reason not in ("done", "plan"):  # A plan's hint is printed with it.
            detail = f": {finished.detail}" if finished.detail else ""
            print(
                f"kestrel: session {session_id} stopped ({finished.reason}{detail}); "
                f"continue it with: kestrel resume {session_id}",
                file=sys.stderr,
            )
    return code


async def prompt_follow_up(console: Console) -> str | None:
    """Ask for the next message; an empty line or end of input ends the session."""
    console.print("[bold cyan]>[/bold cyan] ", end="")
    line = await read_line()
    return line.strip() if line else None
