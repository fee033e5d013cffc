"""`kestrel index`, `kestrel search` and `kestrel map`, run as a user runs them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from cli_kit import Env

FORMAT = "export function formatTotal(amount) {\n  return amount.toFixed(2);\n}\n"


@pytest.fixture
def cached(env: Env, tmp_path: Path) -> Env:
    """The project with a JavaScript file and a README too, its index in a temporary cache."""
    env.vars["KESTREL_CACHE_DIR"] = str(tmp_path / "cache")
    # Distilling the embedding model takes a minute per fresh cache; these tests rank lexically.
    env.vars["KESTREL_EMBEDDER"] = "none"
    (env.project / "format.js").write_text(FORMAT)
    (env.project / "README.md").write_text("# Calculator\n\nA tiny calculator for sums.\n")
    return env


def test_index_builds_then_updates_only_what_changed(cached: Env, tmp_path: Path) -> None:
    first = cached.run("index")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith(f"Indexed {cached.project.resolve()} in ")
    assert lines[1:4] == [
        "  files    4 (4 ranked)",
        "  changes  4 added, 0 changed, 0 removed",
        "  skipped  none",
    ]
    index = Path(lines[4].removeprefix("  index    "))
    assert index.is_file() and index.is_relative_to(tmp_path / "cache")
    assert first.stderr == ""

    (cached.project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (cached.project / "format.js").unlink()
    (cached.project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    again = cached.run("index")
    assert again.stdout.splitlines()[1:4] == [
        "  files    4 (3 ranked)",
        "  changes  1 added, 1 changed, 1 removed",
        "  skipped  binary 1",
    ]


def test_index_shows_a_progress_bar_when_many_files_must_be_read(cached: Env) -> None:
    for n in range(600):
        (cached.project / f"mod{n}.py").write_text(f"def f{n}():\n    return {n}\n")
    done = cached.run("index")
    assert done.returncode == 0, done.stderr
    assert "604 added" in done.stdout
    assert "indexing" in done.stderr and "604/604" in done.stderr


def test_search_prints_ranked_files_with_their_best_symbols(cached: Env) -> None:
    done = cached.run("search", "add two numbers", "--top", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("  calc.py")
    assert lines[1].split() == ["1-2", "function", "add", "def", "add(a,", "b):"]
    files = [line for line in lines if re.fullmatch(r" *\d+\.\d{3}  \S+", line)]
    assert len(files) == 2
    assert re.fullmatch(r"\(\d+ ms\)", lines[-1])


def test_search_json_has_the_documented_shape(cached: Env) -> None:
    done = cached.run("search", "formatTotal amount", "--json", "--cwd", str(cached.project))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"files", "took_ms"}
    assert isinstance(result["took_ms"], float)
    first = result["files"][0]
    assert set(first) == {"path", "score", "symbols"}
    assert first["path"] == "format.js" and isinstance(first["score"], float)
    assert first["symbols"][0] == {
        "qualname": "formatTotal",
        "kind": "function",
        "line": 1,
        "end_line": 3,
        "signature": "function formatTotal(amount)",
        "score": first["symbols"][0]["score"],
    }


def test_map_prints_the_repository_map_within_the_budget(cached: Env) -> None:
    done = cached.run("map", "--budget", "500")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "calc.py"
    assert lines[1:3] == ["  1: def add(a, b):", "  5: def double(x):"]
    assert "format.js" in lines and not any(line.startswith("...") for line in lines)
    assert re.fullmatch(
        r"3 of 3 source files shown \(~\d+ tokens\)\. "
        r"Run `kestrel search QUERY` to find code by what it does\.\n",
        done.stderr,
    )


def test_a_cut_map_says_how_to_see_more_to_the_person(cached: Env) -> None:
    for n in range(12):
        source = f"def function_number_{n}(argument):\n    pass\n"
        (cached.project / f"mod{n}.py").write_text(source)
    done = cached.run("map", "--budget", "100")
    assert done.returncode == 0, done.stderr
    assert "repo_map" not in done.stdout + done.stderr
    assert not done.stdout.splitlines()[-1].startswith("...")
    assert re.fullmatch(
        r"\d+ of 15 source files shown \(~\d+ tokens\)\. Run `kestrel map --budget 200` "
        r"to see more, or `kestrel search QUERY` to find code by what it does\.\n",
        done.stderr,
    )


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_search_query_is_a_usage_error(cached: Env, query: str) -> None:
    done = cached.run("search", query)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        'kestrel: the search query is empty; say what to look for: kestrel search "QUERY"\n'
    )


@pytest.mark.parametrize("command", ["index", "search", "map"])
def test_a_missing_directory_is_one_line_and_exit_code_2(
    cached: Env, tmp_path: Path, command: str
) -> None:
    query = ["anything"] if command == "search" else []
    done = cached.run(command, *query, "--cwd", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert done.stderr == f"kestrel: no such directory: {tmp_path / 'nowhere'}\n"
    assert done.stdout == ""


def test_a_file_is_not_a_directory(cached: Env) -> None:
    done = cached.run("index", "--cwd", str(cached.project / "calc.py"))
    assert done.returncode == 2
    assert done.stderr == f"kestrel: not a directory: {cached.project / 'calc.py'}\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_an_unreadable_directory_is_refused(cached: Env, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0)
    try:
        done = cached.run("index", "--cwd", str(locked))
    finally:
        locked.chmod(0o755)
    assert done.returncode == 2
    assert done.stderr.startswith(f"kestrel: cannot read directory {locked}: ")
    assert done.stderr.count("\n") == 1
