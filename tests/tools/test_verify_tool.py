"""verify: the model's way to check its change, through the registry like any other tool."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from kestrel.tools import ToolRegistry, default_tools
from kestrel.tools.verify import Verify, porcelain_paths

TOOLS_BIN = os.path.dirname(sys.executable)


def venv_which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([TOOLS_BIN, os.environ.get("PATH", "")]))


@pytest.fixture
def ws(ws):
    ws.registry = ToolRegistry([*default_tools(), Verify(timeout_s=120, which=venv_which)])
    return ws


def test_the_model_is_told_about_paths_and_full(ws):
    [spec] = [spec for spec in ws.registry.specs() if spec.name == "verify"]
    assert set(spec.input_schema["properties"]) == {"paths", "full"}
    assert spec.input_schema.get("required", []) == []
    assert ws.registry.kind("verify") == "execute"


async def test_it_reports_syntax_errors_and_failing_tests(ws):
    ws.write("calc.py", "def add(a, b):\n    return a - b\n")
    ws.write(
        "test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    ws.write("broken.py", "def f(:\n    pass\n")
    content = await ws.ok("verify", paths=["calc.py", "broken.py"])
    lines = content.splitlines()
    assert lines[0] == "verification failed (2 of 2 checks)"
    assert "broken.py:1: [syntax/tree-sitter] syntax error: missing `)`" in lines
    assert (
        "test_calc.py:5: [test/pytest] assert 0 == 4 ⏎ +  where 0 = add(2, 2) "
        "(test_calc.py::test_add)"
    ) in lines


async def test_a_clean_change_passes(ws):
    ws.write("calc.py", "def add(a, b):\n    return a + b\n")
    ws.write(
        "test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    content = await ws.ok("verify", paths=["calc.py"])
    assert content.splitlines()[0] == "verification passed"


async def test_nothing_to_check(ws):
    ws.write("notes.md", "# notes\n")
    content = await ws.ok("verify", paths=["notes.md"])
    assert content == "verification: no checks apply to these changes"


async def test_paths_outside_the_workspace_are_refused(ws):
    message = await ws.fails("verify", paths=["../elsewhere.py"])
    assert "outside the workspace" in message


async def test_without_paths_it_needs_git(ws):
    message = await ws.fails("verify")
    assert "call verify with `paths`" in message


@pytest.mark.system
async def test_without_paths_it_checks_what_git_reports(ws):
    if shutil.which("git") is None:
        pytest.skip("git is not installed here")
    subprocess.run(["git", "init", "-q"], cwd=ws.root, check=True)
    ws.write("ok.py", "x = 1\n")
    ws.write("sub/bad name.py", "def f(:\n")
    content = await ws.ok("verify")
    assert "sub/bad name.py:1: [syntax/tree-sitter] syntax error: missing `)`" in content


def test_porcelain_paths():
    output = "".join(
        [
            " M src/a.py\0",
            "?? new dir/b.py\0",
            "R  renamed.py\0old.py\0",
            "D  gone.py\0",
            "A  src/a.py\0",
        ]
    )
    assert porcelain_paths(output) == ["src/a.py", "new dir/b.py", "renamed.py", "gone.py"]
    assert porcelain_paths("") == []
    assert porcelain_paths("garbage\0\0x") == []
