"""BwrapExecutor doing ordinary work: output, exit codes, timeouts, cancellation, the workspace."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from kestrel.sandbox.bwrap import BwrapExecutor, OutsideWorkspace, SandboxConfig, mount_args


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
        pytest.skip("bubblewrap is not installed")
    return tmp_path


def sandbox(ws: Path, **kwargs: object) -> BwrapExecutor:
    return BwrapExecutor(ws, kill_grace_s=0.5, drain_grace_s=0.3, **kwargs)  # type: ignore[arg-type]


async def test_output_streams_and_exit_codes_come_back(ws: Path) -> None:
    pieces: list[tuple[str, str]] = []
    result = await sandbox(ws).run(
        "echo out; sleep 0.1; echo err >&2; exit 3",
        cwd=ws,
        timeout_s=10,
        on_output=lambda stream, text: pieces.append((stream, text)),
    )
    assert result.exit_code == 3 and not result.timed_out
    assert result.output == "out\nerr\n"
    assert pieces == [("stdout", "out\n"), ("stderr", "err\n")]


async def test_python_runs_and_the_workspace_is_writable(ws: Path) -> None:
    (ws / "sub").mkdir()
    result = await sandbox(ws).run(
        "python3 -c 'print(6 * 7)' > answer.txt && pwd && cat answer.txt",
        cwd=ws / "sub",
        timeout_s=20,
    )
    assert result.exit_code == 0, result.output
    assert result.output == f"{ws / 'sub'}\n42\n"
    assert (ws / "sub" / "answer.txt").read_text() == "42\n"


async def test_the_host_is_readable(ws: Path) -> None:
    result = await sandbox(ws).run("ls /usr/bin | grep -cx bash; id -u", cwd=ws, timeout_s=10)
    assert result.output == "1\n1000\n"


async def test_a_timeout_is_reported_and_kills_everything(ws: Path) -> None:
    started = time.monotonic()
    result = await sandbox(ws).run(
        "(sleep 30; echo late > late.txt) & sleep 30", cwd=ws, timeout_s=1
    )
    assert result.timed_out and time.monotonic() - started < 5
    await asyncio.sleep(0.3)
    assert not (ws / "late.txt").exists()


async def test_cancellation_kills_the_sandbox(ws: Path) -> None:
    task = asyncio.create_task(sandbox(ws).run("sleep 1; touch done", cwd=ws, timeout_s=30))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(1.2)
    assert not (ws / "done").exists()


async def test_network_host_shares_loopback_and_none_does_not(ws: Path) -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = f"echo > /dev/tcp/127.0.0.1/{port} && echo reached"
    async with server:
        shared = await sandbox(ws, network="host").run(probe, cwd=ws, timeout_s=10)
        isolated = await sandbox(ws).run(probe, cwd=ws, timeout_s=10)
    assert "reached" in shared.output
    assert "reached" not in isolated.output


async def test_a_cwd_outside_the_workspace_is_refused(ws: Path) -> None:
    (ws / "inner").mkdir()
    with pytest.raises(OutsideWorkspace):
        await sandbox(ws / "inner").run("true", cwd=ws, timeout_s=5)


async def test_extra_variables_pass_and_api_keys_do_not(ws: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    result = await sandbox(ws).run(
        'echo "${ANTHROPIC_API_KEY:-none} $EXTRA $TMPDIR"', cwd=ws, timeout_s=10, env={"EXTRA": "x"}
    )
    assert result.output == "none x /tmp\n"


def test_masks_cover_only_paths_that_exist_and_are_shown(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh").mkdir(parents=True)
    (home / "data").mkdir()
    (tmp_path / "hidden-data").mkdir()
    masked = (home / "data", tmp_path / "absent", tmp_path / "hidden-data")
    # The workspace is the home: its secrets and the data dir in it are shown, so masked.
    args = mount_args(home, masked)
    joined = " ".join(args)
    assert f"--tmpfs {home / '.ssh'}" in joined
    assert f"--tmpfs {home / 'data'}" in joined
    # Absent, or outside everything the view shows: nothing to mask.
    assert str(tmp_path / "absent") not in joined
    assert str(tmp_path / "hidden-data") not in joined
    assert args.index(str(home)) < args.index(str(home / ".ssh"))


async def test_cgroups_can_be_switched_off(ws: Path) -> None:
    config = SandboxConfig(use_cgroups=False)
    result = await sandbox(ws, config=config).run("ulimit -v", cwd=ws, timeout_s=10)
    # Without a memory cgroup the address space is capped per process instead.
    assert result.output.strip() == str(config.limits.memory_bytes // 1024)


async def test_toolchains_in_the_home_stay_usable_and_the_rest_hidden(
    ws: Path, tmp_path: Path, monkeypatch
) -> None:
    home = tmp_path / "home"
    tool = home / ".pyenv" / "bin" / "mytool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    (home / "diary.txt").write_text("private\n")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("KEY\n")
    monkeypatch.setenv("HOME", str(home))
    workspace = ws / "project"
    workspace.mkdir()
    result = await sandbox(workspace).run(
        f"{tool}; cat {home}/diary.txt || echo no-diary; cat {home}/.ssh/id_rsa || echo no-key; "
        f"touch {tool} || echo read-only",
        cwd=workspace,
        timeout_s=10,
    )
    assert "tool ran" in result.output
    assert "no-diary" in result.output and "private" not in result.output
    assert "no-key" in result.output and "KEY" not in result.output
    assert "read-only" in result.output
