"""`kestrel serve` in cluster mode: a stateless API over the cluster's PostgreSQL database.

Everything a server knows is in the database every server shares: the event log, the server's
tables (`sql_pg`) and the durable queue. A session's run is not started here: it is put on the
cluster's queue (`kestrel.cluster.submit`) with the plan's tier and the tenant as partition, and
a `kestrel worker` runs it, moving the session from queued to running and back to idle in the
registry as this server's pool would (`kestrel.cluster.runs`).

Each run the server queues has an id of its own, `SESSION:SEQ-RANDOM`, kept in the registry with
the session's status in the same statement, so a run withdrawn and asked for again is a new one,
and a worker handed a run that was withdrawn meanwhile finds the registry moved on and does not
run it. Any server may withdraw a queued run (the registry's claim, then the engine's cancel)
or stop a running one (a `cancel_requested` event, which the session's process watches for from
the moment the run was asked for, wherever it runs).

Every server also reconciles, every few seconds, what the registry and the queue say: a session
marked queued whose run never reached the queue (the queue's tables did not exist yet, or the
server died in between) is queued again under the same id, which the engine takes once; a
session whose run ended without its worker saying so (an error before the session's process
ran) is made idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kestrel.protocol.events import CancelRequested
from kestrel.server.interfaces import HostedLog
from kestrel.server.registry import Hosted, Registry, Status
from kestrel.server.sql import Tx

if TYPE_CHECKING:
    from kestrel.cluster.submit import Cluster

logger = logging.getLogger(__name__)

ENDED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""The engine's statuses of a run that will not run again."""
GRACE_S = 5.0
"""How long a queued or running session is left alone before reconciling it: a run just asked
for may not be on the queue yet, one just ended may not have said so yet."""


@dataclass(slots=True)
class ClusterRuns:
    """Queues hosted sessions' runs on the cluster's durable queue (a `SessionRuns`)."""

    registry: Registry
    store: HostedLog
    cluster: Cluster
    reconcile_s: float = 2.0
    _task: asyncio.Task[None] | None = field(default=None)

    def start(self) -> None:
        """Start reconciling the registry with the queue (in the running event loop)."""
        self._task = asyncio.create_task(self._reconcile_forever())

    def workers(self) -> int:
        """The workers whose heartbeat is fresh (none before the first one started)."""
        from kestrel.cluster.liveness import DEAD_AFTER_S

        def count(tx: Tx) -> int:
            if tx.execute("SELECT to_regclass('public.kestrel_executors')").one() == (None,):
                return 0
            found = tx.execute(
                "SELECT count(*) FROM public.kestrel_executors"
                " WHERE beat_at > now() - %s * interval '1 second'",
                (DEAD_AFTER_S,),
            ).one()
            return int(str(found[0])) if found else 0

        return int(self.registry.database.read(count))

    async def stop(self, grace_s: float = 20.0) -> None:
        """Stop reconciling; runs go on on the workers."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self.cluster.close)

    def submit(
        self, hosted: Hosted, message: str | None = None, *, only_if: Status | None = None
    ) -> bool:
        """Mark the session queued with a new run (if it is in `only_if`), then queue that run;
        False when the session was not in `only_if`. A run the queue refuses now stays queued
        in the registry and is queued again by the reconciler."""
        sid = hosted.session_id
        mark = self.store.last_seqs([sid]).get(sid, 0)
        run_id = f"{sid}:{mark}-{secrets.token_hex(4)}"
        if not self.registry.claim(
            sid, only_if, "queued", next_message=message, sent_after=mark, run_id=run_id
        ):
            return False
        self._enqueue(hosted, message, mark, run_id)
        return True

    def _enqueue(self, hosted: Hosted, message: str | None, mark: int, run_id: str) -> bool:
        from kestrel.cluster.runs import RunRequest

        run = RunRequest(
            session_id=hosted.session_id,
            tenant=hosted.tenant_id,
            checkout=str(hosted.checkout),
            message=message,
            mark=mark,
        )
        try:
            self.cluster.submit(run, tier=hosted.tier, workflow_id=run_id)
        except Exception as exc:  # The engine's client raises its own errors; retried later.
            logger.warning("run %s is not on the queue yet (%s); trying again", run_id, exc)
            return False
        return True

    async def withdraw(self, session_id: str) -> bool:
        """Take a queued session off the queue, from any server; False when it is not queued
        (a worker took it first)."""
        hosted = await asyncio.to_thread(self.registry.find, session_id)
        if hosted is None or hosted.status != "queued":
            return False
        if not await asyncio.to_thread(self.registry.claim, session_id, "queued", "idle"):
            return False
        if hosted.run_id is not None:
            await asyncio.to_thread(self._cancel, hosted.run_id)
        return True

    def _cancel(self, run_id: str) -> None:
        try:
            self.cluster.cancel(run_id)
        except Exception as exc:  # The registry said idle first: a worker will not run it.
            logger.warning("could not take run %s off the queue: %s", run_id, exc)

    async def terminate(self, session_id: str) -> bool:
        """Stop a run whose process has not logged its start yet, on whichever worker: a
        `cancel_requested` event, which the process watches for from when its run was asked
        for. False when the session does not run."""
        hosted = await asyncio.to_thread(self.registry.find, session_id)
        if hosted is None or hosted.status != "running":
            return False
        stop = CancelRequested(by="api", reason="cancelled while its run was starting")
        await asyncio.to_thread(self.store.append, session_id, stop)
        return True

    async def _reconcile_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reconcile_s)
            try:
                await asyncio.to_thread(self.reconcile)
            except Exception as exc:  # The database away, or the engine's client's own errors.
                logger.warning("reconciling the registry with the queue: %s", exc)

    def reconcile(self, now: float | None = None) -> tuple[int, int]:
        """Queue again what never reached the queue, settle what ended unsaid; (queued again,
        settled)."""
        now = time.time() if now is None else now
        rows = [h for h in self.registry.unfinished() if h.run_id and now - h.updated_at >= GRACE_S]
        if not rows:
            return 0, 0
        states = self.cluster.states([h.run_id for h in rows if h.run_id])
        queued = settled = 0
        for hosted in rows:
            assert hosted.run_id is not None
            state = states.get(hosted.run_id)
            if state is None and hosted.status == "queued":
                mark = hosted.sent_after or 0
                queued += self._enqueue(hosted, hosted.next_message, mark, hosted.run_id)
            elif state in ENDED:
                settled += self.registry.settle(hosted.session_id, hosted.run_id)
        return queued, settled
