"""The full-screen view's hold on a session: start, follow up, stop, resume, through the service.

The session runs in this process, on the view's event loop, as the line-mode command runs it:
its workspace is opened and its loop built by `service.sessions`, permission questions wait in
the log (`LogApprover`) until the view (or any other process) answers them, and a stop is asked
for through the log (`request_cancel`) and carried out here when it is logged. What the person
sends while a step runs waits in a queue and goes as the next message when the step ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kestrel import app
from kestrel.agent.loop import AgentLoop
from kestrel.agent.state import replay
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import CancelRequested, PermissionMode, SessionFinished
from kestrel.service import sessions
from kestrel.service.approvals import LogApprover
from kestrel.service.decisions import NotRunning, request_cancel
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.tui.feed import batches

logger = logging.getLogger(__name__)

BY = "terminal"
"""Who the log says answered, when the person at this view did."""

StepEnd = Callable[[SessionFinished], Awaitable[str | None]]
"""What happens after a step finished (a plan decided, a change reviewed): the next message."""


class DriverView(Protocol):
    """What the driver tells the screen."""

    def follow(self, session_id: str, after_seq: int) -> None:
        """Show the session's records after `after_seq`, then new ones as they come."""

    def notice(self, text: str, *, error: bool = False) -> None:
        """Say something that is not in the log."""

    def busy_changed(self) -> None:
        """A step started or ended, or the queue changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartOptions:
    """How new sessions start, and the budgets of each step (None: the settings')."""

    plan_first: bool = False
    permission_mode: PermissionMode | None = None
    """The mode named on the command line; None: the session's."""
    max_turns: int | None = None
    max_cost: float | None = None


@dataclass(slots=True)
class SessionDriver:
    """Runs one session at a time for the view; every decision goes through the service."""

    store: EventStore
    settings: Settings
    cwd: Path
    view: DriverView
    options: StartOptions = field(default_factory=StartOptions)
    session_id: str | None = None
    run: sessions.Run | None = None
    queue: list[str] = field(default_factory=list)
    after_step: StepEnd | None = None
    on_waiting_plan: Callable[[str], str] | None = None
    """Turns a message sent while a plan waits into what the model is told (its rejection)."""
    mode: PermissionMode | None = None
    """The mode chosen in the view (/mode, /plan); it outranks the command line's."""
    _step: asyncio.Task[None] | None = None
    _aside: asyncio.Future[Any] | None = None
    """Work of a step that is not the loop (a person's command, a compaction)."""

    def __post_init__(self) -> None:
        self.mode = "plan" if self.options.plan_first else self.options.permission_mode

    @property
    def busy(self) -> bool:
        """Whether a step runs now."""
        return self._step is not None and not self._step.done()

    def submit(self, text: str) -> None:
        """Send a message: now when idle, else after the running step."""
        if self.busy:
            self.queue.append(text)
            self.view.busy_changed()
            return
        self._start(self._first_or_follow_up(text))

    def beside(self, job: Callable[[AgentLoop], Awaitable[object]]) -> None:
        """Run `job` on the session's loop as a step of its own, outside the model's turns
        (a person's command, a compaction): Esc stops it, messages sent meanwhile wait."""
        self._start(self._beside(job))

    def continue_session(self) -> None:
        """Run the session on from where its log stands (a resumed session cut short)."""
        if not self.busy:
            self._start(self._run_loop(None))

    def cancel(self, reason: str = "stopped from the terminal") -> bool:
        """Ask the running step to stop, through the log; False when none runs. What waits in
        the queue stays there and goes as the next message."""
        if not self.busy or self.session_id is None:
            return False
        if self._aside is not None and not self._aside.done():
            self._aside.cancel(reason)  # Not the loop: nothing in the log to stop.
            self.view.busy_changed()
            return True
        try:
            request_cancel(self.store, self.session_id, by=BY, reason=reason)
        except NotRunning:  # Between two runs of the step: stop the step itself.
            assert self._step is not None
            self._step.cancel(reason)
        self.view.busy_changed()
        return True

    async def stop(self) -> None:
        """Stop the running step now and wait for it to settle (before the view closes)."""
        if self._step is not None and not self._step.done():
            self._step.cancel("the terminal view was closed")
            with contextlib.suppress(asyncio.CancelledError):
                await self._step
        self.close_run()

    def close_run(self) -> None:
        """Let go of the session's workspace: a kernel overlay comes off the checkout, its
        layer stays, and the next step opens it again."""
        if self.run is not None and self.run.view is not None and self.run.view.kind == "kernel":
            self.run.view.close()
        self.run = None

    def forget(self) -> None:
        """Leave the current session: the next message starts a new one."""
        self.close_run()
        self.session_id = None
        self.queue.clear()

    async def resume(self, session_id: str) -> None:
        """Take up an earlier session of this checkout: show it, settle what a crash cut short,
        and run it on when its last run did not finish."""
        self.forget()
        found = sessions.existing(self.store, session_id)
        workspace = sessions.same_workspace(found, None)
        flags = {"model": found.started.model, "workspace": workspace}
        self.settings = sessions.settings_for(found.cwd, flags)
        self.cwd = found.cwd
        self.session_id = session_id
        self.view.follow(session_id, 0)
        run = await self.open()
        finished = run.loop.state.finished
        if finished is not None and finished.reason == "done":
            return  # Nothing cut short: it waits for the next message.
        await asyncio.to_thread(sessions.settle_interrupted, run.loop, self.settings)
        if finished is None:
            self.continue_session()
        elif finished.reason == "plan" and run.loop.state.plan is not None:
            self._start(self._after(finished))  # The plan it stopped for is decided first.

    async def open(self) -> sessions.Run:
        """The session's run, its workspace opened and its loop built on first use."""
        assert self.session_id is not None
        if self.run is None:
            parts = app.LoopParts(approver=LogApprover(self.store))
            options = self.options
            limits = sessions.Limits(max_turns=options.max_turns, max_cost=options.max_cost)
            self.run = await asyncio.to_thread(
                sessions.open_run,
                self.store,
                self.session_id,
                self.settings,
                self.cwd,
                parts,
                limits,
            )
        self.apply_mode()
        return self.run

    def apply_mode(self) -> None:
        """Give the loop the mode chosen in the view, if any."""
        if self.run is not None and self.mode is not None:
            loop = self.run.loop
            loop.config = replace(loop.config, permission_mode=self.mode)

    def refresh(self) -> None:
        """Fold the log again into the loop's picture of the session, after a decision
        written to the log by the service rather than by the loop."""
        if self.run is not None:
            loop = self.run.loop
            loop.state = replay(self.store.read(loop.session_id))

    def _start(self, work: Awaitable[None]) -> None:
        self._step = asyncio.ensure_future(self._guarded(work))
        self.view.busy_changed()

    async def _guarded(self, work: Awaitable[None]) -> None:
        try:
            await work
        except KestrelError as exc:
            self.view.notice(str(exc), error=True)
        except Exception as exc:  # A fault of ours: said, logged, and the view goes on.
            logger.exception("a step of the session failed")
            self.view.notice(f"{type(exc).__name__}: {exc}", error=True)
        finally:
            self.view.busy_changed()
        if self.queue:
            self._start(self._first_or_follow_up(self.queue.pop(0)))

    async def _first_or_follow_up(self, text: str) -> None:
        if self.session_id is None:
            new = sessions.NewSession(task=text, cwd=self.cwd, plan_first=self.mode == "plan")
            self.session_id = await asyncio.to_thread(
                sessions.create_session, self.store, self.settings, new
            )
            self.view.follow(self.session_id, 0)
            await self._run_loop(None)
        else:
            state = (await self.open()).loop.state
            if state.plan is not None and state.finished is not None and self.on_waiting_plan:
                text = self.on_waiting_plan(text)  # A message while a plan waits answers it.
            await self._run_loop(text)

    async def _beside(self, job: Callable[[AgentLoop], Awaitable[object]]) -> None:
        loop = (await self.open()).loop
        self._aside = asyncio.ensure_future(job(loop))
        try:
            await self._aside
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # This step itself was cancelled (the view is closing).
            self.view.notice("Stopped.")
        finally:
            self._aside = None

    async def _after(self, finished: SessionFinished) -> None:
        if self.after_step is not None and (message := await self.after_step(finished)):
            await self._run_loop(message)

    async def _run_loop(self, message: str | None) -> None:
        """Run the loop (with `message` first, when given) until it stops; then, while what
        follows a step (a plan decision) gives a next message, run on with it."""
        while True:
            run = await self.open()
            finished = await self._watched(run, message)
            if finished is None or self.after_step is None or self.queue:
                return
            message = await self.after_step(finished)
            if message is None:
                return

    async def _watched(self, run: sessions.Run, message: str | None) -> SessionFinished | None:
        """One run of the loop, stopped when a `cancel_requested` is logged; None if stopped."""
        loop = run.loop
        work = asyncio.ensure_future(loop.send(message) if message is not None else loop.run())
        last = loop.state.last_seq
        watcher = asyncio.ensure_future(
            _cancel_when_logged(self.store, loop.session_id, last, work)
        )
        try:
            return await work
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # This step itself was cancelled (the view is closing).
            return None
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work


async def _cancel_when_logged(
    store: EventStore, session_id: str, last: int, work: asyncio.Future[SessionFinished]
) -> None:
    """Cancel `work` once a `cancel_requested` is logged after record `last`."""
    async for batch in batches(store, session_id, last):
        for record in batch:
            if isinstance(record.event, CancelRequested):
                who = record.event.by or "another process"
                work.cancel(f"cancelled by the user ({who})")
                return
