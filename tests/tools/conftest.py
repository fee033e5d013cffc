"""A real workspace on disk and the context the tools get, for the tool tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from kestrel.protocol.messages import ToolCall
from kestrel.sandbox.base import Executor
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools import PlannedWrite, ToolContext, ToolOutcome, ToolRegistry, default_tools


class Workspace:
    """A temporary workspace, the calls made in it, and what the tools announced."""

    def __init__(self, root: Path, artifacts: Path) -> None:
        self.root = root
        self.artifacts = artifacts
        self.planned: list[PlannedWrite] = []
        self.output: list[tuple[str, str]] = []
        self.on_write: Callable[[PlannedWrite], None] | None = None
        self.executor: Executor = LocalExecutor()
        self.max_output_chars = 30_000
        self.registry = ToolRegistry(default_tools())

    def write(self, relative: str, content: str | bytes) -> Path:
        """Put a file in the workspace."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return path

    def context(self) -> ToolContext:
        """The context the tools run with."""
        return ToolContext(
            root=self.root,
            executor=self.executor,
            artifacts_dir=self.artifacts,
            on_output=self._on_output,
            before_write=self._before_write,
            max_output_chars=self.max_output_chars,
        )

    async def call(self, name: str, **arguments: object) -> ToolOutcome:
        """Call a tool the way the loop does: through the registry, with JSON arguments."""
        call = ToolCall(id="call-1", name=name, arguments=json.dumps(arguments))
        return await self.registry.dispatch(call, self.context())

    async def ok(self, name: str, **arguments: object) -> str:
        """Call a tool that must succeed and return what the model sees."""
        outcome = await self.call(name, **arguments)
        assert not outcome.is_error, outcome.content
        return outcome.content

    async def fails(self, name: str, **arguments: object) -> str:
        """Call a tool that must fail and return the error the model sees."""
        outcome = await self.call(name, **arguments)
        assert outcome.is_error, outcome.content
        return outcome.content

    def _on_output(self, stream: Literal["stdout", "stderr"], text: str) -> None:
        self.output.append((stream, text))

    async def _before_write(self, plan: PlannedWrite) -> None:
        if self.on_write is not None:
            self.on_write(plan)
        self.planned.append(plan)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """An empty workspace (not a git repository) with its artifacts folder outside it."""
    root = tmp_path / "workspace"
    root.mkdir()
    return Workspace(root, tmp_path / "artifacts")
