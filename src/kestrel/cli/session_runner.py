"""What `kestrel "task"`, `kestrel -p`, `--continue` and `kestrel resume` do, flag by flag."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from rich.console import Console

from kestrel import app, app_share, app_workspace
from kestrel.agent.planning import PlanNotFound, mode_after_plan
from kestrel.agent.ports import DenyingApprover
from kestrel.agent.session import CheckpointNotFound
from kestrel.agent.state import replay
from kestrel.cli import interrupts
from kestrel.cli import session_steps as steps
from kestrel.cli.drive import (
    EXIT_DONE,
    EXIT_USAGE,
    OutputFormat,
    drive,
    make_frontend,
    print_result,
    report_error,
)
from kestrel.cli.finished_resume import follow_up_of_finished
from kestrel.cli.plan_review import (
    ConsolePlanReview,
    PlanChoice,
    decide_from_choice,
    decision_hint,
)
from kestrel.cli.render import unverified_in
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.protocol.events import (
    PermissionMode,
)
from kestrel.service import sessions
from kestrel.settings import Settings
from kestrel.store.base import EventStore


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """Everything the command line said about one run."""

    task: str | None
    headless: bool
    output_format: OutputFormat
    model: str | None
    max_turns: int | None
    max_cost: float | None
    cwd: Path | None
    permission_mode: PermissionMode | None
    sandbox: Literal["none", "bwrap"] | None = None
    workspace: Literal["overlay", "direct"] | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    continue_latest: bool = False
    resume_id: str | None = None
    rewind_to: str | None = None
    plan: bool = False
    """Start in plan mode: explore read-only and propose a plan before changing anything."""
    plan_choice: PlanChoice | None = None
    """The person's decision on the plan the session waits on, given on the command line."""
    wait_for_approvals: bool = False
    """Headless: permission questions wait for an answer written to the log by another process."""
    base_url: str | None = None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None


def run_request(request: RunRequest) -> int:
    """Run or resume a session as asked; return the process exit code."""
    console = Console(stderr=request.headless, highlight=False)
    try:
        return _run(request, console)
    except (ConfigError, SessionNotFound, CheckpointNotFound, PlanNotFound) as exc:
        report_error(exc)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # Before a session exists: nothing to settle.
        interrupts.note_interrupt(exc)
        return interrupts.announce(console, None)


def _ask(console: Console, question: str) -> str:
    """One line from the person at the terminal; Ctrl-C leaves the cursor on a fresh line."""
    console.print(f"[bold cyan]{question}[/bold cyan] ", end="")
    try:
        return input().strip()
    except KeyboardInterrupt:
        console.print()
        raise


def _run(request: RunRequest, console: Console) -> int:
    cwd = (request.cwd or Path.cwd()).resolve()
    settings = _settings(cwd, request)
    app_workspace.prepare(settings)  # While this process still has a single thread.
    store = app.open_store(settings)
    try:
        session_id = _existing_session(store, request, cwd)
        if session_id is not None:
            return _resume(store, session_id, request, console)
        task = request.task
        if task is None and not request.headless and sys.stdin.isatty():
            task = _ask(console, "What should Kestrel do?")
        new = sessions.NewSession(task=task or "", cwd=cwd, plan_first=request.plan)
        session_id = sessions.create_session(store, settings, new)
        return _execute(
            store, session_id, settings, cwd, request, console, after_seq=0, message=None
        )
    finally:
        store.close()


def _settings(cwd: Path, request: RunRequest) -> Settings:
    return sessions.settings_for(cwd, request_flags(request))


def request_flags(request: RunRequest) -> dict[str, object]:
    """The settings the command line names, for every frontend that runs a request."""
    return {
        "model": request.model,
        "max_turns": request.max_turns,
        # A turn budget named on the command line is the person's exact limit: no grace.
        "turn_grace": 0.0 if request.max_turns is not None else None,
        "max_cost_usd": request.max_cost,
        "permission_mode": request.permission_mode,
        "sandbox": request.sandbox,
        "workspace": request.workspace,
        "allow": list(request.allow),
        "deny": list(request.deny),
        "base_url": request.base_url,
        "max_tokens_field": request.max_tokens_field,
    }


def _existing_session(store: EventStore, request: RunRequest, cwd: Path) -> str | None:
    if request.resume_id is not None:
        return store.resolve(request.resume_id)
    if request.continue_latest:
        return sessions.latest_in(store, cwd)
    return None


def _resume(store: EventStore, session_id: str, request: RunRequest, console: Console) -> int:
    found = sessions.existing(store, session_id)
    records, started, cwd = found.records, found.started, found.cwd
    finished = replay(records).finished
    # The session's own directory decides which project settings apply, and it keeps its model
    # unless the command line names another.
    workspace = sessions.same_workspace(found, request.workspace)
    settings = _settings(
        cwd, replace(request, model=request.model or started.model, workspace=workspace)
    )
    app_workspace.prepare(settings)
    app.check_sandbox(settings, request.permission_mode or started.permission_mode)
    # Events after the finish (the change handed over) leave a finished session finished.
    done = finished is not None and finished.reason == "done"
    quiet = request.headless or not sys.stdin.isatty()
    waiting = replay(records).plan is not None
    if waiting and quiet and request.plan_choice is None and not request.task:
        raise ConfigError(f"session {session_id}: {decision_hint(session_id)}")
    if request.plan_choice is not None and not waiting:
        raise PlanNotFound(f"session {session_id} has no plan waiting for a decision")
    if done and not request.task and request.rewind_to is None:
        if sessions.change_left_over(settings, session_id, records):
            # Stopped after the run but before its change was handed over: finish that only.
            return _hand_over_only(
                store, session_id, settings, cwd, request, console, ask=not quiet
            )
        follow_up = follow_up_of_finished(request, session_id, console, quiet=quiet)
        if follow_up is None:
            if finished is not None and request.headless and request.output_format == "json":
                print_result(finished, session_id, "json", True)  # Scripts still get a result.
            return EXIT_DONE
        request = replace(request, task=follow_up)
    # Anything else is reconciled with the files and continued.
    return _execute(
        store,
        session_id,
        settings,
        cwd,
        request,
        console,
        after_seq=records[-1].seq,
        message=request.task,
        resuming=not (done and not request.task),
    )


def _hand_over_only(
    store: EventStore,
    session_id: str,
    settings: Settings,
    cwd: Path,
    request: RunRequest,
    console: Console,
    *,
    ask: bool = False,
) -> int:
    view = app_workspace.open_workspace(settings, session_id, cwd)
    if view is not None:  # Another machine may have finished it: its files come from there.
        app_share.catch_up(store, session_id, settings, view.root)
    parts = app.LoopParts(approver=DenyingApprover(), permission_mode=request.permission_mode)
    loop = app.build_loop(store, session_id, settings, view.root if view else cwd, parts)
    finished = loop.state.finished
    assert finished is not None  # Only finished sessions come here.
    if view is not None:
        after = steps.handoff(loop, settings, view, console, ask, request.headless)

        async def hand_over() -> None:
            await after(finished)

        asyncio.run(hand_over())
    return print_result(finished, session_id, request.output_format, request.headless)


def _execute(
    store: EventStore,
    session_id: str,
    settings: Settings,
    cwd: Path,
    request: RunRequest,
    console: Console,
    *,
    after_seq: int,
    message: str | None,
    resuming: bool = False,
) -> int:
    """Run the session; Ctrl-C or SIGTERM at any point settles it as cancelled, says how to
    resume it, and exits 130 or 143."""
    try:
        code = _execute_run(
            store, session_id, settings, cwd, request, console, after_seq, message, resuming
        )
    except KeyboardInterrupt as exc:  # Outside `drive`, which turns signals into a cancel.
        interrupts.note_interrupt(exc)
        interrupts.settle(store, session_id)
        return interrupts.announce(console, session_id)
    return code if interrupts.received() is None else interrupts.announce(console, session_id)


def _execute_run(
    store: EventStore,
    session_id: str,
    settings: Settings,
    cwd: Path,
    request: RunRequest,
    console: Console,
    after_seq: int,
    message: str | None,
    resuming: bool,
) -> int:
    interactive = not request.headless and sys.stdin.isatty()
    frontend = make_frontend(
        request.headless, request.output_format, console, waits=request.wait_for_approvals
    )
    approver = steps.approver(
        interactive, console, frontend, store, session_id, request.wait_for_approvals
    )
    mode = "plan" if request.plan else request.permission_mode
    parts = app.LoopParts(approver=approver, permission_mode=mode)
    limits = sessions.Limits(max_turns=request.max_turns, max_cost=request.max_cost)
    run = sessions.open_run(store, session_id, settings, cwd, parts, limits)
    loop, view = run.loop, run.view
    if resuming:
        sessions.settle_interrupted(loop, settings)
    if request.rewind_to is not None:
        steps.rewind_to(loop, request.rewind_to)
        if message is None and interactive:
            message = _ask(console, "What now?") or None
        if message is None:
            return EXIT_DONE
        after_seq = loop.state.last_seq - 1  # Show the rewind itself, then what follows.
    after_plan = mode_after_plan(request.permission_mode, settings.permission_mode)
    if request.plan_choice is not None:
        choice = request.plan_choice
        message = decide_from_choice(
            loop, choice, settings.permission_mode, request.permission_mode
        )
    elif interactive and message is None and loop.state.plan is not None:
        message = asyncio.run(ConsolePlanReview(loop, console, after_plan, True)())
        if message is None:
            return EXIT_DONE
    follow_up = steps.follow_up(loop, console, after_plan) if interactive else None
    handoff = (
        steps.handoff(loop, settings, view, console, interactive, request.headless)
        if view
        else None
    )
    finished = asyncio.run(
        drive(
            store,
            loop,
            frontend,
            message=message,
            after_seq=after_seq,
            follow_up=follow_up,
            after=handoff,
        )
    )
    if finished.reason == "plan" and loop.state.plan is not None:
        steps.print_plan_hint(loop, request.headless, request.output_format)
    unverified = unverified_in(store.read(session_id, after_seq))
    return print_result(finished, session_id, request.output_format, request.headless, unverified)
