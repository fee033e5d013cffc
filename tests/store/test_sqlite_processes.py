"""The SQLite store shared by real processes: polling subscribers, concurrent writers, kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import started

from kestrel.protocol.events import UserMessage
from kestrel.store import SQLiteStore

# Appends `count` user messages (forever when negative), pausing `pause` seconds between them, and
# prints each seq once append has returned.
CHILD = """
import sys, time
from pathlib import Path
from kestrel.protocol.events import UserMessage
from kestrel.store import SQLiteStore

path, session, tag, count, go, pause = sys.argv[1:7]
store = SQLiteStore(Path(path))
print("ready", flush=True)
while go != "-" and not Path(go).exists():
    time.sleep(0.001)
i = 0
while int(count) < 0 or i < int(count):
    record = store.append(session, UserMessage(text=f"{tag}-{i}"))
    print(record.seq, flush=True)
    i += 1
    if float(pause):
        time.sleep(float(pause))
"""


def spawn(
    path: Path, session: str, tag: str, count: int, go: Path | None = None, pause: float = 0.0
) -> subprocess.Popen[str]:
    """Start a child process appending to `session` in the store at `path`."""
    args = [str(path), session, tag, str(count), str(go) if go else "-", str(pause)]
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def drain(child: subprocess.Popen[str]) -> tuple[str, str]:
    """Everything the child wrote that was not read yet, once it has exited.

    Not `communicate()`: that reads the raw pipe and would skip what `readline()` had already
    buffered, cutting a line in two.
    """
    assert child.stdout is not None and child.stderr is not None
    out, err = child.stdout.read(), child.stderr.read()
    child.wait(timeout=60)
    return out, err


def finish(child: subprocess.Popen[str]) -> list[int]:
    """Wait for a child and return the seqs it printed (after any "ready" line not yet read)."""
    out, err = drain(child)
    assert child.returncode == 0, err
    return [int(word) for word in out.split() if word != "ready"]


async def test_subscriber_sees_appends_from_another_process_by_polling(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path, poll_interval_s=0.05) as store:
        store.append("s1", started("s1"))
        it = store.subscribe("s1", after_seq=1)
        child = spawn(path, "s1", "child", 3)
        seen = [await asyncio.wait_for(anext(it), 30) for _ in range(3)]
        assert finish(child) == [2, 3, 4]
        assert [r.seq for r in seen] == [2, 3, 4]
        assert [r.event for r in seen] == [UserMessage(text=f"child-{i}") for i in range(3)]
        await it.aclose()  # type: ignore[attr-defined]


@pytest.mark.parametrize("sessions", [("s1", "s1"), ("a", "b")], ids=["same", "different"])
def test_two_processes_appending_at_once_keep_seq_unique_and_gap_free(
    tmp_path: Path, sessions: tuple[str, str]
) -> None:
    path = tmp_path / "sessions.db"
    count = 300
    with SQLiteStore(path) as store:
        for session in set(sessions):
            store.append(session, started(session))
    writers = list(zip(sessions, ("x", "y"), strict=True))
    go = tmp_path / "go"
    # The pause lets the other writer in: SQLite's busy handler backs off, so without one a
    # tight loop tends to finish before the other process gets its first turn.
    children = [spawn(path, session, tag, count, go, pause=0.0005) for session, tag in writers]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    go.touch()  # both are open and waiting: start them together
    printed = {tag: finish(child) for (_, tag), child in zip(writers, children, strict=True)}
    with SQLiteStore(path) as store:
        for session, tag in writers:
            records = store.read(session)
            assert [r.seq for r in records] == list(range(1, len(records) + 1))
            by_seq = {r.seq: r.event for r in records}
            wrote = [UserMessage(text=f"{tag}-{i}") for i in range(count)]
            assert [by_seq[seq] for seq in printed[tag]] == wrote
    if sessions[0] == sessions[1]:
        x, y = printed["x"], printed["y"]
        assert sorted(x + y) == list(range(2, 2 * count + 2))
        # The writers really did take turns, so the test exercised contention.
        assert min(y) < max(x) and min(x) < max(y)


def test_every_seq_reported_before_kill_9_is_durable(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path) as store:
        store.append("s1", started("s1"))
    reported: list[int] = []
    for round_, kill_after in enumerate([40, 150, 400]):
        child = spawn(path, "s1", f"r{round_}", -1)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        seen = 0
        while seen < kill_after:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            reported.append(int(line))
            seen += 1
        os.kill(child.pid, signal.SIGKILL)
        rest, err = drain(child)
        assert child.returncode == -signal.SIGKILL, err
        # A line cut short by the kill was not reported; complete ones were.
        reported.extend(int(line) for line in rest.splitlines(keepends=True) if line.endswith("\n"))
    with SQLiteStore(path) as store:
        records = store.read("s1")
        seqs = [r.seq for r in records]
        assert seqs == list(range(1, len(seqs) + 1))
        lost = sorted(set(reported) - set(seqs))
        assert not lost, f"reported as appended but not in the log: {lost[:10]}"
        assert all(isinstance(r.event, UserMessage) for r in records[1:])
        assert store.sessions()[0].events == len(seqs)
