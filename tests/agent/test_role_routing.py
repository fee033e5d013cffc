"""The routing rule, and the loop asking for the role it picks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from loop_kit import make_loop

from kestrel.agent.ports import OnRetry, OnSwitch
from kestrel.agent.routing import Step, StepKind, role_for
from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, call, say
from kestrel.protocol.events import (
    ModelRequestStarted,
    ModelRole,
    PermissionMode,
    VerificationFinished,
)
from kestrel.protocol.messages import ModelRequest, StreamPart


@pytest.mark.parametrize(
    ("step", "role"),
    [
        (Step(), "main"),
        (Step(permission_mode="accept-edits"), "main"),
        (Step(permission_mode="bypass"), "main"),
        (Step(permission_mode="plan"), "plan"),
        (Step(fixing=True), "edit"),
        (Step(permission_mode="plan", fixing=True), "plan"),
        (Step(kind="title"), "fast"),
        (Step(kind="summary", permission_mode="plan", fixing=True), "fast"),
    ],
)
def test_role_for(step: Step, role: ModelRole) -> None:
    assert role_for(step) == role


class RoleRecorder:
    """A streamer that notes the role of each request and answers with the scripted model."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.inner = streamer_for(provider, RetryPolicy(max_attempts=1))
        self.roles: list[ModelRole] = []

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        self.roles.append(role)
        return self.inner(request, role=role, on_retry=on_retry, on_switch=on_switch)


@pytest.mark.parametrize(("mode", "role"), [("bypass", "main"), ("plan", "plan")])
async def test_the_loop_asks_for_the_role_of_its_mode(
    tmp_path: Path, mode: PermissionMode, role: ModelRole
) -> None:
    loop = make_loop(tmp_path, [], mode=mode)
    recorder = RoleRecorder(ScriptedProvider([call("list_files"), say("done")]))
    loop.streamer = recorder
    models: dict[ModelRole, str] = {"main": "anthropic:big", "plan": "anthropic:thinker"}
    loop.config = replace(loop.config, role_models=models)

    finished = await loop.run()

    assert finished.reason == "done"
    assert recorder.roles == [role, role]
    started = [
        r.event
        for r in loop.store.read(loop.session_id)
        if isinstance(r.event, ModelRequestStarted)
    ]
    assert [(s.role, s.model) for s in started] == [(role, models[role])] * 2


class FailsOnce:
    """A verifier whose first check fails with a test failure and whose later ones pass."""

    def __init__(self) -> None:
        self.checked: list[tuple[str, ...]] = []

    async def verify(self, paths: Sequence[str]) -> VerificationFinished:
        self.checked.append(tuple(paths))
        if len(self.checked) == 1:
            return VerificationFinished(ok=False, blocking=True, paths=tuple(paths), report="F")
        return VerificationFinished(ok=True, paths=tuple(paths), report="ok")


async def test_steps_fixing_a_failed_verification_go_to_the_edit_role(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("x = 1\n")
    turns = [
        call("write_file", path="calc.py", content="x = 2\n"),
        say("done"),
        call("write_file", path="calc.py", content="x = 3\n"),
        say("fixed"),
    ]
    loop = make_loop(tmp_path, [])
    recorder = RoleRecorder(ScriptedProvider(turns))
    loop.streamer = recorder
    loop.verifier = verifier = FailsOnce()

    finished = await loop.run()

    assert (finished.reason, finished.final_text) == ("done", "fixed")
    assert verifier.checked == [("calc.py",), ("calc.py",)]
    assert recorder.roles == ["main", "main", "edit", "edit"]


def test_every_step_kind_has_a_role() -> None:
    kinds: tuple[StepKind, ...] = ("turn", "title", "summary")
    assert {role_for(Step(kind=k)) for k in kinds} == {"main", "fast"}
