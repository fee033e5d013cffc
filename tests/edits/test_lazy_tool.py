"""The lazy_edit tool: merged on disk through the same announce-then-write path as edit_file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.protocol.messages import ToolCall
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools import PlannedWrite, ToolContext, ToolOutcome, ToolRegistry, default_tools
from kestrel.tools.subjects import describe_call, hook_input

BEFORE = "import os\r\n\r\n\r\ndef run():\r\n    start()\r\n    stop()\r\n"


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.planned: list[PlannedWrite] = []
        self.registry = ToolRegistry(default_tools())
        self.ctx = ToolContext(
            root=root,
            executor=LocalExecutor(),
            artifacts_dir=root.parent / "artifacts",
            on_output=self._on_output,
            before_write=self._before_write,
        )

    async def _on_output(self, stream: str, text: str) -> None:
        return None

    async def _before_write(self, plan: PlannedWrite) -> None:
        self.planned.append(plan)

    async def call(self, name: str, **arguments: object) -> ToolOutcome:
        call = ToolCall(id="c1", name=name, arguments=json.dumps(arguments))
        return await self.registry.dispatch(call, self.ctx)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


async def test_lazy_edit_merges_announces_and_keeps_crlf(ws: Workspace):
    path = ws.root / "m.py"
    path.write_bytes(BEFORE.encode())
    content = "# ... existing code ...\ndef run():\n    start()\n    wait()\n    stop()\n"
    out = await ws.call("lazy_edit", path="m.py", content=content)
    assert not out.is_error, out.content
    assert path.read_bytes() == BEFORE.replace("start()\r\n", "start()\r\n    wait()\r\n").encode()
    assert [plan.path for plan in ws.planned] == ["m.py"]
    assert "+    wait()" in out.content


async def test_lazy_edit_refuses_without_writing(ws: Workspace):
    path = ws.root / "m.py"
    path.write_bytes(BEFORE.encode())
    out = await ws.call("lazy_edit", path="m.py", content="# ...\n    begin()\n    stop()\n")
    assert out.is_error
    assert "not applied" in out.content and "line after a marker" in out.content
    assert path.read_bytes() == BEFORE.encode() and ws.planned == []


async def test_lazy_edit_refuses_a_stale_file_and_a_missing_one(ws: Workspace):
    path = ws.root / "m.py"
    path.write_text("a = 1\n")
    assert not (await ws.call("read_file", path="m.py")).is_error
    path.write_text("a = 1\nb = 2\n")
    out = await ws.call("lazy_edit", path="m.py", content="a = 3\nb = 2\n")
    assert out.is_error and "changed since you last read it" in out.content
    missing = await ws.call("lazy_edit", path="n.py", content="x = 1\n")
    assert missing.is_error and "use write_file" in missing.content


def test_policy_sees_an_edit_of_the_path(tmp_path: Path):
    registry = ToolRegistry(default_tools())
    call = ToolCall(id="c1", name="lazy_edit", arguments='{"path": "src/m.py", "content": "x"}')
    subject = describe_call(call, registry.kind("lazy_edit"), tmp_path)
    assert subject.kind == "edit"
    assert subject.paths == ("src/m.py",)


def test_hooks_see_it_as_claude_codes_edit(tmp_path: Path):
    registry = ToolRegistry(default_tools())
    call = ToolCall(id="c1", name="lazy_edit", arguments='{"path": "m.py", "content": "x = 1"}')
    subject = describe_call(call, registry.kind("lazy_edit"), tmp_path)
    name, given = hook_input(subject)
    assert name == "Edit" and "Edit" in subject.aliases
    assert given["file_path"] == str(tmp_path / "m.py")
    assert given["new_string"] == given["content"] == "x = 1"
