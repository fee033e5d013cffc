"""The event log as the live streams follow it in cluster mode: a database that went away
pauses the streams instead of ending the fan-out.

The fan-out (`kestrel.service.events.Fanout`) polls the last event number of every followed
session and reads their new records from the log, which every process on every machine writes:
a session run by a worker behind another server reaches this server's followers through the
database itself. While PostgreSQL cannot be reached the poll finds nothing new (said once in the
server's log) and the streams wait; once it is back the poll sees how far each session went and
the streams read on from where they were, losing nothing. A stream's own read that fails ends
that stream, and the client reconnects with its last event id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from kestrel.protocol.errors import StoreError
from kestrel.protocol.events import Record
from kestrel.server.interfaces import HostedLog
from kestrel.store.redis_publish import Publisher, PublishingStore

logger = logging.getLogger(__name__)


class OutageTolerant:
    """The log, with its poll for new events quiet through an outage (a `FollowedLog`)."""

    def __init__(self, log: HostedLog) -> None:
        self._log = log
        self._down = False

    def read(self, session_id: str, after_seq: int = 0) -> Sequence[Record]:
        """The session's records after `after_seq` (a fault is raised: it ends one stream)."""
        return self._log.read(session_id, after_seq)

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The last event number of each session; none while the database is away."""
        try:
            found = self._log.last_seqs(session_ids)
        except StoreError as exc:
            if not self._down:
                logger.warning("live events wait for the database: %s", exc)
            self._down = True
            return {}
        if self._down:
            logger.warning("live events go on: the database is back")
        self._down = False
        return found


class PublishedLog(PublishingStore):
    """The server's own log, publishing what the server itself appends (a session's start and
    task, messages, answers, cancels) to Redis as a session's process does, so that followers
    behind other servers see them at once rather than at their next poll of the log."""

    def __init__(self, log: HostedLog, publisher: Publisher) -> None:
        super().__init__(log, publisher)
        self._log = log

    def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The last event number of each named session that has any."""
        return self._log.last_seqs(session_ids)


def published(log: HostedLog, env: Mapping[str, str]) -> HostedLog:
    """`log`, publishing its appends when `KESTREL_REDIS_URL` names a Redis."""
    url = env.get("KESTREL_REDIS_URL", "").strip()
    if not url or url.lower() == "none":
        return log
    from kestrel.redis_link import DEFAULT_PREFIX, RedisLink

    link = RedisLink(url, env.get("KESTREL_REDIS_PREFIX") or DEFAULT_PREFIX)
    return PublishedLog(log, Publisher(link))
