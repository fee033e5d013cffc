"""Ordinary changes, as a coding session makes them, give the security gate nothing to say."""

from __future__ import annotations

import pytest

from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.verify.security import gate_change_set

STORE_BEFORE = '''"""User storage."""

import sqlite3


def connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path)
'''
STORE_AFTER = (
    STORE_BEFORE
    + '''

def find_user(conn: sqlite3.Connection, name: str) -> tuple[int, str] | None:
    """The user called `name`, if any."""
    row = conn.execute("SELECT id, name FROM users WHERE name = ?", (name,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def rename_user(conn: sqlite3.Connection, user_id: int, name: str) -> None:
    """Give a user a new name."""
    with conn:
        conn.execute("UPDATE users SET name = ? WHERE id = ?", (name, user_id))
'''
)
CLI_AFTER = '''"""Command line of the tool."""

import argparse
import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import yaml

log = logging.getLogger(__name__)


def load_config(path: Path) -> dict[str, object]:
    """The YAML settings file, or an empty mapping."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def checksum(path: Path) -> str:
    """The SHA-256 of a file, to tell whether it changed."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_branch(root: Path) -> str:
    """The current branch of the repository at `root`."""
    done = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--config", type=Path, default=Path("tool.yaml"))
    parser.add_argument("--token-env", default="TOOL_TOKEN", help="variable holding the token")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    token = os.environ.get(args.token_env, "")
    log.debug("loaded %d settings", len(config))
    json.dump({"branch": git_branch(Path.cwd()), "authenticated": bool(token)}, sys.stdout)
    return 0
'''
TEST_AFTER = """import pytest

from app.store import connect, find_user


@pytest.fixture
def conn(tmp_path):
    conn = connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES (?)", ("ada",))
    return conn


def test_find_user(conn):
    assert find_user(conn, "ada") == (1, "ada")
    assert find_user(conn, "bob") is None
"""
JS_BEFORE = """export function total(items) {
  return items.reduce((sum, item) => sum + item.price, 0);
}
"""
JS_AFTER = """export function total(items, { discount = 0 } = {}) {
  const gross = items.reduce((sum, item) => sum + item.price * (item.quantity ?? 1), 0);
  return Math.max(gross - discount, 0);
}

export async function fetchItems(baseUrl, token) {
  const response = await fetch(`${baseUrl}/api/items`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  if (!response.ok) throw new Error(`items: HTTP ${response.status}`);
  return response.json();
}
"""
GO_AFTER = """package server

import (
\t"net/http"
\t"os"
\t"time"
)

// New returns the HTTP server, reading its address from the environment.
func New(handler http.Handler) *http.Server {
\taddr := os.Getenv("ADDR")
\tif addr == "" {
\t\taddr = ":8080"
\t}
\treturn &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
}
"""
WORKFLOW = """name: tests
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - run: pip install -e '.[dev]'
      - run: pytest -q
        env:
          API_TOKEN: ${{ secrets.API_TOKEN }}
"""
README_AFTER = """# tool

Set the token in the environment before running it:

```sh
export TOOL_TOKEN=...   # from your password manager
tool --config tool.yaml
```

The configuration file holds no secret; see `tool.example.yaml`.
"""
PACKAGE_BEFORE = '{\n  "name": "shop",\n  "version": "1.2.0",\n  "scripts": {"test": "vitest"}\n}\n'
PACKAGE_AFTER = PACKAGE_BEFORE.replace('"1.2.0"', '"1.3.0"')
CLEAN: dict[str, list[tuple[str, str | None, str | None]]] = {
    "python module with queries": [("app/store.py", STORE_BEFORE, STORE_AFTER)],
    "new command line": [("app/cli.py", None, CLI_AFTER)],
    "new test file": [("tests/test_store.py", None, TEST_AFTER)],
    "javascript": [("web/cart.js", JS_BEFORE, JS_AFTER)],
    "go": [("server/server.go", None, GO_AFTER)],
    "ci workflow and docs": [
        (".github/workflows/tests.yml", None, WORKFLOW),
        ("README.md", "# tool\n", README_AFTER),
    ],
    "version bump": [("package.json", PACKAGE_BEFORE, PACKAGE_AFTER)],
    "deleted module": [("app/old.py", STORE_BEFORE, None)],
}


def _changes(files: list[tuple[str, str | None, str | None]]) -> ChangeSet:
    def entry(text: str | None) -> Entry | None:
        return None if text is None else Entry("file", text.encode())

    return ChangeSet(tuple(Change(path=p, base=entry(b), new=entry(a)) for p, b, a in files))


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_a_clean_change_has_no_findings(case: str) -> None:
    report = gate_change_set(_changes(CLEAN[case]))

    assert report.findings == (), [f.failure.render() for f in report.findings]
    assert report.skipped == ()


def test_all_clean_changes_at_once() -> None:
    everything = [file for files in CLEAN.values() for file in files]

    report = gate_change_set(_changes(everything))

    assert report.findings == ()
    assert len(report.scanned) == len(everything) - 1  # the deleted module adds nothing
