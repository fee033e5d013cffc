"""The PostgreSQL store when the server is away or its connections end: typed errors naming the
server (never its password), and a store that carries on by itself once the server is back."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psycopg
import pytest
from pg_helpers import cut_connections
from store_helpers import started
from tcp_proxy import Relay, via

from kestrel.protocol.errors import SessionLogLost, StoreError
from kestrel.protocol.events import UserMessage
from kestrel.store.postgres import PostgresStore
from kestrel.store.postgres_faults import SessionBusy, StoreUnavailable


def test_an_unreachable_server_is_named_without_its_password(relay: Relay) -> None:
    relay.down()
    url = f"postgresql://kestrel:s3cret@127.0.0.1:{relay.port}/kestrel"
    with pytest.raises(StoreUnavailable) as caught:
        PostgresStore(url, connect_timeout_s=2)
    message = str(caught.value)
    assert message.startswith(
        f"cannot reach the PostgreSQL event store kestrel at 127.0.0.1:{relay.port}"
    )
    assert "s3cret" not in message and "Connection refused" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_connections_the_server_ends_are_replaced_on_the_next_call(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        store.append("s", started("s"))
        assert store.read("s") and store.listening()
        assert cut_connections(pg_url) == 3  # the writer, the reader and the listener
        assert store.append("s", UserMessage(text="after")).seq == 2
        assert [r.seq for r in store.read("s")] == [1, 2]
        assert store.sessions()[0].events == 2


def test_a_server_gone_fails_each_call_and_back_it_goes_on(relay: Relay, pg_url: str) -> None:
    with PostgresStore(via(relay, pg_url), connect_timeout_s=2) as store:
        store.append("s", started("s"))
        relay.down()
        with pytest.raises(StoreUnavailable, match="PostgreSQL event store") as caught:
            store.append("s", UserMessage(text="lost"))
        assert caught.value.session_id == "s"
        for call in (lambda: store.read("s"), store.sessions, lambda: store.resolve("s")):
            with pytest.raises(StoreUnavailable):
                call()
        relay.up()
        assert store.append("s", UserMessage(text="back")).seq == 2
        assert [r.event for r in store.read("s")][1:] == [UserMessage(text="back")]


async def test_a_follower_catches_up_once_the_server_is_back(relay: Relay, pg_url: str) -> None:
    with (
        PostgresStore(via(relay, pg_url), poll_interval_s=3600) as follower,
        PostgresStore(pg_url) as writer,
    ):
        writer.append("s", started("s"))
        it = follower.subscribe("s", after_seq=1)
        assert await asyncio.to_thread(follower.listening)
        pending = asyncio.ensure_future(anext(it))
        await asyncio.sleep(0.05)
        relay.down()
        writer.append("s", UserMessage(text="while away"))  # no follower hears of this one
        await asyncio.sleep(0.3)
        assert not pending.done()
        relay.up()
        # Polling is all but off: the listener, connected again, wakes the follower.
        record = await asyncio.wait_for(pending, 30)
        assert record.event == UserMessage(text="while away")
        writer.append("s", UserMessage(text="live again"))
        assert (await asyncio.wait_for(anext(it), 30)).seq == 3
        await it.aclose()  # type: ignore[attr-defined]


def test_a_session_held_too_long_by_another_writer_is_refused_whole(pg_url: str) -> None:
    with PostgresStore(pg_url, busy_timeout_s=0.3) as store:
        store.append("s", started("s"))
        with psycopg.connect(pg_url) as other:
            other.execute("SELECT 1 FROM kestrel_sessions WHERE id = 's' FOR UPDATE")
            with pytest.raises(SessionBusy, match="session s is held by another writer") as caught:
                store.append("s", UserMessage(text="waits"))
            assert caught.value.session_id == "s"
        # The other transaction ended with its connection: the session is free again.
        assert store.append("s", UserMessage(text="free")).seq == 2
        assert [r.seq for r in store.read("s")] == [1, 2]


def test_rows_deleted_under_a_writing_store_lose_the_session_loudly(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        store.append("s", started("s"))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM kestrel_events")
            conn.execute("DELETE FROM kestrel_sessions")
        with pytest.raises(SessionLogLost, match="s's log was deleted") as caught:
            store.append("s", UserMessage(text="x"))
        assert caught.value.session_id == "s"


def test_a_database_a_newer_kestrel_wrote_is_refused(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE kestrel_store_version SET version = 99")
    with pytest.raises(StoreError, match=r"schema version 99.*upgrade Kestrel"):
        PostgresStore(pg_url)


def test_without_the_driver_the_extra_to_install_is_named() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from kestrel.protocol.errors import StoreError\n"
        "from kestrel.store.postgres import PostgresStore\n"
        "try:\n    PostgresStore('postgresql://127.0.0.1/x')\n"
        "except StoreError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "kestrel[cluster]" in done.stdout
