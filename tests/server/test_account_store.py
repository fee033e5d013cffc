"""The account store on real SQLite files: tenants, users, tokens, and what is never stored."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from kestrel.protocol.errors import KestrelError
from kestrel.server.accounts import (
    SCHEMA_VERSION,
    AccountError,
    AccountSchemaError,
    AccountStore,
    AccountStoreError,
    InvalidAccountValue,
    Principal,
    UnknownTenant,
    UnknownToken,
    UnknownUser,
)


class Clock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AccountStore]:
    """A fresh store in a real file (its folder made on open), closed at the end of the test."""
    with AccountStore(tmp_path / "accounts" / "accounts.db", clock=Clock()) as opened:
        yield opened


def raw_connect(path: Path) -> closing[sqlite3.Connection]:
    """A plain connection to the file, autocommitting, closed when the block ends."""
    return closing(sqlite3.connect(path, isolation_level=None))


def test_a_token_authenticates_as_its_user_tenant_and_plan(store: AccountStore) -> None:
    tenant = store.create_tenant("Acme", "pro")
    user = store.create_user(tenant.id, "ada", "admin")
    issued = store.create_token(user.id, label="laptop")

    principal = store.authenticate(issued.secret)

    assert principal == Principal(
        tenant_id=tenant.id, user_id=user.id, role="admin", token_id=issued.token.id, plan="pro"
    )
    assert issued.secret.startswith("ks_") and len(issued.secret) == 46
    assert issued.secret.startswith(issued.token.prefix) and len(issued.token.prefix) == 9
    assert issued.token.id not in issued.secret
    assert issued.secret not in repr(issued)
    assert store.tenant(tenant.id) == tenant


def test_ids_are_random_and_distinct(store: AccountStore) -> None:
    tenants = [store.create_tenant(f"t{i}", "free") for i in range(20)]
    ids = [t.id for t in tenants]
    assert len(set(ids)) == 20
    assert all(i.startswith("ten_") and len(i) == len("ten_") + 16 for i in ids)
    assert sorted(ids) != ids or sorted(ids, reverse=True) != ids


def test_a_revoked_token_no_longer_authenticates(store: AccountStore) -> None:
    user = store.create_user(store.create_tenant("Acme", "free").id, "bob", "member")
    kept = store.create_token(user.id)
    revoked = store.create_token(user.id)

    store.revoke_token(revoked.token.id)
    store.revoke_token(revoked.token.id)  # again: nothing changes

    assert store.authenticate(revoked.secret) is None
    assert store.authenticate(kept.secret) is not None
    listed = {t.id: t for t in store.tokens(user.tenant_id)}
    assert listed[revoked.token.id].revoked and not listed[kept.token.id].revoked


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "ks_",
        "ks_short",
        "xx_" + "a" * 43,
        "ks_" + "a" * 42,
        "ks_" + "a" * 44,
        "ks_" + "a" * 42 + "!",
        "ks_" + "a" * 42 + "\n",
        " ks_" + "a" * 43,
        "ks_" + "é" * 43,
    ],
)
def test_malformed_and_unknown_secrets_authenticate_nobody(
    store: AccountStore, secret: str
) -> None:
    store.create_token(store.create_user(store.create_tenant("A", "free").id, "u", "member").id)
    assert store.authenticate(secret) is None


def test_a_well_formed_but_unknown_secret_authenticates_nobody(store: AccountStore) -> None:
    user = store.create_user(store.create_tenant("A", "free").id, "u", "member")
    issued = store.create_token(user.id)
    forged = issued.secret[:-1] + ("A" if issued.secret[-1] != "A" else "B")
    assert store.authenticate(forged) is None
    assert store.authenticate(None) is None  # type: ignore[arg-type]


def test_the_secret_is_never_stored(tmp_path: Path) -> None:
    path = tmp_path / "accounts.db"
    store = AccountStore(path)
    user = store.create_user(store.create_tenant("Acme", "free").id, "ada", "admin")
    issued = store.create_token(user.id, label="findable-label")
    random_part = issued.secret.removeprefix("ks_")

    # WAL mode: fresh rows may sit in the -wal file, so every file of the database is read.
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith(path.name))
    assert b"findable-label" in raw  # the token's row is in what was read
    assert random_part.encode() not in raw
    assert random_part[10:30].encode() not in raw
    assert issued.secret.encode() not in raw
    store.close()


def test_unknown_ids_are_errors_of_their_own_type(store: AccountStore) -> None:
    with pytest.raises(UnknownTenant):
        store.create_user("ten_nope", "ada", "admin")
    with pytest.raises(UnknownTenant):
        store.tokens("ten_nope")
    with pytest.raises(UnknownTenant):
        store.tenant("ten_nope")
    with pytest.raises(UnknownTenant):
        store.set_plan("ten_nope", "pro")
    with pytest.raises(UnknownUser):
        store.create_token("usr_nope")
    with pytest.raises(UnknownToken):
        store.revoke_token("tok_nope")
    assert issubclass(UnknownTenant, LookupError) and issubclass(UnknownTenant, KestrelError)


def test_a_tenant_cannot_see_or_revoke_another_tenants_tokens(store: AccountStore) -> None:
    acme = store.create_tenant("Acme", "pro")
    globex = store.create_tenant("Globex", "pro")
    acme_token = store.create_token(store.create_user(acme.id, "ada", "admin").id)
    globex_token = store.create_token(store.create_user(globex.id, "hank", "admin").id)

    with pytest.raises(UnknownToken):
        store.revoke_token(acme_token.token.id, tenant_id=globex.id)

    assert store.authenticate(acme_token.secret) is not None
    assert [t.id for t in store.tokens(acme.id)] == [acme_token.token.id]
    assert [t.id for t in store.tokens(globex.id)] == [globex_token.token.id]
    store.revoke_token(acme_token.token.id, tenant_id=acme.id)
    assert store.authenticate(acme_token.secret) is None


def test_a_new_plan_applies_to_existing_tokens(store: AccountStore) -> None:
    tenant = store.create_tenant("Acme", "free")
    issued = store.create_token(store.create_user(tenant.id, "ada", "member").id)

    moved = store.set_plan(tenant.id, "team")

    assert moved.plan == "team" and store.tenant(tenant.id).plan == "team"
    principal = store.authenticate(issued.secret)
    assert principal is not None and principal.plan == "team"


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, "evil\nname", "bell\x07"])
def test_bad_names_are_refused(store: AccountStore, name: str) -> None:
    with pytest.raises(InvalidAccountValue):
        store.create_tenant(name, "free")
    tenant = store.create_tenant("ok", "free")
    with pytest.raises(InvalidAccountValue):
        store.create_user(tenant.id, name, "member")
    with pytest.raises(InvalidAccountValue):
        store.set_plan(tenant.id, name)


def test_names_are_trimmed_and_a_hundred_characters_are_fine(store: AccountStore) -> None:
    tenant = store.create_tenant("  Acme  ", "x" * 100)
    assert tenant.name == "Acme" and store.tenant(tenant.id).plan == "x" * 100
    user = store.create_user(tenant.id, "y" * 100, "member")
    with pytest.raises(InvalidAccountValue):
        store.create_token(user.id, label="z" * 101)
    assert store.create_token(user.id).token.label == ""


def test_an_unknown_role_is_refused(store: AccountStore) -> None:
    tenant = store.create_tenant("Acme", "free")
    with pytest.raises(InvalidAccountValue, match="role"):
        store.create_user(tenant.id, "ada", "owner")  # type: ignore[arg-type]
    assert issubclass(InvalidAccountValue, ValueError)
    assert issubclass(InvalidAccountValue, AccountError)


def test_tokens_are_issued_safely_from_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "accounts.db"
    shared = AccountStore(path)
    second = AccountStore(path)  # another connection to the file, as another process would be
    user = shared.create_user(shared.create_tenant("Acme", "pro").id, "ada", "admin")
    secrets: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def issue(store: AccountStore) -> None:
        try:
            start.wait()
            for _ in range(15):
                secrets.append(store.create_token(user.id).secret)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=issue, args=(s,)) for s in [shared, second] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(set(secrets)) == 120
    assert len(shared.tokens(user.tenant_id)) == 120
    assert all(second.authenticate(secret) is not None for secret in secrets)
    shared.close()
    second.close()


def test_the_database_is_in_wal_mode_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "accounts.db"
    with AccountStore(path) as store:
        tenant = store.create_tenant("Acme", "free")
    with AccountStore(path) as again:
        assert again.tenant(tenant.id) == tenant
    with raw_connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_newer_schema_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "accounts.db"
    AccountStore(path).close()
    with raw_connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(AccountSchemaError, match="upgrade Kestrel"):
        AccountStore(path)


def test_another_sqlite_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with raw_connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(AccountSchemaError, match="not a Kestrel account database"):
        AccountStore(path)
    with raw_connect(path) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
        assert tables == ["notes"]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "accounts.db"
    path.write_bytes(b"this is not a database, just some text " * 100)
    with pytest.raises(AccountStoreError):
        AccountStore(path)
