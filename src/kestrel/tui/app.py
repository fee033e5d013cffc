"""The full-screen view: the conversation, the prompt, the status line, and the dialogs.

It is one more client of the session service: it renders the session's log as it grows, and
writes the person's answers and decisions back through the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen

from kestrel.agent.state import SessionState, apply
from kestrel.context.inventory import list_files
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    ChangesReady,
    ModelCompleted,
    PlanProposed,
    Record,
    SubagentStarted,
)
from kestrel.service.approvals import NoSuchApproval, answer_approval
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.tui import slash
from kestrel.tui.blocks import Notice, UserLine
from kestrel.tui.commands import CustomCommand, load_custom, parse_slash
from kestrel.tui.dialogs import ApprovalAnswer, ApprovalScreen, ChangeScreen, PlanScreen
from kestrel.tui.driver import BY, SessionDriver, StartOptions
from kestrel.tui.feed import batches
from kestrel.tui.prompt import CompletionHint, PromptInput
from kestrel.tui.repo_index import RepoIndex
from kestrel.tui.review import ChangeAnswer, PlanAnswer, after_step, rejecting
from kestrel.tui.status import StatusFacts, StatusLine
from kestrel.tui.transcript import Transcript

T = TypeVar("T")
logger = logging.getLogger(__name__)
NAMES_AGAIN_S = 2.0
"""While a first index is read, how often the names `@` completes are read again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewOptions:
    """What the view starts with, and how it shows time."""

    task: str | None = None
    """A task to start at once."""
    resume: str | None = None
    """A session to take up at once."""
    start: StartOptions = field(default_factory=StartOptions)
    timings: bool = True
    """Show how long each tool call took (snapshot tests turn this off)."""
    ansi: bool = True
    """Use the terminal's own colours."""


class ConversationView(VerticalScroll):
    """The scrolling conversation; it stays at the bottom unless the person scrolls up."""

    DEFAULT_CSS = """
    ConversationView { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """


class KestrelApp(App[int]):
    """Kestrel in the whole terminal."""

    TITLE = "Kestrel"
    BINDINGS = [
        Binding("escape", "interrupt", "stop the step", show=False),
        Binding("ctrl+q", "quit_view", "quit", priority=True),
    ]

    def __init__(
        self, store: EventStore, settings: Settings, cwd: Path, options: ViewOptions
    ) -> None:
        super().__init__(ansi_color=options.ansi)
        self.store, self.cwd, self.options = store, cwd, options
        self.driver = SessionDriver(store, settings, cwd, self, options=options.start)
        self.driver.after_step = after_step(self.driver, self)
        self.driver.on_waiting_plan = rejecting(self.driver)
        self.custom: dict[str, CustomCommand] = load_custom(cwd, os.environ, Path.home())
        self.state = SessionState()
        self._context_tokens = 0
        self._followers: set[asyncio.Task[None]] = set()
        self._helpers: set[asyncio.Task[None]] = set()
        self._asking: dict[str, ModalScreen[Any]] = {}
        self._questions: asyncio.Queue[Record] = asyncio.Queue()
        self._replacing: asyncio.Future[None] | None = None
        self.index = RepoIndex()
        self._naming: asyncio.Task[None] | None = None
        self._indexing = 0  # Files the index is still reading.

    def compose(self) -> ComposeResult:
        """The conversation, the prompt, the status line."""
        with ConversationView(id="conversation"):
            yield Transcript(timings=self.options.timings)
        yield CompletionHint(id="completions")
        yield PromptInput(id="prompt")
        yield StatusLine(id="status")

    async def on_mount(self) -> None:
        """Start what the command line asked for, and the helpers that run all along."""
        if self.options.ansi:
            self.theme = "ansi-dark"
        self.conversation.anchor()
        self.prompt_input.focus()
        self.refresh_status()
        self._spawn(self._answer_questions(), helper=True)
        self._spawn(self._list_files(), helper=True)
        self._read_names()
        if self.options.resume is not None:
            self._spawn(self.resume_session(self.options.resume), helper=True)
        elif self.options.task:
            self.driver.submit(self.options.task)

    @property
    def conversation(self) -> ConversationView:
        """The scrolling conversation."""
        return self.query_one("#conversation", ConversationView)

    @property
    def prompt_input(self) -> PromptInput:
        """The prompt."""
        return self.query_one("#prompt", PromptInput)

    @property
    def transcript(self) -> Transcript:
        """The current session's transcript."""
        return self.conversation.query_one(Transcript)

    # What the driver tells the view.

    def follow(self, session_id: str, after_seq: int) -> None:
        """Show the session's records from `after_seq` on, in a fresh conversation."""
        transcript = self.clear_view()
        self._spawn(self._show(session_id, after_seq, transcript, top=True))

    def clear_view(self) -> Transcript:
        """Stop following logs and start an empty conversation."""
        for task in self._followers:
            task.cancel()
        self._followers.clear()
        self.state = SessionState()
        self._context_tokens = 0
        transcript = Transcript(timings=self.options.timings)
        self._replacing = asyncio.ensure_future(self._replace(transcript))
        self.refresh_status()
        return transcript

    def notice(self, text: str, *, error: bool = False) -> None:
        """A line in the conversation that is not in the log."""
        self._spawn(self._mount(Notice(text, "error" if error else "warning")), helper=True)

    def busy_changed(self) -> None:
        """Redraw the status line; after a step, read the names `@` completes again."""
        self.refresh_status()
        if not self.driver.busy:
            self._read_names()

    # What the driver's steps ask the person (the `Reviewer`).

    async def plan(self, plan: PlanProposed) -> PlanAnswer | None:
        """Approve, edit or reject the plan."""
        return await self.ask(PlanScreen(plan))

    async def change(self, ready: ChangesReady, diff: str) -> ChangeAnswer:
        """Apply, later, or reject the change."""
        return await self.ask(ChangeScreen(ready, diff))

    async def ask(self, screen: ModalScreen[T]) -> T:
        """Show a dialog and wait for its answer."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def settle(result: T | None) -> None:
            if not done.done():
                done.set_result(result)  # type: ignore[arg-type]

        await self.push_screen(screen, callback=settle)
        return await done

    # The person's input.

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        """A message, or a command."""
        text = message.text
        if text.startswith("!"):
            slash.run_shell(self, text)
            return
        if parse_slash(text) is not None:
            # Alongside: a command may wait on a dialog, which needs this handler to return.
            self._spawn(slash.run(self, text), helper=True)
            return
        if self.driver.busy:
            await self._mount(UserLine(text, queued=True))
        slash.send(self, text)
        self.refresh_status()

    def on_prompt_input_completions(self, message: PromptInput.Completions) -> None:
        """List the `@` candidates above the prompt, or hide the list."""
        self.query_one("#completions", CompletionHint).show(message.labels, message.at)

    def action_interrupt(self) -> None:
        """Esc: stop the running step (through the log)."""
        if self.driver.cancel():
            self.notice("Stopping…")

    async def action_quit_view(self) -> None:
        """Stop a running step, then leave."""
        await self.driver.stop()
        self.exit(0)

    async def resume_session(self, session_id: str) -> None:
        """Show an earlier session and take it up."""
        try:
            await self.driver.resume(session_id)
        except KestrelError as exc:
            self.notice(str(exc), error=True)

    # Following logs.

    async def _replace(self, transcript: Transcript) -> None:
        await self.conversation.remove_children()
        await self.conversation.mount(transcript)
        self.conversation.anchor()

    async def _show(self, session_id: str, after: int, transcript: Transcript, top: bool) -> None:
        if top:
            assert self._replacing is not None
            await self._replacing  # The conversation is cleared and the transcript mounted.
        async for batch in batches(self.store, session_id, after):
            for record in batch:
                child = await transcript.render_record(record)
                started = record.event
                if child is not None and isinstance(started, SubagentStarted):
                    self._spawn(self._show(started.child_session_id, 0, child, top=False))
                self._route(record, top)
            await transcript.flush()

    def _route(self, record: Record, top: bool) -> None:
        event = record.event
        if isinstance(event, ApprovalRequested):
            self._questions.put_nowait(record)
        elif isinstance(event, ApprovalDecided) and event.call_id in self._asking:
            self._asking.pop(event.call_id).dismiss(None)
        if top:
            apply(self.state, record)
            if isinstance(event, ModelCompleted):
                self._context_tokens = event.usage.total_input_tokens
            self.refresh_status()

    async def _answer_questions(self) -> None:
        """Put each permission question to the person, one at a time."""
        while True:
            record = await self._questions.get()
            question = record.event
            assert isinstance(question, ApprovalRequested)
            if not _still_open(self.store, record):
                continue
            screen = ApprovalScreen(question)
            self._asking[question.call_id] = screen
            answer: ApprovalAnswer | None = await self.ask(screen)
            self._asking.pop(question.call_id, None)
            if answer is None:
                continue  # Answered elsewhere first.
            with contextlib.suppress(NoSuchApproval):
                answer_approval(
                    self.store,
                    record.session_id,
                    allow=answer.allow,
                    call_id=question.call_id,
                    scope=answer.scope,
                    message=answer.message,
                    by=BY,
                )

    async def _list_files(self) -> None:
        entries = await asyncio.to_thread(list_files, self.cwd)
        self.prompt_input.files = [e.path for e in entries]

    def _read_names(self) -> None:
        if self._naming is None or self._naming.done():
            self._naming = asyncio.ensure_future(self._names())

    async def _names(self) -> None:
        """The definitions `@` completes, from the index (read again while it is built)."""
        root = self.driver.cwd
        try:
            while True:
                names = await self.index.names(root)
                with contextlib.suppress(NoMatches):
                    self.prompt_input.symbols = names.symbols
                if names.pending != self._indexing:
                    self._indexing = names.pending
                    self.refresh_status()
                if not names.pending:
                    return
                await asyncio.sleep(NAMES_AGAIN_S)
        except Exception:  # Completion then offers file names only; the session is unharmed.
            logger.warning("the index could not be read for completion", exc_info=True)

    async def on_unmount(self) -> None:
        """Let go of the index."""
        if self._naming is not None:
            self._naming.cancel()
        await asyncio.to_thread(self.index.close)

    def refresh_status(self) -> None:
        """Redraw the status line from the folded log, the settings and the driver."""
        settings = self.driver.settings
        run = self.driver.run
        limits = (run.loop.config.limits if run is not None else None) or self.state.limits
        window = settings.compaction.window_tokens if settings.compaction.enabled else None
        facts = StatusFacts(
            model=self.state.model or settings.model,
            mode=self.driver.mode or self.state.permission_mode or settings.permission_mode,
            sandbox=settings.sandbox,
            totals=self.state.totals,
            limits=limits,
            context_tokens=self._context_tokens,
            window_tokens=window,
            busy=self.driver.busy,
            queued=len(self.driver.queue),
            indexing=self._indexing,
        )
        with contextlib.suppress(NoMatches):  # Before the first compose, nothing to draw on.
            self.query_one("#status", StatusLine).show(facts)

    async def _mount(self, widget: Notice | UserLine) -> None:
        if self._replacing is not None:
            await self._replacing  # Not into a conversation being taken down.
        with contextlib.suppress(NoMatches):  # The view is closing.
            await self.transcript.mount(widget)

    def _spawn(self, work: Any, *, helper: bool = False) -> None:
        """Run `work` alongside; a follower of a log stops when another session is shown."""
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        tasks = self._helpers if helper else self._followers
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(self._report)

    def _report(self, task: asyncio.Task[None]) -> None:
        """Say what went wrong in work done alongside (a command, a follower of a log)."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        if isinstance(exc, KestrelError):
            self.notice(str(exc), error=True)
            return
        logger.error("the view's work failed", exc_info=exc)
        self.notice(f"{type(exc).__name__}: {exc}", error=True)


def _still_open(store: EventStore, record: Record) -> bool:
    """Whether nobody has answered the question `record` asks yet."""
    question = record.event
    assert isinstance(question, ApprovalRequested)
    return not any(
        isinstance(r.event, ApprovalDecided) and r.event.call_id == question.call_id
        for r in store.read(record.session_id, record.seq)
    )
