"""The hosted mode's pull requests: what `kestrel pr` and `kestrel pr sync` do, for hosted
sessions, and the job that syncs every open pull request on its own.

Opening pushes the session's change with the server's forge token and opens the pull request
on the repository the session was cloned from (a request may name the base and the branch,
never the remote or the repository). A sync reads the review: new comments and failed checks
become one follow-up message, queued through the worker pool like any follow-up; once that run
is over, the job pushes the fix, answers the comments and records the round in the session's
log (`pull_request_synced`). The token stays in the server's process, which runs the pushes
and the forge's API calls; the session's process, its sandbox, its events and its log never
get it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kestrel.delivery.branch import DeliveryError
from kestrel.delivery.feedback import Feedback, new_feedback, opened_pull
from kestrel.delivery.forge import ForgeError
from kestrel.delivery.forges import ForgeSettings, make_forge
from kestrel.delivery.pull import PullOptions, answer_feedback, open_pull
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import PullRequestOpened, SessionFinished, UserMessage
from kestrel.server.accounts import Principal
from kestrel.server.hosting import Hosting, Refusal
from kestrel.server.pull_store import PullStore, Watched
from kestrel.server.registry import Hosted

_log = logging.getLogger("kestrel.server")
ADVICE = (
    "Fix it with a follow-up message, or open the pull request anyway with "
    '"accept_security_findings": true'
)
_BRANCH = re.compile(r"kestrel/[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")
SyncState = Literal["nothing_new", "following_up"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenRequest:
    """How a tenant asks for its session's pull request."""

    base: str | None = None
    branch: str | None = None
    draft: bool = False
    accept_security_findings: bool = False


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """What a sync did: nothing new, or the feedback sent to the session as a follow-up."""

    state: SyncState
    feedback: Feedback | None = None


@dataclass(slots=True)
class PullRequests:
    """Open, sync and watch the pull requests of a server's hosted sessions."""

    host: Hosting
    forge: ForgeSettings
    tick_s: float = 1.0
    clock: Callable[[], float] = time.time
    pulls: PullStore = field(init=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _locks_lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _wake: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.pulls = PullStore(self.host.shared or self.host.config.data_dir / "pulls.db")

    def close(self) -> None:
        """Close the table of watched pull requests."""
        self.pulls.close()

    def watched(self, who: Principal, session_id: str) -> Watched:
        """The tenant's session's pull request as the server watches it; 404 for none."""
        self.host.session(who, session_id)
        found = self.pulls.get(who.tenant_id, session_id)
        if found is None:
            raise Refusal(404, f"session {session_id} has no pull request")
        return found

    def open(self, who: Principal, session_id: str, request: OpenRequest) -> PullRequestOpened:
        """Push the session's change and open its pull request (blocking)."""
        hosted = self.host.session(who, session_id)
        self._need_token()
        if request.branch is not None and not _BRANCH.fullmatch(request.branch):
            raise Refusal(400, "branch must be kestrel/NAME (letters, digits, '.', '_', '-', '/')")
        if hosted.status != "idle":
            raise Refusal(409, f"session {session_id} is {hosted.status}; open it when it stops")
        options = self._options(request)
        with self._only(session_id), _delivering():
            opened = open_pull(self.host.store, self._data, session_id, options, self.forge.token)
        self.pulls.add(session_id, who.tenant_id, opened.number, self._next_look())
        return opened

    def sync(self, who: Principal, session_id: str) -> SyncOutcome:
        """Look at the review now: new feedback is sent to the session (blocking)."""
        hosted = self.host.session(who, session_id)
        watched = self.watched(who, session_id)
        self._need_token()
        if watched.round is not None:
            raise Refusal(409, "the session is running a follow-up for the review already")
        if hosted.status != "idle":
            raise Refusal(409, f"session {session_id} is {hosted.status}; sync it when it stops")
        with self._only(session_id), _delivering():
            return self._sync(hosted, watched)

    def _sync(self, hosted: Hosted, watched: Watched) -> SyncOutcome:
        """Read the review; queue the follow-up for new feedback (under the session's lock)."""
        session_id = hosted.session_id
        events = [record.event for record in self.host.store.read(session_id)]
        opened = opened_pull(events)
        if opened is None:
            raise DeliveryError(f"session {session_id} has no pull request")
        forge = make_forge(self.forge.api_url, self.forge.token, opened.repository)
        try:
            still_open = forge.pull(opened.number).open
            feedback = new_feedback(events, forge) if still_open else None
        finally:
            forge.close()
        if feedback is None:
            self.pulls.look_later(session_id, self._next_look(), still_open=still_open)
            return SyncOutcome("nothing_new")
        mark = self.host.store.last_seqs([session_id]).get(session_id, 0)
        if not self.pulls.start_round(session_id, feedback, mark):
            return SyncOutcome("following_up")
        if not self.host.pool.submit(hosted, feedback.message(), only_if="idle"):
            self.pulls.end_round(session_id, self.clock())  # Nothing was sent: look again.
            raise Refusal(409, f"session {session_id} is busy; sync it when it stops")
        return SyncOutcome("following_up", feedback)

    def _finish(self, watched: Watched) -> None:
        """Once the session ran the follow-up: push its fix, answer the comments, record it."""
        hosted = self.host.registry.get(watched.tenant_id, watched.session_id)
        if hosted is None or watched.round is None:
            self.pulls.end_round(watched.session_id, self._next_look(), "the session is gone")
            return
        if hosted.status != "idle":
            return  # The follow-up is queued or runs.
        why = _not_run(self.host, watched, watched.round.message())
        if why:
            self.pulls.end_round(watched.session_id, self._next_look(), why)
            return
        opened = opened_pull([r.event for r in self.host.store.read(watched.session_id)])
        assert opened is not None  # A round starts only for a session with a pull request.
        forge = make_forge(self.forge.api_url, self.forge.token, opened.repository)
        try:
            answer_feedback(
                self.host.store,
                self._data,
                watched.session_id,
                watched.round,
                self._options(OpenRequest()),
                self.forge.token,
                forge,
            )
        finally:
            forge.close()
        self.pulls.end_round(watched.session_id, self._next_look())

    def start(self) -> None:
        """Start the job: every `tick_s`, finish the rounds whose follow-up ran, and look at the
        review of each open pull request every `forge.sync_every_s` (0: only when asked)."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the job, after the look it is taking (if any)."""
        self._stopping.set()
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.tick_s)
            if self._stopping.is_set():
                break
            try:
                await asyncio.to_thread(self._tick)
            except Exception as exc:  # The job outlives a bad look; the next tick tries again.
                _log.error("the pull request sync job failed: %s", type(exc).__name__)

    def _tick(self) -> None:
        # One server at a time runs the job (in cluster mode, the others skip the tick), so a
        # fix is pushed and a comment answered once.
        with self.host.registry.database.locked("pull-sync", wait=False) as held:
            if held:
                self._tick_held()

    def _tick_held(self) -> None:
        for watched in self.pulls.in_rounds():
            self._guarded(watched, self._finish, failed_round=True)
        if self.forge.sync_every_s <= 0 or not self.forge.token:
            return
        for watched in self.pulls.due(self.clock()):
            self._guarded(watched, self._sync_due, failed_round=False)

    def _sync_due(self, watched: Watched) -> None:
        """The periodic look at one pull request's review, when its session is idle."""
        hosted = self.host.registry.get(watched.tenant_id, watched.session_id)
        if hosted is not None and hosted.status == "idle":
            self._sync(hosted, watched)

    def _guarded(
        self, watched: Watched, work: Callable[[Watched], object], *, failed_round: bool
    ) -> None:
        """Run one job step under the session's lock (skipped while a request holds it); what
        fails is recorded on the pull request, and logged without any secret."""
        if self._stopping.is_set():
            return
        lock = self._lock(watched.session_id)
        if not lock.acquire(blocking=False):
            return
        try:
            work(watched)
        except (KestrelError, Refusal, OSError, sqlite3.Error) as exc:
            said = exc.message if isinstance(exc, Refusal) else str(exc)
            _log.warning("pull request of session %s: %s", watched.session_id, said)
            if failed_round:
                self.pulls.end_round(watched.session_id, self._next_look(), said)
            else:
                self.pulls.look_later(watched.session_id, self._next_look())
        finally:
            lock.release()

    @property
    def _data(self) -> Path:
        return self.host.config.data_dir

    def _options(self, request: OpenRequest) -> PullOptions:
        return PullOptions(
            base=request.base,
            branch=request.branch,
            draft=request.draft,
            api_url=self.forge.api_url,
            accept_security_findings=request.accept_security_findings,
            refusal_advice=ADVICE,
        )

    def _need_token(self) -> None:
        if not self.forge.token:
            raise Refusal(503, "this server has no forge token, so it cannot deliver pull requests")

    def _next_look(self) -> float:
        every = self.forge.sync_every_s
        return self.clock() + every if every > 0 else float("inf")

    def _lock(self, session_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(session_id, threading.Lock())

    @contextlib.contextmanager
    def _only(self, session_id: str) -> Iterator[None]:
        """The session's lock, or 409 while the job or another request holds it."""
        lock = self._lock(session_id)
        if not lock.acquire(blocking=False):
            raise Refusal(409, f"the pull request of session {session_id} is being worked on")
        try:
            yield
        finally:
            lock.release()


@contextlib.contextmanager
def _delivering() -> Iterator[None]:
    """Delivery's errors as the API's answers: 409 for the change or its state, 502 when the
    forge refused or failed."""
    try:
        yield
    except DeliveryError as exc:
        raise Refusal(409, str(exc)) from None
    except ForgeError as exc:
        raise Refusal(502, f"the forge refused: {exc}") from None


def _not_run(host: Hosting, watched: Watched, message: str) -> str:
    """Why the follow-up did not run to its end; '' when it did."""
    records = host.store.read(watched.session_id, watched.round_mark or 0)
    sent = next(
        (
            n
            for n, r in enumerate(records)
            if isinstance(r.event, UserMessage) and r.event.text == message
        ),
        None,
    )
    if sent is None:
        return "the follow-up for the review did not run (was it cancelled?); sync again"
    finished = [r.event for r in records[sent:] if isinstance(r.event, SessionFinished)]
    if not finished:
        return "the follow-up for the review stopped before it finished; sync again"
    if finished[-1].reason != "done":
        detail = f": {finished[-1].detail}" if finished[-1].detail else ""
        ended = f"{finished[-1].reason}{detail}"
        return f"the follow-up for the review ended with {ended}; nothing was pushed"
    return ""
