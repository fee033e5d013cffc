"""The server's own tables in SQLite and in PostgreSQL, through the same code: the registry's
claim decided once across "machines" (separate connections), tenants kept apart, and a database
that cannot be reached reported as `StoreUnavailable`, as the event log's faults are."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_kit import Relay, fresh_database

from kestrel.delivery.feedback import Feedback
from kestrel.memory_store import MemoryEntryError
from kestrel.protocol.errors import StoreError
from kestrel.server.accounts import AccountSchemaError, AccountStore, UnknownToken
from kestrel.server.memory import HostedMemory
from kestrel.server.pull_store import PullStore
from kestrel.server.registry import Hosted, Registry
from kestrel.server.sql import Database, SQLiteDatabase

pytest.importorskip("psycopg")


@pytest.fixture
def fresh_pg() -> Iterator[str]:
    """A database of the test's own."""
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    """Two handles on one database, as two servers would hold (two connections to one SQLite
    file; two connection pools on one PostgreSQL database of the test's own)."""
    if request.param == "sqlite":
        yield SQLiteDatabase(tmp_path / "one.db"), SQLiteDatabase(tmp_path / "one.db")
        return
    from kestrel.server.sql_pg import PostgresDatabase

    with fresh_database() as url:
        a, b = PostgresDatabase(url), PostgresDatabase(url)
        yield a, b
        a.close()
        b.close()


def _hosted(session_id: str, tenant: str = "acme", status: str = "idle") -> Hosted:
    return Hosted(
        session_id=session_id,
        tenant_id=tenant,
        user_id="u1",
        tier=1,
        checkout=Path("/srv/checkouts") / session_id,
        status=status,  # type: ignore[arg-type]
        next_message=None,
        created_at=time.time(),
    )


def test_the_registry_scopes_by_tenant_and_claims_once(two: tuple[Database, Database]) -> None:
    first, second = Registry(two[0]), Registry(two[1])
    first.add(_hosted("s1"))
    first.add(_hosted("s2", tenant="globex", status="queued"))

    assert second.get("acme", "s1") is not None
    assert second.get("globex", "s1") is None  # Another tenant's is as absent as none.
    assert [h.session_id for h in second.of_tenant("globex")] == ["s2"]
    assert second.counts("globex") == (0, 1)
    assert [h.session_id for h in second.unfinished()] == ["s2"]

    wins: list[bool] = []
    start = threading.Barrier(8)

    def race(registry: Registry, n: int) -> None:
        start.wait()
        wins.append(registry.claim("s1", "idle", "queued", next_message=f"m{n}", run_id=f"r{n}"))

    threads = [
        threading.Thread(target=race, args=(r, n)) for n, r in enumerate([first, second] * 4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]
    queued = first.get("acme", "s1")
    assert queued is not None and queued.status == "queued"
    assert queued.next_message == f"m{queued.run_id and queued.run_id[1:]}"

    assert not second.settle("s1", "some other run")  # Only the run the registry holds.
    assert second.settle("s1", str(queued.run_id))
    idle = first.find("s1")
    assert idle is not None and idle.status == "idle" and idle.next_message is None


def test_memory_and_pull_requests_are_shared_and_kept_apart(
    two: tuple[Database, Database],
) -> None:
    memory, elsewhere = HostedMemory(two[0]), HostedMemory(two[1])
    kept = memory.add("acme", "github.com/acme/shop", "Use httpx.", "by hand")
    assert [e.id for e in elsewhere.entries("acme", "github.com/acme/shop")] == [kept.id]
    assert elsewhere.entries("globex") == []
    with pytest.raises(MemoryEntryError, match="already remembered"):
        elsewhere.add("acme", "github.com/acme/shop", "Use httpx.", "again")
    elsewhere.remember_session("acme", "s1", "github.com/acme/shop")
    elsewhere.remember_session("acme", "s1", "github.com/acme/other")  # Replaced, not added.
    assert memory.repository_of("acme", "s1") == "github.com/acme/other"
    assert memory.repository_of("globex", "s1") == ""
    assert elsewhere.remove("globex", kept.id) is None
    assert elsewhere.remove("acme", kept.id) == kept

    pulls, other = PullStore(two[0]), PullStore(two[1])
    pulls.add("s1", "acme", 7, next_look=10.0)
    assert other.get("globex", "s1") is None
    assert [w.number for w in other.due(11.0)] == [7]
    feedback = Feedback(number=7, comments=(), failed=())
    assert other.start_round("s1", feedback, mark=5)
    assert not pulls.start_round("s1", feedback, mark=6)  # One round at a time, across servers.
    assert [w.round_mark for w in pulls.in_rounds()] == [5]
    pulls.end_round("s1", next_look=20.0, error="x" * 3000)
    watched = other.get("acme", "s1")
    assert watched is not None and watched.round is None and len(watched.error) == 2000
    pulls.add("s1", "acme", 8, next_look=30.0)  # Opened again: the row starts over.
    again = other.get("acme", "s1")
    assert again is not None and (again.number, again.error, again.open) == (8, "", True)


def test_accounts_in_postgresql_are_every_servers(fresh_pg: str) -> None:
    from kestrel.server.sql_pg import PostgresDatabase

    one = AccountStore(PostgresDatabase(fresh_pg))
    two = AccountStore(PostgresDatabase(fresh_pg))  # Another server, its tables already made.
    tenant = one.create_tenant("Acme", "pro")
    ada = one.create_user(tenant.id, "ada", "admin")
    bob = two.create_user(tenant.id, "bob", "member")
    issued = [one.create_token(ada.id, "laptop"), two.create_token(bob.id)]

    assert [u.name for u in two.users(tenant.id)] == ["ada", "bob"]
    assert [t.id for t in one.tokens(tenant.id)] == [i.token.id for i in issued]
    found = two.authenticate(issued[0].secret)
    assert found is not None and (found.user_id, found.plan) == (ada.id, "pro")
    other = two.create_tenant("Globex", "free")
    with pytest.raises(UnknownToken):
        two.revoke_token(issued[0].token.id, tenant_id=other.id)
    one.revoke_token(issued[0].token.id, tenant_id=tenant.id)
    assert two.authenticate(issued[0].secret) is None
    assert one.set_plan(tenant.id, "team").plan == "team"
    assert two.authenticate(issued[1].secret).plan == "team"  # type: ignore[union-attr]
    assert [t.name for t in two.tenants()] == ["Acme", "Globex"]
    one.close()
    two.close()


def test_account_tables_of_a_newer_kestrel_are_refused(fresh_pg: str) -> None:
    import psycopg

    from kestrel.server.sql_pg import PostgresDatabase

    AccountStore(PostgresDatabase(fresh_pg)).close()
    with psycopg.connect(fresh_pg, autocommit=True) as conn:
        conn.execute("UPDATE kestrel_server.schema_versions SET version = version + 1")
    with pytest.raises(AccountSchemaError, match="upgrade Kestrel"):
        AccountStore(PostgresDatabase(fresh_pg))


def test_a_lock_is_held_across_servers(fresh_pg: str) -> None:
    from kestrel.server.sql_pg import PostgresDatabase

    one, two = PostgresDatabase(fresh_pg), PostgresDatabase(fresh_pg)
    with one.locked("admit:acme") as held:
        assert held
        with two.locked("admit:acme", wait=False) as also:
            assert not also
        with two.locked("admit:globex", wait=False) as other:
            assert other
    with two.locked("admit:acme", wait=False) as now:
        assert now
    one.close()
    two.close()


def test_an_unreachable_database_is_store_unavailable(fresh_pg: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from kestrel.server.sql_pg import PostgresDatabase
    from kestrel.store.postgres_faults import StoreUnavailable

    parts = conninfo_to_dict(fresh_pg)
    relay = Relay(str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432))
    relay.up()
    url = fresh_pg.replace(f":{parts.get('port') or 5432}/", f":{relay.port}/")
    db = PostgresDatabase(url, connect_timeout_s=1.0)
    registry, accounts = Registry(db), AccountStore(db)
    registry.add(_hosted("s1"))
    relay.down()
    with pytest.raises(StoreUnavailable, match=r"cannot reach|lost the connection"):
        registry.get("acme", "s1")
    with pytest.raises(StoreUnavailable):
        accounts.authenticate("ks_" + "a" * 43)
    assert issubclass(StoreUnavailable, StoreError)
    relay.up()
    assert registry.get("acme", "s1") is not None  # The same objects work once it is back.
    relay.down()
    db.close()
