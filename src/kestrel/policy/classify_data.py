"""The classifier's checks of database commands: SQL that destroys data, Redis flushes, MongoDB
drops, and the client tools that drop a database (`dropdb`, `mysqladmin drop`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand

SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git"})
"""Commands whose arguments are patterns or messages, not statements that run."""
_DB_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "duckdb", "cockroach"})
_DB_CLIENTS |= {"clickhouse-client", "clickhouse", "snowsql", "bq", "pgcli", "mycli", "litecli"}
_DB_CLIENTS |= {"cqlsh", "usql"}
_REDIS = frozenset({"redis-cli", "valkey-cli", "keydb-cli"})
_MONGO = frozenset({"mongo", "mongosh"})
_SQL_DROP = re.compile(r"\bDROP\s+(TABLE|DATABASE|SCHEMA|KEYSPACE|OWNED)\b[^;]*", re.IGNORECASE)
_SQL_TRUNCATE = re.compile(r"\bTRUNCATE\s+(TABLE\s+)?[`\"\[]?\w[^;]*", re.IGNORECASE)
_SQL_DELETE = re.compile(r"\bDELETE\s+FROM\s+[^\s;]+[^;]*", re.IGNORECASE)
_WHERE = re.compile(r"\bWHERE\b", re.IGNORECASE)
_ALWAYS = re.compile(
    r"\bWHERE\s+(1\s*=\s*1|true|'(\w*)'\s*=\s*'\2'|(\d+)\s*=\s*\3|1)\s*(;|$|\bLIMIT\b|\))", re.I
)
_SQL_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*", re.DOTALL)


def _everything(delete: str) -> bool:
    """Whether a DELETE statement matches every row: no WHERE, or an always-true one."""
    return not _WHERE.search(delete) or _ALWAYS.search(delete) is not None


_REDIS_WIPE = re.compile(r"\b(FLUSHALL|FLUSHDB|SHUTDOWN)\b", re.IGNORECASE)
_MONGO_WIPE = re.compile(
    r"\.\s*(dropDatabase|dropAllUsers|drop)\s*\(\s*\)|\.\s*(deleteMany|remove)\s*\(\s*(\{\s*\})?\s*\)"
)


def sql(command: SimpleCommand, scan: Scan) -> list[str]:
    """SQL that destroys data, in a command's words or in the input a database client reads."""
    texts = list(command.words[1:]) + _fed_input(command, scan, _DB_CLIENTS)
    reasons = []
    for raw in texts:
        text = _SQL_COMMENT.sub(" ", raw)  # DROP/**/TABLE
        hits = [m.group() for m in (*_SQL_DROP.finditer(text), *_SQL_TRUNCATE.finditer(text))]
        hits += [m.group() for m in _SQL_DELETE.finditer(text) if _everything(m.group())]
        hits = [" ".join(h.split()).rstrip("'\"`") for h in hits]
        reasons += [f"it runs SQL that destroys data: {h}" for h in hits]
    return reasons


def _fed_input(command: SimpleCommand, scan: Scan, clients: frozenset[str]) -> list[str]:
    """A heredoc or here-string of `command`, when a client in `clients` reads it (a heredoc
    written to a file is not run)."""
    inputs = [r.body or r.target for r in command.redirects if r.op.startswith("<<")]
    if inputs and any(
        c.name in clients and c.pipeline == command.pipeline and c.stage >= command.stage
        for c in scan.commands
    ):
        return inputs
    return []


def _client_text(command: SimpleCommand, scan: Scan) -> list[str]:
    """What a client reads as statements: its words, its heredoc, what a pipe feeds it."""
    texts = list(command.words[1:]) + _fed_input(command, scan, frozenset({command.name}))
    for feeder in scan.fed(command):
        texts += list(feeder.words[1:]) if feeder.name in ("echo", "printf") else []
        texts += [r.body or r.target for r in feeder.redirects if r.op.startswith("<<")]
    return texts


def _redis(command: SimpleCommand, scan: Scan) -> list[str]:
    texts = _client_text(command, scan)  # EVAL "redis.call('flushall')" counts too
    hits = {m[1].upper() for t in texts for m in _REDIS_WIPE.finditer(t)}
    what = {"FLUSHALL": "deletes every key in every database", "FLUSHDB": "deletes every key"}
    what["SHUTDOWN"] = "shuts the server down"
    reasons = [f"it {what[h]} of the Redis server ({h})" for h in sorted(hits)]
    ops = [w.upper() for w in command.words[1:] if not w.startswith("-")]
    if command.dynamic and ({"DEL", "UNLINK"} & set(ops)):
        reasons.append("it deletes Redis keys named only when it runs (DEL of a key list)")
    return reasons


def _mongo(command: SimpleCommand, scan: Scan) -> list[str]:
    hits = [m[1] or m[2] for t in _client_text(command, scan) for m in _MONGO_WIPE.finditer(t)]
    return [f"it runs MongoDB code that destroys data ({hits[0]})"] if hits else []


def _dropdb(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:])
    if any(f in ("--help", "-?", "--version", "-V") for f in flags):
        return []
    what = {"dropdb": "a PostgreSQL database", "dropuser": "a PostgreSQL role"}
    what["pg_dropcluster"] = "a PostgreSQL cluster with all its databases"
    target = f" {operands[-1]}" if operands else ""
    return [f"it deletes {what[command.name]}{target} ({command.name})"]


def _mysqladmin(command: SimpleCommand, scan: Scan) -> list[str]:
    _, operands = split(command.words[1:])
    ops = [o.lower() for o in operands]
    if "drop" in ops:
        name = operands[ops.index("drop") + 1] if ops.index("drop") + 1 < len(ops) else ""
        return [f"it deletes the MySQL database {name} (mysqladmin drop)".replace("  ", " ")]
    if "shutdown" in ops:
        return ["it shuts the MySQL server down (mysqladmin shutdown)"]
    return []


def _etcdctl(command: SimpleCommand, scan: Scan) -> list[str]:
    _, operands = split(command.words[1:])
    if operands[:1] in (["del"], ["delete"]):
        return [f"it deletes keys from etcd (etcdctl {' '.join(operands)})"]
    return []


def _raw_redis(command: SimpleCommand, scan: Scan) -> list[str]:
    """`printf 'FLUSHALL\\r\\n' | nc host 6379`: the protocol spoken by hand."""
    fed = [t for c in scan.fed(command) for t in c.words[1:]]
    fed += [r.body or r.target for r in command.redirects if r.op.startswith("<<")]
    hits = {m[1].upper() for t in fed for m in _REDIS_WIPE.finditer(t)}
    return [f"it sends {h} to a server by hand ({command.name}), as redis-cli would" for h in hits]


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    **dict.fromkeys(("nc", "ncat", "netcat", "socat", "telnet"), _raw_redis),
    **dict.fromkeys(_REDIS, _redis),
    **dict.fromkeys(_MONGO, _mongo),
    **dict.fromkeys(("dropdb", "dropuser", "pg_dropcluster"), _dropdb),
    "mysqladmin": _mysqladmin,
    "mariadb-admin": _mysqladmin,
    "etcdctl": _etcdctl,
}
