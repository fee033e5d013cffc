"""A server process's follower, for the fan-out tests: follows one session with a fan-out that
only Redis can wake (the log is read to catch up, never polled) and prints each record's number,
then how often it read the log.

    python follow_child.py REDIS_URL PREFIX LOG_DB SESSION COUNT
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fanout_kit import CountingLog, carried_fanout

from kestrel.redis_link import RedisLink
from kestrel.store.sqlite import SQLiteStore


async def follow(url: str, prefix: str, db: Path, session_id: str, count: int) -> None:
    log = CountingLog(SQLiteStore(db))
    fanout = carried_fanout(log, RedisLink(url, prefix))
    fanout.start()
    seen = 0
    async for record in fanout.follow(session_id, 0):
        print(f"seq {record.seq}", flush=True)
        seen += 1
        if seen == count:
            break
    await fanout.stop()
    print(f"reads {log.reads}", flush=True)
    log.inner.close()


if __name__ == "__main__":
    url, prefix, db, session_id, count = sys.argv[1:6]
    asyncio.run(follow(url, prefix, Path(db), session_id, int(count)))
