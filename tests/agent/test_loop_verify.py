"""Verification when the model says it is done: failures go back to it, for a bounded number
of rounds, then the session stops with the failures attached."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from loop_kit import make_loop

from kestrel.models.scripted import ScriptedTurn
from kestrel.protocol.events import ContextAdded, VerificationFinished, VerifyFailure
from kestrel.workspace.verify.session import SessionVerifier

BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _edit(old: str, new: str) -> ScriptedTurn:
    arguments = {"path": "calc.py", "old_str": old, "new_str": new}
    return ScriptedTurn(tool_calls=(("edit_file", json.dumps(arguments)),))


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(TESTS)
    return root


def _which(name: str) -> str | None:
    """The running interpreter stands for python3, so pytest is there to run."""
    return sys.executable if name in ("python3", "python") else shutil.which(name)


def _events(loop: object, kind: type) -> list:  # type: ignore[type-arg]
    return [r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, kind)]  # type: ignore[attr-defined]


def test_a_failing_test_is_sent_back_and_the_fix_is_verified(tmp_path: Path) -> None:
    root = _project(tmp_path)
    turns = [
        _edit("a - b", "a * b"),
        ScriptedTurn(text="done"),
        _edit("a * b", "a + b"),
        ScriptedTurn(text="fixed for real"),
    ]
    loop = make_loop(root, turns)
    loop.verifier = SessionVerifier(loop.environment.executor, root, which=_which)

    finished = asyncio.run(loop.run())

    assert (finished.reason, finished.final_text) == ("done", "fixed for real")
    first, second = _events(loop, VerificationFinished)
    assert not first.ok and first.blocking and first.round == 1
    assert first.paths == ("calc.py",)
    (failure,) = [f for f in first.failures if f.kind == "test"]
    assert failure.test == "test_calc.py::test_add" and failure.tool == "pytest"
    assert "assert 6 == 5" in failure.message or "assert" in failure.message
    (note,) = _events(loop, ContextAdded)
    assert note.source == "verification" and "test_calc.py::test_add" in note.text
    assert second.ok and second.round == 2


class _AlwaysFailing:
    """A verifier whose check never passes, blocking or not."""

    def __init__(self, *, blocking: bool) -> None:
        self.blocking = blocking
        self.calls: list[Sequence[str]] = []

    async def verify(self, paths: Sequence[str]) -> VerificationFinished:
        self.calls.append(paths)
        failure = VerifyFailure(kind="test" if self.blocking else "error", tool="t", message="no")
        return VerificationFinished(
            ok=False, blocking=self.blocking, paths=tuple(paths), failures=(failure,), report="x"
        )


def test_failed_rounds_are_bounded_then_the_session_stops_unverified(tmp_path: Path) -> None:
    root = _project(tmp_path)
    turns = [
        _edit("a - b", "a * b"),
        ScriptedTurn(text="done"),
        _edit("a * b", "a // b"),
        ScriptedTurn(text="done again"),
    ]
    loop = make_loop(root, turns)
    loop.config = replace(loop.config, max_verify_rounds=1)
    verifier = _AlwaysFailing(blocking=True)
    loop.verifier = verifier

    finished = asyncio.run(loop.run())

    assert finished.reason == "unverified"
    assert "1 verification failure(s) remain after 2 rounds" in finished.detail
    assert [e.round for e in _events(loop, VerificationFinished)] == [1, 2]
    assert len(verifier.calls) == 2


def test_a_tool_that_cannot_run_is_reported_but_does_not_loop(tmp_path: Path) -> None:
    root = _project(tmp_path)
    loop = make_loop(root, [_edit("a - b", "a + b"), ScriptedTurn(text="done")])
    loop.verifier = _AlwaysFailing(blocking=False)

    finished = asyncio.run(loop.run())

    assert finished.reason == "done"
    (verified,) = _events(loop, VerificationFinished)
    assert not verified.ok and not verified.blocking
    assert not _events(loop, ContextAdded)


def test_nothing_changed_means_nothing_to_verify(tmp_path: Path) -> None:
    root = _project(tmp_path)
    loop = make_loop(root, [ScriptedTurn(text="nothing to do")])
    verifier = _AlwaysFailing(blocking=True)
    loop.verifier = verifier
    assert asyncio.run(loop.run()).reason == "done"
    assert verifier.calls == []
