"""Drive one session from a terminal: start or resume it, show its events, handle Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from kestrel.cli import interrupts
from kestrel.cli.exit_codes import EXIT_CANCELLED as EXIT_CANCELLED
from kestrel.cli.exit_codes import EXIT_DONE as EXIT_DONE
from kestrel.cli.exit_codes import EXIT_ERROR as EXIT_ERROR
from kestrel.cli.exit_codes import EXIT_LIMIT as EXIT_LIMIT
from kestrel.cli.exit_codes import EXIT_TERMINATED as EXIT_TERMINATED
from kestrel.cli.exit_codes import EXIT_USAGE as EXIT_USAGE
from kestrel.cli.exit_codes import OutputFormat as OutputFormat
from kestrel.cli.exit_codes import report_error as report_error
from kestrel.cli.render import (
    ConsoleFrontend,
    Frontend,
    QuietFrontend,
    StreamJsonFrontend,
)
from kestrel.protocol.events import SessionFinished, ToolKind
from kestrel.protocol.messages import ToolCall
from kestrel.store.base import EventStore

if TYPE_CHECKING:  # The agent loop imports every tool; the commands that run one import it.
    from kestrel.agent.loop import AgentLoop
    from kestrel.agent.ports import Approval


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


def make_frontend(headless: bool, output_format: OutputFormat, console: Console) -> Frontend:
    """The frontend for an output mode."""
    if not headless:
        return ConsoleFrontend(console)
    return StreamJsonFrontend() if output_format == "stream-json" else QuietFrontend()


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
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
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


@dataclass(slots=True)
class ConsoleApprover:
    """Asks the person at the terminal; remembers "always" per tool for this run."""

    console: Console
    frontend: Frontend
    store: EventStore
    session_id: str
    always: set[str]

    async def ask(
        self, call: ToolCall, kind: ToolKind, reason: str, *, repeatable: bool = True
    ) -> Approval:
        """Show the call and ask: yes, no, or always for this tool (when `repeatable`)."""
        from kestrel.agent.ports import Approval

        if repeatable and call.name in self.always:
            return Approval(
                allow=True, decided_by="user", reason=f"{call.name} allowed for this run"
            )
        last = self.store.read(self.session_id)[-1].seq
        await self.frontend.caught_up(last)
        options = "[y]es / [n]o / [a]lways for this run " if repeatable else "[y]es / [n]o "
        self.console.print(
            f"[yellow]? {escape(reason)}.[/yellow] Allow [bold]{call.name}[/bold]? "
            + escape(options),
            end="",
        )
        answer = await read_line()
        choice = (answer or "n").strip().lower()[:1]
        if choice == "a" and not repeatable:
            choice = "y"  # This question is asked every time; "always" means this once.
        if choice == "a":
            self.always.add(call.name)
        allowed = choice in ("y", "a")
        return Approval(
            allow=allowed,
            decided_by="user",
            reason="approved by the user" if allowed else "the user said no",
        )


async def prompt_follow_up(console: Console) -> str | None:
    """Ask for the next message; an empty line or end of input ends the session."""
    console.print("[bold cyan]>[/bold cyan] ", end="")
    line = await read_line()
    return line.strip() if line else None


async def read_line() -> str | None:
    """One line from standard input, without blocking the event loop.

    The reader is a daemon thread rather than the default executor: a Ctrl-C while the person
    is being asked must end the program without waiting for an Enter that never comes.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def settle(value: str | None) -> None:
        if not answer.done():
            answer.set_result(value)

    def reader() -> None:
        value = _read_line()
        with contextlib.suppress(RuntimeError):  # The loop may have closed meanwhile.
            loop.call_soon_threadsafe(settle, value)

    threading.Thread(target=reader, name="kestrel-stdin", daemon=True).start()
    try:
        return await answer
    except asyncio.CancelledError:
        print(flush=True)  # Cancelled while asking: what follows starts on a fresh line.
        raise


def _read_line() -> str | None:
    try:
        return input()
    except EOFError:
        return None
