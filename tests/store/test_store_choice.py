"""Which event store the settings choose: SQLite in the data directory by default, PostgreSQL
when `store_url` names a database; the real `kestrel` command, end to end, with each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kestrel.app_store import open_log
from kestrel.protocol.errors import ConfigError
from kestrel.settings import Settings
from kestrel.settings_load import load_settings
from kestrel.settings_trust import findings
from kestrel.store.postgres import PostgresStore
from kestrel.store.sqlite import SQLiteStore


def test_the_default_is_the_sqlite_file_and_a_url_chooses_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    local = open_log(Settings(data_dir=tmp_path))
    assert isinstance(local, SQLiteStore) and local.path == tmp_path / "sessions.db"
    local.close()
    shared = open_log(Settings(data_dir=tmp_path, store_url=pg_url))
    assert isinstance(shared, PostgresStore)
    shared.close()


def test_the_setting_comes_from_the_environment_and_is_checked(tmp_path: Path) -> None:
    env = {"KESTREL_STORE_URL": "postgresql://kestrel@db.internal:5432/kestrel"}
    settings = load_settings(tmp_path, env=env, flags={}, home=tmp_path)
    assert settings.store_url == env["KESTREL_STORE_URL"]
    none = load_settings(tmp_path, env={"KESTREL_STORE_URL": "none"}, flags={}, home=tmp_path)
    assert none.store_url is None
    with pytest.raises(ConfigError, match=r"KESTREL_STORE_URL.*postgresql:// URL"):
        load_settings(tmp_path, env={"KESTREL_STORE_URL": "mysql://x"}, flags={}, home=tmp_path)


def test_a_repository_file_needs_trust_to_send_the_log_elsewhere() -> None:
    found = findings({"store_url": "postgresql://attacker.example/loot"})
    assert [f.key for f in found] == ["store_url"]
    assert findings({"store_url": "none"}) == []


def _kestrel(tmp_path: Path, store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_STORE_URL": store_url,
    }
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "kestrel", *args],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_session_run_by_the_command_is_logged_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    url = pg_url
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Nothing needed changing."}]))
    flags = ("--workspace", "direct", "--sandbox", "none")
    ran = _kestrel(tmp_path, url, "-p", "look around", "--model", f"scripted:{script}", *flags)
    assert ran.returncode == 0, ran.stderr
    listed = _kestrel(tmp_path, url, "sessions", "list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    with PostgresStore(url) as store:
        assert store.sessions()[0].session_id == row["session_id"]
        assert store.sessions()[0].status == "done"
        kinds = [r.event.type for r in store.read(row["session_id"])]
    assert kinds[0] == "session_started" and kinds[-1] == "session_finished"
    assert not (tmp_path / "data" / "sessions.db").exists()


def test_an_unreachable_server_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    url = "postgresql://kestrel:s3cret@127.0.0.1:9/kestrel"  # the discard port: nobody listens
    listed = _kestrel(tmp_path, url, "sessions", "list")
    assert listed.returncode == 2
    lines = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in listed.stderr, listed.stderr
    assert "cannot reach the PostgreSQL event store kestrel at 127.0.0.1:9" in lines[0]
    assert "s3cret" not in listed.stderr
