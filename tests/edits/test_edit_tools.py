"""edit_file and apply_patch on real files: tolerant landing, stale reads, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kestrel.protocol.messages import ToolCall
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools import PlannedWrite, ToolContext, ToolOutcome, ToolRegistry, default_tools


class Session:
    """One workspace and one context shared by every call, as one agent session has."""

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

    def write(self, name: str, data: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return path

    async def call(self, name: str, **arguments: object) -> ToolOutcome:
        call = ToolCall(id="c1", name=name, arguments=json.dumps(arguments))
        return await self.registry.dispatch(call, self.ctx)


@pytest.fixture
def s(tmp_path: Path) -> Session:
    root = tmp_path / "ws"
    root.mkdir()
    return Session(root)


async def test_edit_file_lands_a_tolerant_match_in_the_files_indentation(s: Session):
    path = s.write("m.py", "class A:\r\n\tdef f(self):\r\n\t\treturn 1\r\n")
    out = await s.call(
        "edit_file",
        path="m.py",
        old_str="def f(self):\n    return 1",
        new_str="def f(self):\n    return 2",
    )
    assert not out.is_error, out.content
    assert path.read_bytes() == b"class A:\r\n\tdef f(self):\r\n\t\treturn 2\r\n"
    assert "matched with differences tolerated" in out.content


async def test_edit_file_refuses_a_file_changed_since_it_was_read(s: Session):
    path = s.write("m.py", "a = 1\n")
    assert not (await s.call("read_file", path="m.py")).is_error
    path.write_text("a = 1\nb = 2\n")
    out = await s.call("edit_file", path="m.py", old_str="a = 1", new_str="a = 3")
    assert out.is_error
    assert "changed since you last read it" in out.content and "2\tb = 2" in out.content
    assert path.read_text() == "a = 1\nb = 2\n" and s.planned == []
    # The refusal showed the fresh content, so the next edit goes through.
    assert not (await s.call("edit_file", path="m.py", old_str="a = 1", new_str="a = 3")).is_error


async def test_consecutive_edits_after_one_read_are_not_stale(s: Session):
    s.write("m.py", "a = 1\nb = 2\n")
    await s.call("read_file", path="m.py")
    assert not (await s.call("edit_file", path="m.py", old_str="a = 1", new_str="a = 3")).is_error
    assert not (await s.call("edit_file", path="m.py", old_str="b = 2", new_str="b = 4")).is_error


async def test_edit_file_refuses_invalid_utf8(s: Session):
    s.write("bad.txt", b"ok\n\xff\xfe\n")
    out = await s.call("edit_file", path="bad.txt", old_str="ok", new_str="no")
    assert out.is_error and "binary file" in out.content


async def test_edit_file_reports_new_syntax_errors_and_keeps_the_edit(s: Session):
    path = s.write("m.py", "def f():\n    return 1\n")
    out = await s.call("edit_file", path="m.py", old_str="return 1", new_str="return (1")
    assert not out.is_error
    assert "syntax errors" in out.content and path.read_text() == "def f():\n    return (1\n"


async def test_apply_patch_announces_every_write_then_writes_them_all(s: Session):
    s.write("a.py", "x = 1\n")
    s.write("old.py", "gone\n")
    s.write("mv.py", "y = 1\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n"
        "*** Add File: pkg/new.py\n+z = 3\n*** Delete File: old.py\n"
        "*** Update File: mv.py\n*** Move to: moved.py\n@@\n-y = 1\n+y = 2\n*** End Patch"
    )
    out = await s.call("apply_patch", patch=patch)
    assert not out.is_error, out.content
    assert (s.root / "a.py").read_text() == "x = 2\n"
    assert (s.root / "pkg/new.py").read_text() == "z = 3\n"
    assert not (s.root / "old.py").exists() and not (s.root / "mv.py").exists()
    assert (s.root / "moved.py").read_text() == "y = 2\n"
    by_path = {plan.path: plan for plan in s.planned}
    assert set(by_path) == {"a.py", "pkg/new.py", "old.py", "mv.py", "moved.py"}
    assert by_path["old.py"].after_hash is None and by_path["pkg/new.py"].before_hash is None


async def test_apply_patch_writes_nothing_when_one_part_fails(s: Session):
    s.write("a.py", "x = 1\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n"
        "*** Update File: a.py\n@@\n-missing\n+still missing\n*** End Patch"
    )
    out = await s.call("apply_patch", patch=patch)
    assert out.is_error and "not applied" in out.content and "block 2" in out.content
    assert (s.root / "a.py").read_text() == "x = 1\n" and s.planned == []


async def test_apply_patch_refuses_paths_outside_and_malformed_patches(s: Session):
    out = await s.call("apply_patch", patch="*** Begin Patch\n*** Delete File: ../x\n*** End Patch")
    assert out.is_error and "outside the workspace" in out.content
    out = await s.call("apply_patch", patch="just words")
    assert out.is_error and "could not be read" in out.content
