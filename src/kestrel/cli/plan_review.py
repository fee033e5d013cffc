"""The person's side of plan mode: approve, edit or reject a proposed plan.

At a terminal the person is asked when a run stops with a plan; headless, the run stops and
`kestrel plan approve|reject` decides later. Either way the decision is logged by
`kestrel.agent.planning.record_decision` and the session continues.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from kestrel.agent.loop import AgentLoop
from kestrel.agent.planning import Approve, Reject, mode_after_plan, record_decision
from kestrel.cli.line_input import read_line
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import PermissionMode, PlanStep
from kestrel.protocol.oserrors import os_error_text
from kestrel.service.decisions import plan_as_json
from kestrel.tools.plan import PlanInvalid, parse_plan, plan_text


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanChoice:
    """A decision given on the command line: approve (perhaps an edited file) or reject."""

    approve: bool
    file: Path | None = None
    reason: str = ""
    plan_id: str | None = None


def read_plan_file(path: Path) -> tuple[str, tuple[PlanStep, ...]]:
    """An edited plan from a JSON file; a clear `ConfigError` for anything unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the edited plan: {exc.strerror or exc}") from None
    return parse_edited(text, str(path))


def parse_edited(text: str, source: str) -> tuple[str, tuple[PlanStep, ...]]:
    """The summary and steps of an edited plan's JSON text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        summary, steps = parse_plan(data)
    except PlanInvalid as exc:
        raise ConfigError(f"{source}: the plan cannot be used:\n{exc}") from None
    return summary, steps


def decide_from_choice(
    loop: AgentLoop, choice: PlanChoice, configured: PermissionMode, chosen: PermissionMode | None
) -> str:
    """Log a decision given on the command line; return what the model is told next."""
    decision: Approve | Reject
    if not choice.approve:
        if not choice.reason.strip():
            raise ConfigError("say why the plan is rejected: kestrel plan reject ID -m REASON")
        decision = Reject(reason=choice.reason)
    else:
        mode = mode_after_plan(chosen, configured)
        if choice.file is None:
            decision = Approve(mode=mode)
        else:
            summary, steps = read_plan_file(choice.file)
            decision = Approve(mode=mode, summary=summary, steps=steps)
    try:
        return record_decision(loop.state, loop.emit, decision, choice.plan_id)
    except PlanInvalid as exc:
        raise ConfigError(f"the plan cannot be used:\n{exc}") from None


def decision_hint(session_id: str) -> str:
    """How to decide on a plan left waiting."""
    return (
        f"the plan waits for your decision: approve it with `kestrel plan approve {session_id}` "
        f"(edited: add --file plan.json; `kestrel plan show {session_id}` prints it as JSON), "
        f'or reject it with `kestrel plan reject {session_id} -m "why"`'
    )


@dataclass(slots=True)
class ConsolePlanReview:
    """Asks the person at the terminal what to do with the plan a run stopped for."""

    loop: AgentLoop
    console: Console
    mode: PermissionMode
    """The mode the session continues in once the plan is approved."""
    show_plan: bool = False
    """Print the plan first (when no frontend has shown its proposal yet)."""

    async def __call__(self) -> str | None:
        """The next message for the model, or None when the person leaves the plan waiting."""
        plan = self.loop.state.plan
        if plan is None:
            return None
        if self.show_plan:
            self.console.print(f"[bold cyan]Plan {plan.plan_id}[/bold cyan]")
            self.console.print(escape(plan_text(plan.summary, plan.steps)), soft_wrap=True)
        draft = plan_as_json(plan)
        while True:
            options = escape("[a]pprove / [e]dit (JSON, in $EDITOR) / [r]eject / [q]uit")
            self.console.print(f"[bold cyan]Plan: {options}?[/bold cyan] ", end="")
            choice = ((await read_line()) or "q").strip().lower()[:1]
            if choice == "a":
                return self._record(Approve(mode=self.mode))
            if choice == "r":
                self.console.print("[bold cyan]Why? (the model is told)[/bold cyan] ", end="")
                reason = (await read_line()) or ""
                return self._record(Reject(reason=reason))
            if choice == "e":
                try:
                    draft = await asyncio.to_thread(edit_text, draft)
                    summary, steps = parse_edited(draft, "the edited plan")
                except ConfigError as exc:
                    self.console.print(f"[red]{escape(str(exc))}[/red]")
                    continue  # The draft keeps the person's edits for the next try.
                return self._record(Approve(mode=self.mode, summary=summary, steps=steps))
            if choice == "q":
                self.console.print(escape(decision_hint(self.loop.session_id)), soft_wrap=True)
                return None

    def _record(self, decision: Approve | Reject) -> str:
        message = record_decision(self.loop.state, self.loop.emit, decision)
        if isinstance(decision, Approve):
            self.loop.config = replace(self.loop.config, permission_mode=decision.mode)
        return message


def edit_text(text: str) -> str:
    """Open `text` in the person's editor ($VISUAL, $EDITOR, else vi); return what they saved."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="kestrel-plan-") as directory:
        path = Path(directory) / "plan.json"
        path.write_text(text + "\n", encoding="utf-8")
        try:
            subprocess.run([*shlex.split(editor), str(path)], check=False)
        except OSError as exc:
            raise ConfigError(f"cannot start the editor {editor}: {os_error_text(exc)}") from None
        return path.read_text(encoding="utf-8")
