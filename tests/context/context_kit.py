"""Small real repositories for the context engine's tests: files written, bumped and committed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kestrel.context.index_store import IndexStore


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def bump(path: Path) -> None:
    """Make sure a rewrite is visible in the stat even on coarse-grained clocks."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def write(root: Path, files: dict[str, str], *, bumped: bool = False) -> None:
    """Write `files` (path → text) under `root`; `bumped`: each one's stat shows the rewrite."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        if bumped:
            bump(target)


def committed_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository at `root` holding `files` in one commit."""
    root.mkdir()
    write(root, files)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root


def modules_repo(root: Path, count: int, text_of: Callable[[int], str]) -> Path:
    """A git repository of `count` modules `app/mod_NN.py` with `text_of(N)` in each."""
    write(root, {f"app/mod_{i:02}.py": text_of(i) for i in range(count)})
    git(root, "init", "-q")
    return root


COLONY_QUERIES = ["walrus handler", "tusk_size of a walrus", "def handler_7", "colony census"]


def colony_module(i: int, word: str) -> str:
    """Module N of a repository of colonies: a class, a method and a handler naming `word`."""
    return (
        f"class Colony{i}:\n    '''A {word} colony.'''\n\n"
        f"    def census(self, tusk_size={i}):\n        return '{word}' * tusk_size\n\n\n"
        f"def handler_{i}(request):\n    return Colony{i}().census()\n"
    )


def colony_answers(engine: Any) -> list[Any]:
    """What an engine answers to the colony queries, files and definitions, scores rounded."""
    out: list[list[Any]] = []
    for query in COLONY_QUERIES:
        result = engine.search(query, k=20)
        out.append([(h.path, round(h.score, 9)) for h in result.files])
        out.append([(s.path, s.qualname, s.line, round(s.score, 9)) for s in result.symbols])
    return out


def assert_colonies_keep_working(engine: Any, repo: Path) -> None:
    """An engine over a colony repository reads a record, finds a definition by name, and
    serves a module's new text after it changes (module 3 becomes about narwhals)."""
    record = engine.record("app/mod_03.py")
    assert record is not None and record.symbols is not None
    assert [p for p, _ in engine.definitions_named("handler_3")] == ["app/mod_03.py"]
    (repo / "app" / "mod_03.py").write_text(colony_module(3, "narwhal"))
    assert engine.refresh_paths(["app/mod_03.py"]) == 1
    assert [h.path for h in engine.search("narwhal colony").files][:1] == ["app/mod_03.py"]


def decoded_rows(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose rows the index decodes whole from now on (as a reopen decodes the files
    its snapshot does not hold as they are)."""
    paths: list[str] = []
    real = IndexStore.record

    def counted(self: IndexStore, path: str) -> Any:
        paths.append(path)
        return real(self, path)

    monkeypatch.setattr(IndexStore, "record", counted)
    return paths
