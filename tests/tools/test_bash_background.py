"""bash: background processes a command leaves running are ended, and the model is told which."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.sandbox.leftovers import Leftover, ended_note, group_processes, parse_listing

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads process state through /proc"
)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


async def gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_the_result_names_each_background_process_it_ended(ws):
    outcome = await ws.call(
        "bash", command="sleep 300 & echo $!; sleep 301 & echo $!; echo started"
    )
    first, second, started = outcome.content.splitlines()[:3]
    assert started == "started"
    lines = outcome.content.splitlines()
    assert lines[-2] == "[exit code 0]"
    assert lines[-1].startswith(
        f"[kestrel: ended 2 background processes the command left running: "
        f"{first} `sleep 300`, {second} `sleep 301`; "
    )
    assert await gone(int(first)) and await gone(int(second))


def sandboxed(ws) -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
        pytest.skip("bubblewrap is not installed")
    ws.executor = BwrapExecutor(ws.root, kill_grace_s=0.5, drain_grace_s=0.3)


async def test_a_sandboxed_command_is_told_too_with_its_exit_code_kept(ws):
    sandboxed(ws)
    outcome = await ws.call("bash", command="sleep 300 & echo $!; sleep 0.2; exit 3")
    pid, status, note = outcome.content.splitlines()
    assert status == "[exit code 3]" and outcome.exit_code == 3
    assert note.startswith(
        f"[kestrel: ended 1 background process the command left running: {pid} `sleep 300`; "
    )


async def test_a_sandboxed_command_that_leaves_nothing_running_gets_no_note(ws):
    sandboxed(ws)
    content = await ws.ok("bash", command="sleep 0.01 & wait; echo done")
    assert content == "done\n[exit code 0]"


async def test_a_command_that_leaves_nothing_running_gets_no_note(ws):
    content = await ws.ok("bash", command="sleep 0.01 & wait; echo done")
    assert content == "done\n[exit code 0]"
    assert "background" not in content


async def test_the_processes_of_a_group_are_read_from_proc(tmp_path):
    # A group of its own: a shell leading it and a sleep it started.
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", "sleep 300 & wait", start_new_session=True
    )
    try:
        for _ in range(250):
            found = group_processes(proc.pid)
            if [p.command for p in found] == ["bash -c sleep 300 & wait", "sleep 300"]:
                break
            await asyncio.sleep(0.02)
        assert [p.command for p in found] == ["bash -c sleep 300 & wait", "sleep 300"]
        assert found[0].pid == proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    for _ in range(250):
        if not group_processes(proc.pid):
            break
        await asyncio.sleep(0.02)
    assert group_processes(proc.pid) == ()


def test_the_note_counts_past_five_and_shortens_long_command_lines() -> None:
    many = tuple(Leftover(100 + i, f"worker {i}") for i in range(7))
    note = ended_note(many)
    assert note.startswith("[kestrel: ended 7 background processes the command left running: ")
    assert "104 `worker 4` and 2 more;" in note
    assert "worker 5" not in note
    one = ended_note((Leftover(9, "python -m http.server " + "x" * 200),))
    assert "ended 1 background process the" in one
    assert re.search(r"9 `python -m http\.server x+…`", one)
    assert ended_note(()) == ""


def test_the_sandbox_listing_is_parsed_and_junk_skipped() -> None:
    listing = "12\tsleep 300\nnot a line\n3\tpython3 -m http.server\nx\ty\n"
    assert parse_listing(listing) == (
        Leftover(3, "python3 -m http.server"),
        Leftover(12, "sleep 300"),
    )
