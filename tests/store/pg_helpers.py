"""A freshly created PostgreSQL database per test, on the loopback server, dropped afterwards.

The server is `KESTREL_TEST_POSTGRES` (a libpq URL of a database to connect to while creating
and dropping others), by default the local one on port 5432 as user `postgres`. Tests that need
it are skipped when no server answers there.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

ADMIN_URL = os.environ.get("KESTREL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> Any:
    psycopg = pytest.importorskip("psycopg")
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server to test against: {exc}")


def url_of(database: str) -> str:
    """The `postgresql://` URL of `database` on the test server."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(ADMIN_URL)
    user = quote(str(parts.get("user") or ""), safe="")
    if parts.get("password"):
        user += ":" + quote(str(parts["password"]), safe="")
    host = str(parts.get("host") or "")
    if host.startswith("/"):
        return f"postgresql://{user}@/{database}?host={quote(host, safe='/')}"
    return f"postgresql://{user}@{host or '127.0.0.1'}:{parts.get('port') or 5432}/{database}"


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped (with anything still connected) afterwards."""
    admin = _admin()
    name = f"kestrel_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            yield url_of(name)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def cut_connections(url: str) -> int:
    """End every server process connected to the database of `url` (and no other database),
    as a server restart would; how many there were."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    database = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)
