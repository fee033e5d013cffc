"""The one-machine cluster recipe (`scripts/cluster-demo`), run end to end: two servers and
three workers, a session created on one server and followed from the other, a worker killed
mid-session, and nothing left running afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster-demo"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_the_cluster_demo_runs_a_session_across_servers_and_cleans_up() -> None:
    env = {**os.environ, "PYTHON": sys.executable}
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
    assert "session finished; ran on:" in out
    assert "SIGKILL worker" in out
    streamed = [line for line in out.splitlines() if "B streamed" in line]
    assert streamed, out
    words = streamed[-1].split()
    seen, logged = words[words.index("streamed") + 1], words[words.index("the") + 1]
    assert seen == logged, streamed[-1]  # Server B saw every event of the session.
    assert "+COUNT = 6" in out
    left = subprocess.run(["pgrep", "-f", "kestrel-cluster-demo-"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
