"""A PostgreSQL server that goes away mid-run is waited for: appends and reads pause and go on
once it is back, with nothing written twice; one never reached fails at once."""

from __future__ import annotations

import threading

import pytest
from store_helpers import started
from tcp_proxy import Relay, via

from kestrel.protocol.events import UserMessage
from kestrel.store.postgres import PostgresStore
from kestrel.store.postgres_faults import StoreUnavailable


def test_an_append_waits_through_an_outage_and_lands_once(relay: Relay, pg_url: str) -> None:
    with PostgresStore(via(relay, pg_url), connect_timeout_s=1, outage_wait_s=120) as store:
        session_id = "s"
        store.append(session_id, started(session_id))
        store.append(session_id, UserMessage(text="before"))
        relay.down()
        back = threading.Timer(3.0, relay.up)
        back.start()
        try:
            store.append(session_id, UserMessage(text="during"))  # Waits for the relay.
        finally:
            back.join()
        store.append(session_id, UserMessage(text="after"))
        records = store.read(session_id)
    said = [r.event.text for r in records if isinstance(r.event, UserMessage)]
    assert said == ["before", "during", "after"]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))


def test_an_outage_longer_than_the_wait_fails_with_one_clear_error(
    relay: Relay, pg_url: str
) -> None:
    with PostgresStore(via(relay, pg_url), connect_timeout_s=1, outage_wait_s=1) as store:
        session_id = "s"
        store.append(session_id, started(session_id))
        relay.down()
        with pytest.raises(StoreUnavailable, match=r"cannot reach|lost the connection"):
            store.append(session_id, UserMessage(text="lost?"))
        relay.up()
        store.append(session_id, UserMessage(text="later"))  # The same store goes on.
        said = [r.event for r in store.read(session_id) if isinstance(r.event, UserMessage)]
    assert [e.text for e in said] == ["later"]


def test_a_server_never_reached_is_not_waited_for(relay: Relay) -> None:
    relay.down()
    url = f"postgresql://kestrel@127.0.0.1:{relay.port}/kestrel"
    # Were it waited for, this would take the ten minutes it allows, not fail at once.
    with pytest.raises(StoreUnavailable, match="cannot reach"):
        PostgresStore(url, connect_timeout_s=1, outage_wait_s=600)
