"""LocalExecutor with real bash: streaming, exit codes, killing process groups, a clean env."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kestrel.sandbox.local import LocalExecutor

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="checks process state through /proc"
)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


async def gone(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


@pytest.fixture
def executor() -> LocalExecutor:
    return LocalExecutor(kill_grace_s=1.0, drain_grace_s=0.3)


async def test_output_of_both_streams_is_streamed_and_combined(executor, tmp_path):
    pieces: list[tuple[str, str]] = []
    result = await executor.run(
        "echo out; sleep 0.1; echo err >&2; sleep 0.1; echo out2",
        cwd=tmp_path,
        timeout_s=10,
        on_output=lambda stream, text: pieces.append((stream, text)),
    )
    assert result.exit_code == 0 and not result.timed_out
    assert result.output == "out\nerr\nout2\n"
    assert pieces == [("stdout", "out\n"), ("stderr", "err\n"), ("stdout", "out2\n")]
    assert result.duration_ms >= 200


async def test_exit_codes_and_signals(executor, tmp_path):
    assert (await executor.run("exit 7", cwd=tmp_path, timeout_s=10)).exit_code == 7
    killed = await executor.run("kill -TERM $$", cwd=tmp_path, timeout_s=10)
    assert killed.exit_code == 128 + 15


async def test_it_is_bash_in_the_given_folder_with_no_input(executor, tmp_path):
    result = await executor.run(
        "[[ -n $BASH_VERSION ]] && echo bash; pwd; cat; echo end", cwd=tmp_path, timeout_s=10
    )
    assert result.output == f"bash\n{tmp_path}\nend\n"


async def test_invalid_utf8_is_replaced_not_fatal(executor, tmp_path):
    result = await executor.run(r"printf 'a\xffb\n'", cwd=tmp_path, timeout_s=10)
    assert result.output == "a\ufffdb\n"


async def test_large_output_on_both_streams_does_not_deadlock(executor, tmp_path):
    command = "head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"
    result = await executor.run(command, cwd=tmp_path, timeout_s=20)
    assert result.output.count("a") == 300000 and result.output.count("b") == 300000


async def test_a_timeout_kills_the_whole_process_group(executor, tmp_path):
    started = time.monotonic()
    result = await executor.run("sleep 60 & echo $!; wait", cwd=tmp_path, timeout_s=0.5)
    assert result.timed_out
    assert time.monotonic() - started < 5
    child = int(result.output.split()[0])
    assert await gone(child)


async def test_a_group_ignoring_sigterm_is_killed(executor, tmp_path):
    result = await executor.run(
        "trap '' TERM; sleep 60 & echo $!; wait; wait", cwd=tmp_path, timeout_s=0.5
    )
    assert result.timed_out
    assert result.exit_code == 128 + 9
    assert await gone(int(result.output.split()[0]))


async def test_cancellation_kills_the_group_and_propagates(executor, tmp_path):
    pids: list[int] = []
    printed = asyncio.Event()

    def collect(stream: str, text: str) -> None:
        pids.extend(int(word) for word in text.split())
        printed.set()

    task = asyncio.create_task(
        executor.run("sleep 60 & echo $!; wait", cwd=tmp_path, timeout_s=60, on_output=collect)
    )
    await asyncio.wait_for(printed.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pids[0])


async def test_a_background_child_holding_the_pipes_does_not_hang_it(executor, tmp_path):
    started = time.monotonic()
    result = await executor.run("(sleep 60 & echo $!); echo done", cwd=tmp_path, timeout_s=60)
    assert time.monotonic() - started < 5
    assert not result.timed_out and result.exit_code == 0
    child, done = result.output.split()
    assert done == "done"
    assert await gone(int(child))


async def test_a_child_that_left_the_group_cannot_hang_it_either(executor, tmp_path):
    started = time.monotonic()
    result = await executor.run("setsid sleep 3 & echo started", cwd=tmp_path, timeout_s=60)
    assert time.monotonic() - started < 2.5
    assert result.output == "started\n"


async def test_the_environment_is_scrubbed(executor, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("HOME", "/home/someone")
    result = await executor.run("env", cwd=tmp_path, timeout_s=10, env={"EXTRA": "1"})
    variables = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert "ANTHROPIC_API_KEY" not in variables
    assert "GITHUB_TOKEN" not in variables
    assert "secret" not in result.output
    assert variables["HOME"] == "/home/someone"
    assert variables["EXTRA"] == "1"
    assert "PATH" in variables
    assert variables["PYTHONDONTWRITEBYTECODE"] == "1"


async def test_python_leaves_no_bytecode_that_could_hide_an_edit(executor, tmp_path):
    # Same size, same second: a cached .pyc would still say "a - b" after the edit.
    (tmp_path / "calc.py").write_text("def f(a, b):\n    return a - b\n")
    run = "python3 -c 'import calc; print(calc.f(2, 3))'"
    first = await executor.run(run, cwd=tmp_path, timeout_s=30)
    (tmp_path / "calc.py").write_text("def f(a, b):\n    return a + b\n")
    second = await executor.run(run, cwd=tmp_path, timeout_s=30)
    assert (first.output.strip(), second.output.strip()) == ("-1", "5")
    assert not (tmp_path / "__pycache__").exists()


async def test_a_custom_allowlist_replaces_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("KESTREL_TEST_VISIBLE", "yes")
    executor = LocalExecutor(env_allowlist=["KESTREL_TEST_VISIBLE"])
    assert executor.environment() == {"KESTREL_TEST_VISIBLE": "yes", "PYTHONDONTWRITEBYTECODE": "1"}
    result = await executor.run(
        "echo ${KESTREL_TEST_VISIBLE}-${HOME:-nohome}", cwd=tmp_path, timeout_s=10
    )
    assert result.output == "yes-nohome\n"
