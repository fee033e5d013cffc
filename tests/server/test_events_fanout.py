"""One poll wakes every stream whose session's log grew, whoever appended to it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kestrel.protocol.events import SessionStarted, UserMessage
from kestrel.service.events import Fanout
from kestrel.store.sqlite import SQLiteStore


async def test_streams_get_events_appended_by_another_writer(tmp_path: Path) -> None:
    reader = SQLiteStore(tmp_path / "log.db")
    writer = SQLiteStore(tmp_path / "log.db")  # As a session's own process would.
    for sid in ("a", "b"):
        writer.append(sid, SessionStarted(session_id=sid, task="t", cwd="/", model="m"))
    fanout = Fanout(reader, poll_s=0.01)
    fanout.start()
    try:

        async def take(sid: str, count: int) -> list[int]:
            got: list[int] = []
            async for record in fanout.follow(sid, 0):
                got.append(record.seq)
                if len(got) == count:
                    return got
            return got

        first_a, second_a, only_b = (
            asyncio.create_task(take("a", 3)),
            asyncio.create_task(take("a", 3)),
            asyncio.create_task(take("b", 2)),
        )
        await asyncio.sleep(0.05)
        for text in ("one", "two"):
            writer.append("a", UserMessage(text=text))
        writer.append("b", UserMessage(text="three"))
        results = await asyncio.wait_for(asyncio.gather(first_a, second_a, only_b), 10)
        assert results == [[1, 2, 3], [1, 2, 3], [1, 2]]
        assert reader.last_seqs(["a", "b", "missing"]) == {"a": 3, "b": 2}
    finally:
        await fanout.stop()
        reader.close()
        writer.close()
