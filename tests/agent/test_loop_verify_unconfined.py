"""Verification where commands run outside the sandbox: the project's checks are not run on their
own, the event says the change was not verified and why, and syntax errors still go back."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

from loop_kit import make_loop

from kestrel.cli.render import not_verified, unverified_in
from kestrel.models.scripted import ScriptedTurn
from kestrel.protocol.events import ContextAdded, VerificationFinished
from kestrel.workspace.verify.session import SessionVerifier

WHY = "the sandbox cannot start here (run `kestrel doctor`)"


def _edit(old: str, new: str) -> ScriptedTurn:
    arguments = {"path": "calc.py", "old_str": old, "new_str": new}
    return ScriptedTurn(tool_calls=(("edit_file", json.dumps(arguments)),))


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    # Had pytest run, it would have written here: the check would then have run the project.
    (root / "conftest.py").write_text("open('pytest-ran', 'w').close()\n")
    return root


def _which(name: str) -> str | None:
    return sys.executable if name in ("python3", "python") else shutil.which(name)


async def _why() -> str:
    return WHY


def _verifications(loop: object) -> list[VerificationFinished]:
    records = loop.store.read(loop.session_id)  # type: ignore[attr-defined]
    return [r.event for r in records if isinstance(r.event, VerificationFinished)]


def test_the_change_is_said_to_be_unverified_and_no_check_runs_the_project(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    loop = make_loop(root, [_edit("a - b", "a + b"), ScriptedTurn(text="done")])
    executor = loop.environment.executor
    loop.verifier = SessionVerifier(executor, root, which=_which, unconfined=_why)

    finished = asyncio.run(loop.run())

    assert finished.reason == "done"
    (verified,) = _verifications(loop)
    assert (verified.ok, verified.blocking) == (False, False)
    statuses = {check.name: check.status for check in verified.checks}
    assert statuses == {"syntax": "passed", "pytest": "skipped", "security": "passed"}
    assert verified.report.splitlines()[0] == f"not verified: {WHY}"
    assert not (root / "pytest-ran").exists()
    assert not_verified(verified) == f"not verified: {WHY}"
    assert unverified_in(loop.store.read(loop.session_id)) == f"not verified: {WHY}"


def test_a_syntax_error_still_goes_back_to_the_model(tmp_path: Path) -> None:
    root = _project(tmp_path)
    turns = [
        _edit("a - b", "a +"),
        ScriptedTurn(text="done"),
        _edit("a +", "a + b"),
        ScriptedTurn(text="fixed"),
    ]
    loop = make_loop(root, turns)
    executor = loop.environment.executor
    loop.verifier = SessionVerifier(executor, root, which=_which, unconfined=_why)

    finished = asyncio.run(loop.run())

    assert (finished.reason, finished.final_text) == ("done", "fixed")
    first, second = _verifications(loop)
    assert first.blocking and any(f.kind == "syntax" for f in first.failures)
    notes = [r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, ContextAdded)]
    assert [note.source for note in notes] == ["verification"]
    assert not second.blocking and not_verified(second) == f"not verified: {WHY}"


def test_a_sandboxed_verification_that_passes_is_not_called_unverified(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "conftest.py").unlink()
    loop = make_loop(root, [_edit("a - b", "a + b"), ScriptedTurn(text="done")])
    loop.verifier = SessionVerifier(loop.environment.executor, root, which=_which)

    asyncio.run(loop.run())

    (verified,) = _verifications(loop)
    assert verified.ok and not_verified(verified) is None
