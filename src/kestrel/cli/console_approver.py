"""The person at the terminal answers permission questions, unless someone answers first from
another terminal or a client of the service (the question is in the log for all of them)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from kestrel.agent.ports import Approval
from kestrel.cli.line_input import read_line
from kestrel.cli.render import Frontend
from kestrel.protocol.events import Record, ToolKind
from kestrel.protocol.messages import ToolCall
from kestrel.service.approvals import wait_for_answer
from kestrel.store.base import EventStore


@dataclass(slots=True)
class ConsoleApprover:
    """Asks the person at the terminal: yes, no, or always for this session."""

    console: Console
    frontend: Frontend
    store: EventStore
    session_id: str

    async def ask(
        self,
        call: ToolCall,
        kind: ToolKind,
        reason: str,
        *,
        repeatable: bool = True,
        question: Record | None = None,
    ) -> Approval:
        """Show the call and ask (always is offered when `repeatable`); an answer written to the
        log by anyone else first settles the question too."""
        last = self.store.read(self.session_id)[-1].seq
        await self.frontend.caught_up(last)
        options = "[y]es / [n]o / [a]lways for this session " if repeatable else "[y]es / [n]o "
        self.console.print(
            f"[yellow]? {escape(reason)}.[/yellow] Allow [bold]{call.name}[/bold]? "
            + escape(options),
            end="",
        )
        typed = asyncio.ensure_future(read_line())
        if question is None:
            return _from_terminal(await typed, repeatable)
        elsewhere = asyncio.ensure_future(wait_for_answer(self.store, question))
        try:
            await asyncio.wait({typed, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            winner = typed if typed.done() and not typed.cancelled() else None
            for waiting in (elsewhere, typed) if winner else (typed, elsewhere):
                if waiting is not winner and not waiting.done():
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiting
        if winner is not None:
            return _from_terminal(typed.result(), repeatable)
        answer = elsewhere.result()
        verdict = "allowed" if answer.allow else "denied"
        self.console.print(f"[dim]{verdict} by {escape(answer.by or 'someone else')}[/dim]")
        return answer


def _from_terminal(line: str | None, repeatable: bool) -> Approval:
    choice = (line or "n").strip().lower()[:1]
    if choice == "a" and not repeatable:
        choice = "y"  # This question is asked every time; "always" means this once.
    allowed = choice in ("y", "a")
    return Approval(
        allow=allowed,
        decided_by="user",
        reason="approved by the user" if allowed else "the user said no",
        scope="session" if choice == "a" else "once",
        by="terminal",
    )
