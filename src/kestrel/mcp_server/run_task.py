"""`run_task`: a whole Kestrel session on the repository, run headless to its end.

Each task runs as its own `kestrel -p TASK --output-format json` process in the repository,
exactly as a script would run it: the session gets its overlay, sandbox and budgets there (an
overlay needs a process with a single thread, which this server is not), and a server that dies
takes it along. Its change is then read from the session's checkpoints through the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.app_store import data_dir, open_store
from kestrel.mcp_server.options import ServeOptions, within_cap
from kestrel.protocol.errors import ConfigError, KestrelError
from kestrel.protocol.events_base import PermissionMode
from kestrel.service.change_export import ChangeState, change_patch, session_change
from kestrel.service.sessions import settings_for
from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.code import fit_output

STOP_GRACE_S = 20.0
"""How long a cancelled run may take to settle (its command stopped, the log written)."""
EXIT_USAGE = 2
"""`kestrel -p` exits with this for bad usage or settings: no session ran."""
FINAL_TEXT_SHARE = 0.4
"""At most this share of the result goes to the final answer; the diff gets the rest."""


class RunTaskArgs(BaseModel):
    """Arguments of `run_task`."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, description="What Kestrel should do, in plain language.")
    permission_mode: PermissionMode | None = Field(
        default=None,
        description="plan: read only; default: edits and commands not allowed by a rule are "
        "denied; accept-edits: edits allowed; bypass: everything allowed inside the sandbox. "
        "Left out: the widest mode this server allows.",
    )
    max_turns: int | None = Field(
        default=None, ge=1, description="Stop after this many model turns (a budget)."
    )


class RunTaskTool:
    """Run a Kestrel session on the repository to its end and report how it went."""

    name: ClassVar[str] = "run_task"
    kind: ClassVar[ToolKind] = "execute"
    Args: ClassVar[type[BaseModel]] = RunTaskArgs
    description: ClassVar[str] = (
        "Hand a whole task to Kestrel, an autonomous coding agent: it starts a session on this "
        "repository, finds the code, edits it, runs commands, checks its change and returns "
        "when the session ends (this can take minutes). The result says how it finished "
        "(done, error, budget, ...), its final answer, its cost, and the diff of its change, "
        "whether applied to the checkout (modes accept-edits and bypass, once verified) or "
        "left waiting for review. It runs headless: any permission question that would need a "
        "person is denied, and the model is told so, as `kestrel -p` does."
    )

    def __init__(self, options: ServeOptions) -> None:
        """A tool running tasks with the model and the permission cap of `options`."""
        self._options = options

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Run the session in its own process, then read its change."""
        a = RunTaskArgs.model_validate(args)
        if not a.task.strip():
            raise ToolFailed("task is blank; say what Kestrel should do")
        try:
            mode = within_cap(a.permission_mode, self._options.mode_cap)
        except ConfigError as exc:
            raise ToolFailed(str(exc)) from None
        argv = kestrel_command(a.task, mode, self._options.model, a.max_turns)
        code, out, err = await _run(argv, ctx.root)
        result = _result_of(code, out, err)
        session_id = str(result.get("session_id", ""))
        state, patch = await asyncio.to_thread(_change_of, ctx.root, session_id)
        report = Report(result=result, mode=mode, state=state, patch=patch)
        return ToolOutcome(
            content=report.render(ctx.max_output_chars), is_error=result.get("reason") == "error"
        )


def kestrel_command(
    task: str, mode: PermissionMode, model: str | None, max_turns: int | None
) -> list[str]:
    """The `kestrel -p` command line of one task; after `--` the task is only an argument."""
    argv = [sys.executable, "-m", "kestrel", "-p", "--output-format", "json"]
    argv += ["--permission-mode", mode]
    if model is not None:
        argv += ["--model", model]
    if max_turns is not None:
        argv += ["--max-turns", str(max_turns)]
    return [*argv, "--", task]


async def _run(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run the session's process to its end; a cancelled call stops it as SIGTERM would."""
    env = dict(os.environ)
    # Killed with this server, even by SIGKILL: no session runs on unseen. It resumes from its
    # log with `kestrel resume ID`.
    env.update(KESTREL_DIE_WITH_PARENT=str(os.getpid()), PYTHONUNBUFFERED="1")
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        await _stop(proc)
        raise
    code = proc.returncode if proc.returncode is not None else -1
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM (the session settles as cancelled), then SIGKILL to its group if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _result_of(code: int, out: str, err: str) -> dict[str, Any]:
    """The result object `kestrel -p --output-format json` printed, or why there is none."""
    for line in reversed(out.splitlines()):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict) and found.get("type") == "result":
                return found
    said = [line for line in err.splitlines() if line.strip()][-8:]
    why = "\n".join(said) or "it said nothing"
    hint = (
        "\nNothing ran. The settings in the repository, and the options the server was started "
        "with (`kestrel mcp serve --model PROVIDER:MODEL`), decide how run_task starts."
        if code == EXIT_USAGE
        else ""
    )
    raise ToolFailed(
        f"the session did not run to a result (kestrel exited with code {code}):\n{why}{hint}"
    )


def _change_of(root: Path, session_id: str) -> tuple[ChangeState | None, str]:
    """Whether the session's change was applied or waits for review, and its diff; None and
    the reason when it cannot be read."""
    if not session_id:
        return None, "the result names no session, so its change cannot be read"
    try:
        settings = settings_for(root, {})
        store = open_store(settings)
    except (KestrelError, OSError) as exc:
        return None, f"the session store cannot be opened: {exc}"
    try:
        change = session_change(store, session_id, data_dir(settings))
        return change.state, change_patch(change).decode("utf-8", "replace")
    except (KestrelError, OSError) as exc:
        return None, str(exc)
    finally:
        store.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What `run_task` answers: how the session ended, its answer, and its change."""

    result: dict[str, Any]
    mode: PermissionMode
    state: ChangeState | None
    patch: str

    def render(self, limit: int) -> str:
        """The summary, the final answer and the diff, within `limit` characters."""
        summary = "\n".join(self._summary())
        final = str(self.result.get("final_text") or "(none)")
        room = int(limit * FINAL_TEXT_SHARE)
        if len(final) > room:
            final = fit_output(final, room, "the whole answer is in the session's log").content
        head = f"{summary}\n\nFinal answer:\n{final}\n\nDiff:\n"
        if self.state is None:
            return f"{head}(not available: {self.patch})"
        diff = self.patch.rstrip("\n") or "(no file changed)"
        advice = f"see the whole change with {self._whole_change()}"
        return head + fit_output(diff, max(limit - len(head), 200), advice).content

    def _summary(self) -> list[str]:
        """How it finished, what it cost, where its change is, and what to do next."""
        r = self.result
        sid = r.get("session_id", "?")
        reason = r.get("reason", "?")
        detail = f" ({r['detail']})" if r.get("detail") else ""
        lines = [f"Session {sid} finished: {reason}{detail}; exit code {r.get('exit_code')}."]
        lines.append(f"Permission mode: {self.mode}. Spent: {_spent(r.get('totals') or {})}.")
        lines.append(f"Change: {self._change_line()}")
        if r.get("not_verified"):
            lines.append(f"Not verified: {r['not_verified']}")
        if reason == "plan":
            lines.append(
                f"It proposed a plan: `kestrel plan show {sid}`, then `kestrel plan approve "
                f"{sid}` or `kestrel plan reject {sid} -m WHY` in the repository."
            )
        elif reason != "done":
            lines.append(f"Continue it with `kestrel resume {sid}` in the repository.")
        return lines

    def _change_line(self) -> str:
        """Where the change is: in the checkout, waiting for review, or nowhere."""
        sid = self.result.get("session_id", "?")
        if self.state == "applied":
            return "applied to the checkout."
        if self.state == "pending":
            return (
                f"waiting for review, not in the checkout yet: `kestrel apply {sid}` applies "
                f"it, `kestrel discard {sid}` drops it."
            )
        if self.state == "none":
            return "none: no file was changed."
        return "unknown (see below)."

    def _whole_change(self) -> str:
        """The command that shows the whole change when the diff was cut."""
        sid = self.result.get("session_id", "?")
        return f"`kestrel diff {sid}`" if self.state == "pending" else "`git diff`"


def _spent(totals: dict[str, Any]) -> str:
    """Dollars, turns, tool calls and tokens, saying when a figure is only a lower bound."""
    cost = float(totals.get("cost_usd") or 0.0)
    dollars = f"${cost:.4f}" + ("" if totals.get("cost_known", True) else " or more")
    estimated = " (estimated)" if totals.get("tokens_estimated") else ""
    turns = _count(int(totals.get("turns", 0)), "turn")
    calls = _count(int(totals.get("tool_calls", 0)), "tool call")
    tokens = _count(int(totals.get("tokens", 0)), "token")
    return f"{dollars} over {turns}, {calls}, {tokens}{estimated}"


def _count(n: int, noun: str) -> str:
    """`1 turn`, `2 turns`."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
