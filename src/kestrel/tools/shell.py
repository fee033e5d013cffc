"""The `bash` tool: one shell command through the session's executor."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.output import looks_binary
from kestrel.tools.base import ToolContext, ToolKind, ToolOutcome

MAX_TIMEOUT_S = 600.0


class BashArgs(BaseModel):
    """Arguments of `bash`."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="The command line, run with `bash -c` in the workspace root.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed (at most 600)."
    )


class Bash:
    """Run a shell command in the workspace."""

    name: ClassVar[str] = "bash"
    kind: ClassVar[ToolKind] = "execute"
    Args: ClassVar[type[BaseModel]] = BashArgs
    description: ClassVar[str] = (
        "Run a shell command with bash in the workspace root and get its output (stdout and "
        "stderr together) and exit code. Use it for tests, builds, git and other programs; "
        "use read_file, list_files and grep to look at files. Each call is a fresh shell, "
        "without input; long output is cut in the middle and saved whole for read_file."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Run the command and report its output and exit code."""
        a = BashArgs.model_validate(args)
        timeout_s = min(a.timeout or ctx.bash_timeout_s, MAX_TIMEOUT_S)
        result = await ctx.executor.run(
            a.command, cwd=ctx.root, timeout_s=timeout_s, on_output=ctx.on_output
        )
        return render_result(result, timeout_s, ctx.artifacts_dir, ctx.max_output_chars)


def render_result(
    result: ExecResult, timeout_s: float, artifacts_dir: Path, max_chars: int
) -> ToolOutcome:
    """What the model sees of a finished command; output past `max_chars` is saved whole."""
    output = result.output
    full_path: str | None = None
    if looks_binary(output):
        saved = save_artifact(artifacts_dir, output)
        full_path = str(saved)
        output = (
            f"[binary output: {len(output):,} characters with NUL bytes near the start, saved "
            f"whole in {saved}; look at it with a command such as `xxd` or `od -c`]"
        )
    elif len(output) > max_chars:
        saved = save_artifact(artifacts_dir, output)
        full_path = str(saved)
        output = cut_middle(output, max_chars, saved)
    if result.timed_out:
        status = f"[timed out after {timeout_s:g} s; the process group was killed]"
    else:
        status = f"[exit code {result.exit_code}]"
    if result.ended_background:
        status += f"\n{result.ended_background}"
    body = output if output.strip() else "(no output)"
    return ToolOutcome(
        content=f"{body.rstrip(chr(10))}\n{status}",
        is_error=result.timed_out,
        exit_code=result.exit_code,
        truncated=full_path is not None,
        full_output_path=full_path,
    )


def cut_middle(output: str, max_chars: int, saved: Path) -> str:
    """Keep the head and tail of `output` (about `max_chars` in all), noting what was cut."""
    half = max(max_chars // 2, 1)
    head = _snap(output[:half], from_end=True)
    tail = _snap(output[-half:], from_end=False)
    omitted = len(output) - len(head) - len(tail)
    note = (
        f"[... {omitted:,} characters omitted; full output in {saved}, read it with read_file ...]"
    )
    return f"{head}\n{note}\n{tail}"


def _snap(piece: str, *, from_end: bool) -> str:
    # Cut at a line break when one is near, so the model never sees half a line.
    slack = len(piece) // 5
    if from_end:
        at = piece.rfind("\n")
        return piece[: at + 1] if at >= len(piece) - slack else piece
    at = piece.find("\n")
    return piece[at + 1 :] if 0 <= at <= slack else piece


def save_artifact(artifacts_dir: Path, text: str) -> Path:
    """Save `text` under `artifacts_dir` in a file of its own and return that file's path."""
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = artifacts_dir / f"bash-{stamp}-{secrets.token_hex(4)}.txt"
    path.write_text(text, encoding="utf-8")
    return path.resolve()
