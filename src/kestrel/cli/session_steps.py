"""The steps of a session run the runner puts together: follow-ups, plan hints, the hand-off of
the change, rewinds, and who answers permission questions."""

from __future__ import annotations

import sys
from dataclasses import replace

from rich.console import Console
from rich.markup import escape

from kestrel import app_workspace
from kestrel.agent.loop import AgentLoop
from kestrel.agent.ports import Approver, DenyingApprover
from kestrel.cli.console_approver import ConsoleApprover
from kestrel.cli.drive import (
    AfterRun,
    FollowUp,
    OutputFormat,
    note_handoff,
    prompt_follow_up,
)
from kestrel.cli.line_input import read_line
from kestrel.cli.plan_review import ConsolePlanReview, decision_hint
from kestrel.cli.render import Frontend, handoff_lines, pending_hint
from kestrel.protocol.events import ChangesReady, PermissionMode, SessionFinished
from kestrel.service import sessions
from kestrel.service.approvals import LogApprover
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.tools.plan import plan_text
from kestrel.workspace.overlay import View


def follow_up(loop: AgentLoop, console: Console, after_plan: PermissionMode) -> FollowUp:
    """The next message at a terminal: the decision on a plan the run stopped for, else a
    follow-up."""
    review = ConsolePlanReview(loop, console, after_plan)

    async def next_message() -> str | None:
        finished = loop.state.finished
        if finished is not None and finished.reason == "plan" and loop.state.plan is not None:
            return await review()
        while True:
            text = await prompt_follow_up(console)
            if text is None or not text.startswith("/"):
                return text
            command, _, rest = text.partition(" ")
            if command != "/plan":
                console.print("Commands: /plan [message]: plan first (read-only), then decide.")
                continue
            loop.config = replace(loop.config, permission_mode="plan")
            console.print(
                "[cyan]Plan mode: the agent explores read-only and proposes a plan; "
                "you approve, edit or reject it before anything is written.[/cyan]"
            )
            if rest.strip():
                return rest.strip()

    return next_message


def print_plan_hint(loop: AgentLoop, headless: bool, output_format: OutputFormat) -> None:
    """Headless, a run that stopped for a plan prints it (text output) and how to decide."""
    plan = loop.state.plan
    assert plan is not None
    if headless and output_format == "text":
        print(f"Plan {plan.plan_id}:\n{plan_text(plan.summary, plan.steps)}")
    if headless or not sys.stdin.isatty():
        print(f"kestrel: {decision_hint(loop.session_id)}", file=sys.stderr)


def handoff(
    loop: AgentLoop,
    settings: Settings,
    view: View,
    console: Console,
    interactive: bool,
    headless: bool,
) -> AfterRun:
    """What happens to the change when the run is over: applied on its own when the session
    may edit unasked and finished its task, asked about at a terminal, else left for review."""

    async def after(finished: SessionFinished) -> None:
        async def decide(ready: ChangesReady) -> bool:
            if finished.reason != "done":
                return False
            if (loop.config.permission_mode or loop.state.permission_mode) in (
                "accept-edits",
                "bypass",
            ):
                return True
            if not interactive:
                return False
            console.print(
                "[bold cyan]Apply this change to your checkout? [y/N][/bold cyan] ", end=""
            )
            answer = await read_line()
            return (answer or "").strip().lower() in ("y", "yes")

        handoff = await app_workspace.hand_off(
            loop.store, loop.session_id, settings, view, emit=loop.emit, decide=decide
        )
        note_handoff(loop.session_id, handoff.applied.outcome if handoff.applied else None)
        if handoff.ready is None:
            return
        if headless:  # Otherwise the console frontend has shown them.
            for event in (handoff.ready, handoff.applied):
                for line in handoff_lines(event, loop.session_id) if event else ():
                    console.print(escape(line), soft_wrap=True, highlight=False)
        if handoff.applied is None or handoff.applied.outcome != "applied":
            console.print(escape(pending_hint(loop.session_id)), soft_wrap=True)

    return after


def rewind_to(loop: AgentLoop, checkpoint: str) -> None:
    """Restore the files of a checkpoint and log the rewind; say what happened."""
    rewound = sessions.rewind_to(loop, checkpoint)
    Console(stderr=True, highlight=False).print(
        f"Rewound the files to checkpoint {rewound.checkpoint_id[:12]}; the conversation "
        f"continues from event {rewound.to_seq}. Continue with: "
        f'kestrel resume {loop.session_id} "what to do now"',
        soft_wrap=True,
    )


def approver(
    interactive: bool,
    console: Console,
    frontend: Frontend,
    store: EventStore,
    session_id: str,
    wait: bool = False,
) -> Approver:
    """Who answers permission questions: the person at the terminal (or anyone through the
    log, first), anyone through the log when told to wait, else nobody (denied)."""
    if not interactive:
        return LogApprover(store) if wait else DenyingApprover()
    return ConsoleApprover(console, frontend, store, session_id)
