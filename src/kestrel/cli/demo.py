"""`kestrel demo`: a real session on a real bug, with only the model scripted."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.text import Text

from kestrel import app, app_workspace
from kestrel.agent.loop import AgentLoop
from kestrel.agent.ports import DenyingApprover
from kestrel.cli import interrupts
from kestrel.cli.drive import EXIT_DONE, EXIT_ERROR, AfterRun, drive
from kestrel.cli.render import ConsoleFrontend, unverified_in
from kestrel.models.scripted import ScriptedProvider
from kestrel.protocol.events import (
    ChangesReady,
    Record,
    SessionFinished,
    ToolFinished,
    VerificationFinished,
)
from kestrel.sandbox.probe import probe
from kestrel.service import sessions
from kestrel.settings import Settings
from kestrel.workspace.overlay import View, discard_layer

TASK = (
    "Customers say a 15% discount barely changes the price at checkout. "
    "Find the bug, fix it, and make sure the tests pass."
)
UNVERIFIED = "not verified: "
TEST_RULE = "Bash(python3 -m unittest:*)"
"""The one command the demo's session may run without asking."""


@dataclass(slots=True)
class _Demo:
    """What a demo run has opened, so that a Ctrl-C at any point can close it."""

    console: Console
    project: Path
    keep: bool
    session_id: str | None = None
    view: View | None = None


def run_demo(*, keep: bool = False) -> int:
    """Copy the bundled project to a temporary directory, fix it there, show the diff.

    Ctrl-C or SIGTERM at any point: one line, exit 130 or 143, the session recorded as
    cancelled, and the temporary directory removed unless `keep`.
    """
    console = Console(highlight=False)
    workdir = Path(tempfile.mkdtemp(prefix="kestrel-demo-"))
    demo = _Demo(console, workdir / "shop-project", keep)
    try:
        return _demo(demo)
    except KeyboardInterrupt as exc:
        interrupts.note_interrupt(exc)
        return interrupts.announce(console, demo.session_id if keep else None)
    finally:
        _close(demo)
        if keep:
            console.print(f"The project is kept in {demo.project}", style="dim")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _demo(demo: _Demo) -> int:
    console, project = demo.console, demo.project
    bundle = resources.files("kestrel.demo")
    with resources.as_file(bundle / "project") as source:
        shutil.copytree(source, project, ignore=shutil.ignore_patterns("__pycache__"))
    with resources.as_file(bundle / "script.json") as script:
        provider = ScriptedProvider.from_file(script)
        model = f"scripted:{script}"
    before = _snapshot(project)
    console.print(
        Text(
            "Kestrel demo. The model here is SCRIPTED: it replays a fixed script shipped with "
            "Kestrel, so no API key is needed. Everything else is real: the files, the search, "
            "the edits, the commands and the test runs.",
            style="bold yellow",
        )
    )
    console.print(f"Project copied to {project}\nTask: {TASK}\n", style="dim")
    code = _run(demo, provider, model)
    if interrupts.received() is not None:
        return interrupts.announce(console, demo.session_id if demo.keep else None)
    _close(demo)  # The diff is of the project itself, as the change left it.
    _show_diff(console, project, before)
    return code


def _run(demo: _Demo, provider: ScriptedProvider, model: str) -> int:
    console, project = demo.console, demo.project
    # Edits land without asking; the only command the demo may run is its test suite.
    flags: dict[str, object] = {
        "allow": [TEST_RULE],
        "model": model,
        "permission_mode": "accept-edits",
        "max_turns": 20,
    }
    if not asyncio.run(probe()).ok:
        flags["sandbox"] = "none"
        console.print(
            "The sandbox cannot start here (see `kestrel doctor`): the demo's test command "
            "runs unconfined, as you, and Kestrel does not verify the change itself.",
            style="yellow",
        )
    settings = sessions.settings_for(project, flags)
    store = app.open_store(settings)
    try:
        new = sessions.NewSession(task=TASK, cwd=project)
        session_id = demo.session_id = sessions.create_session(store, settings, new)
        parts = app.LoopParts(approver=DenyingApprover(), provider=provider)
        # The session edits an overlay; its change reaches the project when the run is done.
        run = sessions.open_run(store, session_id, settings, project, parts)
        loop, view = run.loop, run.view
        demo.view = view
        frontend = ConsoleFrontend(console, resume_hint=demo.keep)
        after = _hand_off(loop, settings, view) if view else None
        finished = asyncio.run(drive(store, loop, frontend, message=None, after_seq=0, after=after))
        records = store.read(session_id)
    except KeyboardInterrupt as exc:  # Outside `drive`, which turns signals into a cancel.
        interrupts.note_interrupt(exc)
        if demo.session_id is not None:
            interrupts.settle(store, demo.session_id)
        raise
    finally:
        store.close()
    if interrupts.received() is not None:
        return interrupts.exit_code()
    return _verdict(console, finished, session_id, records)


def _verdict(
    console: Console, finished: SessionFinished, session_id: str, records: Sequence[Record]
) -> int:
    """Say whether the tests pass and whether Kestrel verified the change itself."""
    runs = [
        r.event for r in records if isinstance(r.event, ToolFinished) and r.event.name == "bash"
    ]
    checks = [r.event for r in records if isinstance(r.event, VerificationFinished)]
    passed = bool(runs) and runs[-1].exit_code == 0
    verdict = "the tests pass" if passed else "the tests do NOT pass"
    unverified = unverified_in(records)
    if unverified is not None:
        verdict += f"; Kestrel did NOT verify the change: {unverified.removeprefix(UNVERIFIED)}"
    elif checks and checks[-1].ok:
        verdict += "; Kestrel verified the change itself"
    console.print(
        f"\nDemo finished ({finished.reason}); {verdict}. "
        f"See the session again with: kestrel sessions show {session_id}",
        style="bold red" if not passed else "bold yellow" if unverified else "bold green",
    )
    return EXIT_DONE if finished.reason == "done" and passed else EXIT_ERROR


def _close(demo: _Demo) -> None:
    """Take the session's overlay off the project, and drop it with the project unless kept."""
    view, demo.view = demo.view, None
    if view is None:
        return
    if view.kind == "kernel" and os.path.ismount(view.checkout):
        with contextlib.suppress(OSError):
            view.close()
    if not demo.keep:
        discard_layer(view.layer)


def _hand_off(loop: AgentLoop, settings: Settings, view: View) -> AfterRun:
    async def after(finished: SessionFinished) -> None:
        async def decide(_: ChangesReady) -> bool:
            return finished.reason == "done"

        await app_workspace.hand_off(
            loop.store, loop.session_id, settings, view, emit=loop.emit, decide=decide
        )

    return after


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _show_diff(console: Console, project: Path, before: dict[str, str]) -> None:
    after = _snapshot(project)
    console.print("\nThe change, as one diff:", style="bold")
    for path in sorted(set(before) | set(after)):
        lines = difflib.unified_diff(
            before.get(path, "").splitlines(keepends=True),
            after.get(path, "").splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
        for line in lines:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            console.print(Text(line.rstrip("\n"), style=style), soft_wrap=True)
