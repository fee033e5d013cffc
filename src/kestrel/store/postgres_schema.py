"""The PostgreSQL store's tables, and bringing a database up to them.

The event rows are the SQLite log's: `(session_id, seq, at, type, json)` with the same primary
key and the same JSON text (`sqlite_rows.storable`), so an event reads back identically from
either store. Two columns are added for the events of model calls only, `cost_usd` and
`tokens`, and the session row keeps running totals: the spend queries then never parse JSON in
the database, which PostgreSQL refuses for some text that JSON allows (`\\u0000`, a lone
surrogate escape).

Table names carry a `kestrel_` prefix because a cluster's database is shared with the durable
engine and the account tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.store.postgres_faults import too_new
from kestrel.store.postgres_tombstones import TOMBSTONE_TABLE

if TYPE_CHECKING:
    from kestrel.store.postgres_link import Conn

SCHEMA_VERSION = 1
"""The layout of the tables, kept in `kestrel_store_version`; not the event schema version."""

CHANNEL = "kestrel_events"
"""The LISTEN/NOTIFY channel: each committed append sends `<seq> <session id>` on it."""

_MIGRATE_LOCK = 0x6B657374_72656C31  # "kestrel1": one process migrates at a time

_TABLES = (
    """CREATE TABLE IF NOT EXISTS kestrel_sessions (
        id text COLLATE "C" PRIMARY KEY,
        n bigint GENERATED ALWAYS AS IDENTITY,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        task text NOT NULL,
        cwd text NOT NULL,
        model text NOT NULL,
        status text NOT NULL,
        last_seq bigint NOT NULL,
        parent_session_id text,
        cost_usd double precision NOT NULL DEFAULT 0,
        turns bigint NOT NULL DEFAULT 0,
        cost_known boolean NOT NULL DEFAULT true
    )""",
    """CREATE TABLE IF NOT EXISTS kestrel_events (
        session_id text COLLATE "C" NOT NULL REFERENCES kestrel_sessions (id),
        seq bigint NOT NULL CHECK (seq > 0),
        at double precision NOT NULL,
        type text NOT NULL,
        json text NOT NULL,
        cost_usd double precision,
        tokens bigint,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS kestrel_sessions_by_created"
    " ON kestrel_sessions (created_at DESC, n DESC)",
)
_SPEND_INDEX = (
    # The day's spend: every event a model call made has its cost (turns, and the calls that
    # summarised the conversation or reranked the first context). The first index covered
    # turns only.
    "DROP INDEX IF EXISTS kestrel_events_spend_by_time",
    "CREATE INDEX IF NOT EXISTS kestrel_events_usage_by_time ON kestrel_events (at)"
    " WHERE cost_usd IS NOT NULL",
)


def migrate(conn: Conn, place: str) -> None:
    """Create the tables in an empty database, or check a filled one is not too new for us.

    An advisory lock held for the transaction makes processes that start together take turns:
    two concurrent `CREATE TABLE IF NOT EXISTS` can otherwise both try to create the table.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS kestrel_store_version (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM kestrel_store_version").fetchone()
        version = 0 if row is None or row[0] is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise too_new(place, version, SCHEMA_VERSION)
        if version < SCHEMA_VERSION:
            for statement in _TABLES:
                conn.execute(statement)
            conn.execute("DELETE FROM kestrel_store_version")
            conn.execute("INSERT INTO kestrel_store_version VALUES (%s)", (SCHEMA_VERSION,))
        # Added since version 1 without a new version: older Kestrels never read them.
        conn.execute(TOMBSTONE_TABLE)
        for statement in _SPEND_INDEX:
            conn.execute(statement)
