"""A small Python project with known problems, and the real tools to check it, for verify tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS_BIN = Path(sys.executable).parent

PYPROJECT = """\
[tool.pytest.ini_options]
asyncio_default_fixture_loop_scope = "function"

[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F"]

[tool.mypy]
strict = true
files = ["pkg"]
"""

CALC = """\
import os


def add(a: int, b: int) -> int:
    return a + b


def label(n: int) -> str:
    return n
"""

TESTS = """\
from pkg.calc import add


def test_add():
    assert add(2, 2) == 4


def test_add_wrong():
    result = add(2, 2)
    assert result == 5
"""

UNRELATED = """\
def test_other():
    assert True
"""


def venv_which(name: str) -> str | None:
    """`shutil.which`, looking first beside the interpreter running the tests (the venv)."""
    path = os.pathsep.join([str(TOOLS_BIN), os.environ.get("PATH", "")])
    return shutil.which(name, path=path)


def need(name: str) -> str:
    """The program `name`, or skip the test with the reason."""
    found = venv_which(name)
    if found is None:
        pytest.skip(f"{name} is not installed here")
    return found


def write(root: Path, files: dict[str, str]) -> None:
    """Write `files` (relative path to text) under `root`."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def python_project(root: Path) -> Path:
    """A project configuring ruff and mypy, with a lint error, a type error and a failing test."""
    write(
        root,
        {
            "pyproject.toml": PYPROJECT,
            "pkg/__init__.py": "",
            "pkg/calc.py": CALC,
            "tests/test_calc.py": TESTS,
            "tests/test_unrelated.py": UNRELATED,
        },
    )
    return root


def run(argv: list[str], cwd: Path, **env: str) -> str:
    """Run a real tool and return its stdout and stderr together."""
    completed = subprocess.run(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NO_COLOR": "1", **env},
        timeout=300,
        check=False,
    )
    return completed.stdout
