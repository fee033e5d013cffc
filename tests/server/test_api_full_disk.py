"""The server's disk fills up: requests get a 503 that says so, nothing is lost, and it goes on
once there is room again."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from server_kit import Server, wait_for


def _small_disk(where: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    return made.returncode == 0


def test_a_full_disk_gets_503_and_the_server_goes_on_after(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not _small_disk(disk):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    server = Server(tmp_path)
    server.data = disk / "data"
    try:
        server.start()
        client = server.client(server.token("cramped"))
        script = server.script([{"text": "Nothing to do."}], "cramped.json")
        body = {"task": "x", "source": {"path": str(server.repo("cramped"))}, "model": script}
        first = client.post("/sessions", json=body).json()["id"]
        wait_for(client, first, lambda v: v["status"] == "idle")
        free = shutil.disk_usage(disk).free
        # Room for a little more than the server keeps free: the first sessions take the rest,
        # and meet the full disk part-way through their clone or their first events.
        (disk / "filler").write_bytes(b"\0" * max(free - 1280 * 1024, 0))
        answers = [client.post("/sessions", json=body) for _ in range(40)]
        refused = [a for a in answers if a.status_code != 201]
        assert refused, "the disk never filled up"
        for answer in refused:
            assert answer.status_code == 503, answer.text
            assert "disk is full" in answer.json()["error"]["message"]
            assert answer.headers["Retry-After"]
        listed = client.get("/sessions")
        assert listed.status_code == 200 and first in {s["id"] for s in listed.json()}
        (disk / "filler").unlink()
        again = client.post("/sessions", json=body)
        assert again.status_code == 201, again.text
        wait_for(client, again.json()["id"], lambda v: v["status"] == "idle")
        shown = client.get(f"/sessions/{first}/events")
        assert shown.status_code == 200 and shown.json()[0]["event"]["type"] == "session_started"
    finally:
        server.stop()
        with contextlib.suppress(OSError):
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)
