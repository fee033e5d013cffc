"""The one-machine cluster recipe (`scripts/cluster-demo`), run end to end: its own PostgreSQL and
Redis, two servers and three workers, a session created on one server and followed from the
other, a worker killed mid-session, and nothing left running afterwards."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster-demo"


def has_initdb() -> bool:
    return bool(shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb"))


def processes_in(folder: str) -> list[str]:
    """Processes whose command line or environment names `folder`, or that run inside it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            named = any(
                folder.encode() in (proc / part).read_bytes() for part in ("cmdline", "environ")
            )
            if named or os.readlink(proc / "cwd").startswith(folder):
                found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()!r}")
        except OSError:
            pass
    return found


@pytest.mark.skipif(not has_initdb(), reason="needs initdb (Debian package postgresql)")
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks for leftover processes in /proc")
def test_the_cluster_demo_runs_a_session_across_servers_and_cleans_up() -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    for name in ("KESTREL_STORE_URL", "KESTREL_REDIS_URL", "KESTREL_DATA_DIR"):
        env.pop(name, None)
    done = subprocess.run(
        ["bash", str(SCRIPT), "--kill-one"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "PostgreSQL: a private server on port" in out
    assert "Redis: a private server on port" in out
    assert "the model is scripted" in out
    assert "session finished; ran on:" in out
    assert "SIGKILL worker" in out
    assert re.search(r"B has streamed \d+ events", out), out
    streamed = re.findall(r"B streamed (\d+) of the (\d+) events", out)
    assert streamed, out
    seen, logged = streamed[-1]
    assert int(seen) > 0 and seen == logged, out  # Server B saw every event of the session.
    assert "+COUNT = 6" in out
    work = re.search(r"scratch folder (\S+)", out)
    assert work, out
    assert not Path(work[1]).exists()
    assert processes_in(work[1]) == []
