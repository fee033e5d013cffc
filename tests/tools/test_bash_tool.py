"""bash: the real local executor, exit codes as information, long output cut and saved."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from kestrel.sandbox.base import ExecResult, OutputSink


async def test_output_and_exit_code_are_reported(ws):
    outcome = await ws.call("bash", command="echo hello; echo oops >&2")
    assert not outcome.is_error
    assert outcome.exit_code == 0
    assert outcome.content.splitlines()[-1] == "[exit code 0]"
    assert "hello" in outcome.content and "oops" in outcome.content


async def test_a_failing_command_is_information_not_a_tool_error(ws):
    outcome = await ws.call("bash", command="echo failing; exit 3")
    assert not outcome.is_error
    assert outcome.exit_code == 3
    assert outcome.content == "failing\n[exit code 3]"


async def test_no_output_says_so(ws):
    assert await ws.ok("bash", command="true") == "(no output)\n[exit code 0]"


async def test_it_runs_in_the_workspace_and_streams_output(ws):
    content = await ws.ok("bash", command="pwd")
    assert content.splitlines()[0] == str(ws.root)
    assert ("stdout", f"{ws.root}\n") in ws.output


async def test_long_output_is_cut_in_the_middle_and_saved_whole(ws):
    ws.max_output_chars = 2000
    outcome = await ws.call("bash", command="for i in $(seq 1 5000); do echo line $i; done")
    assert outcome.truncated and not outcome.is_error
    assert outcome.full_output_path is not None
    saved = Path(outcome.full_output_path)
    assert saved.parent == ws.artifacts.resolve()
    assert saved.read_text().splitlines() == [f"line {n}" for n in range(1, 5001)]

    assert outcome.content.startswith("line 1\nline 2\n")
    assert outcome.content.endswith("line 5000\n[exit code 0]")
    assert len(outcome.content) < 2200
    [note] = [row for row in outcome.content.splitlines() if row.startswith("[...")]
    assert note.endswith(f"characters omitted; full output in {saved}, read it with read_file ...]")

    # The model pages through the saved output with read_file.
    page = await ws.ok("read_file", path=str(saved), offset=2500, limit=2)
    assert page.splitlines()[:2] == ["  2500\tline 2500", "  2501\tline 2501"]


async def test_each_saved_output_gets_its_own_file(ws):
    ws.max_output_chars = 100
    first = await ws.call("bash", command="seq 1 1000")
    second = await ws.call("bash", command="seq 1 1000")
    assert first.full_output_path != second.full_output_path


async def test_a_timeout_is_reported_and_the_command_killed(ws):
    started = time.monotonic()
    outcome = await ws.call("bash", command="echo before; sleep 30", timeout=0.5)
    assert time.monotonic() - started < 10
    assert outcome.is_error
    assert outcome.content == ("before\n[timed out after 0.5 s; the process group was killed]")


class RecordingExecutor:
    """Remembers the timeout each command was given."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        on_output: OutputSink | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self.timeouts.append(timeout_s)
        return ExecResult(exit_code=0, output="")


async def test_the_timeout_defaults_to_the_context_and_is_capped_at_600_s(ws):
    executor = RecordingExecutor()
    ws.executor = executor
    await ws.ok("bash", command="true")
    await ws.ok("bash", command="true", timeout=5)
    await ws.ok("bash", command="true", timeout=3600)
    assert executor.timeouts == [120.0, 5.0, 600.0]


async def test_a_non_positive_timeout_is_an_argument_error(ws):
    error = await ws.fails("bash", command="true", timeout=0)
    assert "timeout" in error and "greater than 0" in error
