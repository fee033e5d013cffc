"""Attacks on the sandbox's limits, each run for real in bubblewrap: deadlines, CPU, disk.

A timed-out command must be gone, all of it, within a second of its deadline, however it hides:
a trapped SIGTERM, double forks, new sessions, a stopped process, a flood of output, an output
consumer that blocks. Every attack leaves a heartbeat (a file it keeps touching, or a process
with a unique name), so the test sees whether anything of it still runs afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.limits import Limits, MiB, detect_cgroups
from kestrel.sandbox.output import MAX_OUTPUT_CHARS, OutputBuffer
from kestrel.settings_limits import SandboxLimitSettings
from kestrel.settings_load import load_settings

PYTHON = os.path.realpath(sys.executable)
DEADLINE_S = 1.0
RESULT_BY_S = 2.0
"""The one timing bound: a command with a 1 s deadline is reported by 2 s after it started."""


def _sandbox(ws: Path, **limits: object) -> BwrapExecutor:
    return BwrapExecutor(ws, config=SandboxConfig(limits=Limits(**limits)))  # type: ignore[arg-type]


def _running(tag: str) -> list[int]:
    """PIDs of live processes whose command line holds `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tag.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _beats(path: Path) -> float:
    return path.stat().st_mtime if path.exists() else 0.0


async def _assert_all_gone(tag: str, heartbeat: Path | None = None) -> None:
    """Nothing named `tag` runs, and the heartbeat file (if any) stopped changing."""
    assert _running(tag) == [], f"still running after the result: {_running(tag)}"
    if heartbeat is not None:
        before = _beats(heartbeat)
        await asyncio.sleep(0.6)
        assert _beats(heartbeat) == before, "the heartbeat went on after the result"


# Each attack: a shell command (with {tag}, a unique word in its processes' command lines, and
# {beat}, a heartbeat file in the workspace) that would run forever if left alone.
ATTACKS = {
    "busy loop": "while :; do :; done",
    "SIGTERM trapped": "trap '' TERM; while :; do touch {beat}; done",
    "SIGTERM and SIGHUP trapped in every child": (
        "trap '' TERM HUP INT; (trap '' TERM HUP INT; while :; do touch {beat}; sleep 0.05; done) &"
        " exec -a {tag} sleep 1000"
    ),
    "double-forked daemon": (
        "( ( exec -a {tag} bash -c 'while :; do touch {beat}; sleep 0.05; done' ) & ) ; sleep 1000"
    ),
    "new session, nohup, disowned": (
        "setsid nohup bash -c 'exec -a {tag} sleep 1000' >/dev/null 2>&1 & disown; "
        "setsid bash -c 'while :; do touch {beat}; sleep 0.05; done' & sleep 1000"
    ),
    "stopped process": "(exec -a {tag} sleep 1000) & kill -STOP $!; kill -STOP $$",
    "many children": (
        "for i in $(seq 40); do (exec -a {tag} sleep 1000) & done; "
        "while :; do touch {beat}; sleep 0.05; done"
    ),
    "output flood": "yes {tag}",
    "output flood from a daemon": "( (yes {tag} &) & ); while :; do touch {beat}; done",
}


@pytest.mark.parametrize("command", ATTACKS.values(), ids=list(ATTACKS))
async def test_a_timed_out_command_is_gone_within_a_second(ws: Path, command: str) -> None:
    tag = f"kestrel-attack-{secrets.token_hex(4)}"
    beat = ws / "heartbeat"
    sandbox = _sandbox(ws, max_processes=256)
    started = time.monotonic()
    result = await sandbox.run(
        command.format(tag=tag, beat=beat), cwd=ws, timeout_s=DEADLINE_S, on_output=None
    )
    took = time.monotonic() - started
    assert result.timed_out, result.output[-500:]
    assert took < RESULT_BY_S, f"the result came {took - DEADLINE_S:.2f} s after the deadline"
    assert len(result.output) <= MAX_OUTPUT_CHARS + 200
    await _assert_all_gone(tag, beat)


async def test_a_blocked_output_consumer_does_not_delay_the_kill(ws: Path) -> None:
    """The event loop is held for 3 s by whoever consumes the output; the kill is on time."""
    tag = f"kestrel-attack-{secrets.token_hex(4)}"
    beat = ws / "heartbeat"
    blocked: list[float] = []

    def slow_terminal(stream: str, text: str) -> None:
        if not blocked:
            blocked.append(time.monotonic())
            time.sleep(3.0)  # a terminal nobody reads: the whole event loop waits here

    command = f"(yes {tag} &); while :; do touch {beat}; sleep 0.02; done"
    started = time.time()
    result = await _sandbox(ws).run(command, cwd=ws, timeout_s=DEADLINE_S, on_output=slow_terminal)
    assert result.timed_out
    # The heartbeat stopped within a second of the deadline although the loop was held.
    assert _beats(beat) - started < DEADLINE_S + 1.0 + 0.1
    await _assert_all_gone(tag, beat)


def _cgroup_controller(name: str) -> None:
    if name not in detect_cgroups().writable:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"CI runs as root, so the {name} cgroup controller must be writable")
        pytest.skip(f"no writable {name} cgroup controller here")


HOG_SCRIPT = """
import os, resource, time
start = time.monotonic()
workers = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        while time.monotonic() - start < 2.0:
            pass
        os._exit(0)
    workers.append(pid)
for pid in workers:
    os.waitpid(pid, 0)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print("share", round((used.ru_utime + used.ru_stime) / (time.monotonic() - start), 3))
"""
"""Two busy processes for two seconds; prints the CPUs they used together, on average."""


async def _cpu_share(ws: Path, cpus: float | None) -> float:
    (ws / "hog.py").write_text(HOG_SCRIPT)
    result = await _sandbox(ws, cpus=cpus).run(f"{PYTHON} hog.py", cwd=ws, timeout_s=30)
    return float(result.output.split("share", 1)[1].split()[0])


async def test_a_cpu_hog_gets_no_more_than_its_quota(ws: Path) -> None:
    _cgroup_controller("cpu")
    share = await _cpu_share(ws, cpus=0.2)
    assert share <= 0.35


async def test_without_a_quota_the_same_hogs_get_more(ws: Path) -> None:
    """The control for the test above: the measurement does see what two hogs take unbounded
    (even on a busy machine, well over the quota above)."""
    (ws / "hog.py").write_text(HOG_SCRIPT)
    done = subprocess.run([PYTHON, "hog.py"], cwd=ws, capture_output=True, text=True, check=True)
    if float(done.stdout.split()[1]) < 0.6:
        pytest.skip("this machine is too busy right now to give two hogs more than the quota")
    share = await _cpu_share(ws, cpus=None)
    assert share > 0.5


async def test_many_small_files_past_the_quota_are_stopped_and_reported(ws: Path) -> None:
    command = "mkdir -p junk; i=0; while :; do i=$((i+1)); head -c 4096 /dev/zero > junk/f$i; done"
    result = await _sandbox(ws, disk_bytes=8 * MiB).run(command, cwd=ws, timeout_s=60)
    assert not result.timed_out, "the quota did not stop it; the deadline did"
    assert (
        result.stopped_by is not None and "workspace quota of 8 MiB exceeded" in result.stopped_by
    )
    assert "workspace quota of 8 MiB exceeded" in result.output
    files = len(list((ws / "junk").iterdir()))
    assert 2000 < files < 20000  # stopped soon after 8 MiB of 4 KiB files, not long after


async def test_one_big_file_past_the_quota_is_stopped_and_reported(ws: Path) -> None:
    command = "while :; do head -c 1048576 /dev/zero >> big || exit 3; done"
    result = await _sandbox(ws, disk_bytes=8 * MiB).run(command, cwd=ws, timeout_s=60)
    assert not result.timed_out
    assert "workspace quota of 8 MiB exceeded" in result.output
    assert (ws / "big").stat().st_size <= 10 * MiB  # the kernel capped the file as well


async def test_a_write_that_ends_before_a_sample_is_still_reported(ws: Path) -> None:
    result = await _sandbox(ws, disk_bytes=4 * MiB).run(
        "head -c 6000000 /dev/urandom > burst", cwd=ws, timeout_s=60
    )
    assert "workspace quota of 4 MiB exceeded" in result.output


async def test_what_was_there_before_counts_only_as_the_baseline(ws: Path) -> None:
    (ws / "old.bin").write_bytes(os.urandom(12 * MiB))
    sandbox = _sandbox(ws, disk_bytes=8 * MiB)
    result = await sandbox.run(
        "head -c 3000000 /dev/urandom > new.bin; sleep 0.6; rm old.bin; echo done",
        cwd=ws,
        timeout_s=60,
    )
    assert result.stopped_by is None and "done" in result.output, result.output
    # Growth is measured from each command's start: the next one starts from what is there now.
    result = await sandbox.run(
        "head -c 9000000 /dev/urandom > more.bin; sleep 1", cwd=ws, timeout_s=60
    )
    assert "workspace quota of 8 MiB exceeded" in result.output


def test_the_settings_table_sets_each_limit(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / ".config" / "kestrel").mkdir(parents=True)
    (repo / ".git").mkdir(parents=True)
    (home / ".config" / "kestrel" / "settings.toml").write_text(
        "[sandbox_limits]\ncpus = 1.5\nmemory_mib = 512\ndisk_mib = 100\n"
    )
    settings = load_settings(repo, env={}, flags={}, home=home)
    limits = settings.sandbox_limits.limits()
    assert (limits.cpus, limits.memory_bytes, limits.disk_bytes) == (1.5, 512 * MiB, 100 * MiB)
    unlimited = SandboxLimitSettings(cpus="none", disk_mib="unlimited").limits()  # type: ignore[arg-type]
    assert unlimited.cpus is None and unlimited.disk_bytes is None
    assert SandboxLimitSettings().limits(cores=8).cpus == 4.0
    assert SandboxLimitSettings().limits(cores=1).cpus == 1.0


def test_a_repository_cannot_loosen_the_limits(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    (repo / ".kestrel").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".kestrel" / "settings.toml").write_text("[sandbox_limits]\ndisk_mib = 'none'\n")
    with pytest.raises(ConfigError, match=r"\[sandbox_limits\] can only be set in your own"):
        load_settings(repo, env={}, flags={}, home=home)


def test_bad_limits_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / ".config" / "kestrel").mkdir(parents=True)
    (repo / ".git").mkdir(parents=True)
    user = home / ".config" / "kestrel" / "settings.toml"
    for table in ("cpus = 0", "cpus = 'lots'", "disk_mib = -5", "disk = 3"):
        user.write_text(f"[sandbox_limits]\n{table}\n")
        with pytest.raises(ConfigError, match="sandbox_limits"):
            load_settings(repo, env={}, flags={}, home=home)


def test_a_flood_keeps_its_head_and_tail_and_says_how_much_was_left_out() -> None:
    kept = OutputBuffer(limit=20)
    for piece in ("start-", "a" * 1000, "b" * 5, "-end"):
        kept.add(piece)
    text = kept.text()
    assert text.startswith("start-aaaa") and text.endswith("abbbbb-end")
    assert "[kestrel: 995 characters of output left out here]" in text
    small = OutputBuffer(limit=100)
    small.add("all of it")
    assert small.text() == "all of it"
