"""Two server processes follow one session whose events a third process appends: both get every
record, in order, through Redis (their fan-outs never poll the log)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from fanout_kit import say, start, writer
from redis_kit import REDIS_URL

from kestrel.redis_link import RedisLink

CHILD = Path(__file__).resolve().parent / "follow_child.py"
COUNT = 31


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()
    return lines


def next_line(lines: queue.Queue[str], timeout_s: float = 20.0) -> str:
    return lines.get(timeout=timeout_s)


def test_followers_in_two_processes_receive_the_same_events(
    tmp_path: Path, link: RedisLink
) -> None:
    db = tmp_path / "log.db"
    session = writer(db, link)
    start(session, "s1")
    argv = [sys.executable, str(CHILD), REDIS_URL, link.prefix, str(db), "s1", str(COUNT)]
    followers = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tmp_path) for _ in range(2)
    ]
    try:
        outputs = [lines_of(p) for p in followers]
        for lines in outputs:
            assert next_line(lines) == "seq 1"  # following, with Redis read from here on
        for _ in range(COUNT - 1):
            say(session, "s1", 1)
            time.sleep(0.01)
        for lines in outputs:
            got = [next_line(lines) for _ in range(COUNT - 1)]
            assert got == [f"seq {n}" for n in range(2, COUNT + 1)]
            reads = int(next_line(lines).removeprefix("reads "))
            assert reads <= 3, "the records came through Redis, not from reading the log"
        for process in followers:
            assert process.wait(timeout=20) == 0
    finally:
        for process in followers:
            process.kill()
            process.wait()
        session.close()
