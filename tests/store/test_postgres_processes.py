"""The PostgreSQL store shared by real processes: writers racing on one session, a follower in
another process woken by notifications, and a writer killed mid-append."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from store_helpers import started

from kestrel.protocol.events import SessionStarted, UserMessage
from kestrel.store.postgres import PostgresStore

# Appends `count` user messages (forever when negative) once `go` exists, printing each seq
# once append has returned; with `start`, first races to start the session, printing the outcome.
WRITER = """
import sys, time
from pathlib import Path
from kestrel.protocol.events import SessionStarted, UserMessage
from kestrel.store.postgres import PostgresStore

url, session, tag, count, go, start = sys.argv[1:7]
store = PostgresStore(url)
print("ready", flush=True)
while not Path(go).exists():
    time.sleep(0.001)
if start == "1":
    try:
        store.append(session, SessionStarted(session_id=session, task=tag, cwd="/", model="m"))
        print("won", flush=True)
    except ValueError:
        print("lost", flush=True)
i = 0
while int(count) < 0 or i < int(count):
    print(store.append(session, UserMessage(text=f"{tag}-{i}")).seq, flush=True)
    i += 1
"""

# Follows a session with polling all but off, printing each record's seq and its delay.
FOLLOWER = """
import asyncio, json, sys, time
from kestrel.store.postgres import PostgresStore

url, session, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def main() -> None:
    store = PostgresStore(url, poll_interval_s=3600)
    assert store.listening()
    it = store.subscribe(session, 1)
    print("ready", flush=True)
    for _ in range(count):
        record = await anext(it)
        print(json.dumps([record.seq, time.time() - record.at]), flush=True)

asyncio.run(main())
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == "ready", line + (child.stderr.read() if child.stderr else "")
    return child


def _finish(child: subprocess.Popen[str]) -> list[str]:
    """The lines the child printed after "ready"; a child still running after 60 s is killed."""
    assert child.stdout is not None and child.stderr is not None
    timer = threading.Timer(60, child.kill)
    timer.start()
    try:
        out, err = child.stdout.read(), child.stderr.read()
        child.wait()
    finally:
        timer.cancel()
    assert child.returncode == 0, err
    return out.splitlines()


def test_two_processes_appending_to_one_session_lose_and_repeat_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    count = 200
    with PostgresStore(pg_url) as store:
        store.append("s", started("s"))
    go = tmp_path / "go"
    children = [_spawn(WRITER, pg_url, "s", tag, str(count), str(go), "0") for tag in "xy"]
    go.touch()  # both are connected and waiting: start them together
    printed = {
        tag: [int(s) for s in _finish(child)] for tag, child in zip("xy", children, strict=True)
    }
    with PostgresStore(pg_url) as store:
        records = store.read("s")
        assert store.sessions()[0].events == len(records) == 2 * count + 1
    assert [r.seq for r in records] == list(range(1, 2 * count + 2))
    by_seq = {r.seq: r.event for r in records}
    for tag in "xy":
        # Each writer's events are in the log once, in its order, under the seqs it was told.
        assert [by_seq[seq] for seq in printed[tag]] == [
            UserMessage(text=f"{tag}-{i}") for i in range(count)
        ]
    assert sorted(printed["x"] + printed["y"]) == list(range(2, 2 * count + 2))
    # The writers really did take turns, so the test exercised the server's lock.
    assert min(printed["y"]) < max(printed["x"]) and min(printed["x"]) < max(printed["y"])


def test_two_processes_starting_one_session_at_once_one_wins(pg_url: str, tmp_path: Path) -> None:
    for round_ in range(3):
        session, go = f"race-{round_}", tmp_path / f"go-{round_}"
        children = [_spawn(WRITER, pg_url, session, tag, "3", str(go), "1") for tag in "xy"]
        go.touch()
        outcomes = {tag: _finish(child) for tag, child in zip("xy", children, strict=True)}
        assert sorted(words[0] for words in outcomes.values()) == ["lost", "won"]
        with PostgresStore(pg_url) as store:
            records = store.read(session)
            winner = next(tag for tag, words in outcomes.items() if words[0] == "won")
            assert isinstance(records[0].event, SessionStarted)
            assert records[0].event.task == winner  # the loser's start left nothing behind
            assert [r.seq for r in records] == list(range(1, 8))


async def test_a_follower_in_another_process_is_woken_live(pg_url: str) -> None:
    count = 20
    with PostgresStore(pg_url) as store:
        store.append("s", started("s"))
        follower = _spawn(FOLLOWER, pg_url, "s", str(count))
        for i in range(count):
            store.append("s", UserMessage(text=str(i)))
            await asyncio.sleep(0.01)
        lines = await asyncio.to_thread(_finish, follower)
    got = [json.loads(line) for line in lines]
    assert [seq for seq, _ in got] == list(range(2, count + 2))
    # It polls once an hour: only a notification can have brought each one.
    assert max(delay for _, delay in got) < 30


def test_every_append_reported_before_kill_9_is_in_the_log(pg_url: str, tmp_path: Path) -> None:
    with PostgresStore(pg_url) as store:
        store.append("s", started("s"))
    go = tmp_path / "go"
    go.touch()
    reported: list[int] = []
    for round_ in range(3):
        child = _spawn(WRITER, pg_url, "s", f"r{round_}", "-1", str(go), "0")
        assert child.stdout is not None
        deadline = time.monotonic() + 60
        while len(reported) < 50 * (round_ + 1) and time.monotonic() < deadline:
            reported.append(int(child.stdout.readline()))
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read()
        child.wait(timeout=60)
        reported.extend(int(line) for line in rest.splitlines(keepends=True) if line.endswith("\n"))
    with PostgresStore(pg_url) as store:
        seqs = [r.seq for r in store.read("s")]
        assert seqs == list(range(1, len(seqs) + 1))
        assert not set(reported) - set(seqs)
        assert store.sessions()[0].events == len(seqs)
