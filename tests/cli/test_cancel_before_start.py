"""A stop asked for after a run was requested but before its process logged its start (a
server's worker launching it) still stops that run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kestrel.protocol.events import CancelRequested
from kestrel.store.sqlite import SQLiteStore


def test_a_cancel_logged_before_the_process_started_stops_its_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "first"}, {"text": "second", "delay_s": 30}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env |= {
        "HOME": str(tmp_path),
        "KESTREL_DATA_DIR": str(tmp_path / "data"),
        "KESTREL_SANDBOX": "none",
    }
    kestrel = [sys.executable, "-m", "kestrel"]
    first = subprocess.run(
        [*kestrel, "-p", "hi", "--model", f"scripted:{script}", "--output-format", "json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    session_id = json.loads(first.stdout)["session_id"]
    store = SQLiteStore(tmp_path / "data" / "sessions.db")
    try:
        requested = store.last_seqs([session_id])[session_id]
        store.append(session_id, CancelRequested(by="api:someone", reason="stop it"))
    finally:
        store.close()
    env["KESTREL_RUN_REQUESTED_AT"] = str(requested)
    second = subprocess.run(
        [*kestrel, "resume", "-p", "--output-format", "json", "--", session_id, "and now?"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert second.returncode == 130, second.stdout + second.stderr
    result = json.loads(second.stdout)
    assert result["reason"] == "cancelled" and "api:someone" in result["detail"]
