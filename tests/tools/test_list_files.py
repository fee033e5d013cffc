"""list_files: ripgrep's view of the tree, .gitignore respected, capped with a note."""

from __future__ import annotations

import shutil

import pytest

from kestrel.tools.paths import compile_glob
from kestrel.tools.search import find_rg


@pytest.fixture
def tree(ws):
    ws.write(".gitignore", "build/\n*.log\n")
    ws.write("README.md", "hello\n")
    ws.write("src/app.py", "print(1)\n")
    ws.write("src/pkg/util.py", "x = 1\n")
    ws.write("src/pkg/data.json", "{}\n")
    ws.write(".github/ci.yml", "on: push\n")
    ws.write("build/out.py", "generated\n")
    ws.write("debug.log", "noise\n")
    ws.write(".git/config", "[core]\n")
    return ws


async def test_lists_sorted_respecting_gitignore_outside_a_git_repository(tree):
    content = await tree.ok("list_files")
    assert content.splitlines() == [
        ".github/ci.yml",
        ".gitignore",
        "README.md",
        "src/app.py",
        "src/pkg/data.json",
        "src/pkg/util.py",
    ]


async def test_a_subfolder_and_a_pattern_narrow_the_list(tree):
    assert (await tree.ok("list_files", path="src/pkg")).splitlines() == [
        "src/pkg/data.json",
        "src/pkg/util.py",
    ]
    assert (await tree.ok("list_files", pattern="*.py")).splitlines() == [
        "src/app.py",
        "src/pkg/util.py",
    ]
    assert (await tree.ok("list_files", pattern="src/*.py")).splitlines() == ["src/app.py"]
    # A pattern may also be written relative to the folder being listed.
    assert (await tree.ok("list_files", path="src", pattern="pkg/*")).splitlines() == [
        "src/pkg/data.json",
        "src/pkg/util.py",
    ]


async def test_a_pattern_does_not_bring_back_ignored_files(tree):
    assert await tree.ok("list_files", pattern="*.log") == "No files matching '*.log' under .."


async def test_the_list_is_capped_with_a_count_of_what_was_left_out(ws):
    for n in range(1005):
        ws.write(f"many/f{n:04}.txt", "")
    rows = (await ws.ok("list_files", path="many")).splitlines()
    assert len(rows) == 1001
    assert rows[0] == "many/f0000.txt"
    assert rows[-1] == (
        "[1000 of 1005 files shown; 5 left out: list a subfolder or give a pattern]"
    )


async def test_missing_and_outside_paths_are_refused(ws):
    assert "nowhere does not exist" in await ws.fails("list_files", path="nowhere")
    assert "outside the workspace" in await ws.fails("list_files", path="..")


async def test_an_empty_folder_says_so(ws):
    (ws.root / "empty").mkdir()
    assert await ws.ok("list_files", path="empty") == "No files under empty."


async def test_a_missing_ripgrep_is_a_clear_error(ws, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    error = await ws.fails("list_files")
    assert "ripgrep (rg) is not installed" in error


def test_ripgrep_is_found():
    assert find_rg().endswith("rg")


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/deep/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/deep/er/a.py", True),
        ("**/test_*.py", "tests/tools/test_x.py", True),
        ("*.{ts,tsx}", "web/app.tsx", True),
        ("*.{ts,tsx}", "web/app.js", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("?.md", "x.md", True),
        ("/README.md", "README.md", True),
        ("docs/**", "docs/a/b.md", True),
        ("a+b.txt", "a+b.txt", True),
    ],
)
def test_globs_follow_gitignore_conventions(glob, path, expected):
    assert compile_glob(glob)(path) is expected
