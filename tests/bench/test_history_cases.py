"""The edit-case generator over a repository's history (`bench/history_cases.py`), on a tiny
repository: cases in the dev schema, and self-consistent (each exact edit, applied as plain text,
gives the expected file; each refusal keeps the file)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import history_cases

KEYS = ["id", "source", "format", "perturbation", "large", "files_before", "edit", "expect", "meta"]


def module(version: int) -> str:
    """A small module; versions 2 and 3 change a function body and add a function."""
    body = ['"""Arithmetic helpers."""', "", "import math", ""]
    for n in range(8):
        value = f"x * {version}" if n == 3 and version > 1 else f"x + {n}"
        body += ["", f"def f{n}(x):", f'    """Return f{n} of x."""', f"    y = {value}", ""]
        body += ["    return y + 1" if n == 5 and version > 1 else "    return y", ""]
    if version > 2:
        body += ["", "def g(x):", "    return math.sqrt(f1(x))", ""]
    return "\n".join(body).rstrip("\n") + "\n"


def commit(repo: Path, text: str, message: str) -> None:
    (repo / "pkg").mkdir(exist_ok=True)
    (repo / "pkg" / "mod.py").write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", message], check=True)


@pytest.fixture
def small_history(tmp_path: Path) -> Path:
    """A repository whose `pkg/mod.py` is added, then changed by two commits."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for version in (1, 2, 3):
        commit(repo, module(version), f"v{version}")
    return repo


def read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def pairs(fmt: str, edit: object) -> list[tuple[str, str]]:
    """(old text, new text) of each block of an edit, in order."""
    if fmt == "str_replace":
        assert isinstance(edit, list)
        return [(call["old_str"], call["new_str"]) for call in edit]
    assert isinstance(edit, str)
    if fmt == "search_replace":
        found = re.findall(r"<<<<<<< SEARCH\n(.*?)=======\n(.*?)>>>>>>> REPLACE\n", edit, re.S)
        return [(old, new) for old, new in found]
    body = edit.split("\n")[2:] if fmt == "udiff" else edit.split("\n")[2:-2]
    out: list[tuple[list[str], list[str]]] = []
    for line in body:
        if line.startswith("@@"):
            out.append(([], []))
        elif line:
            out[-1][0].extend([line[1:]] if line[0] != "+" else [])
            out[-1][1].extend([line[1:]] if line[0] != "-" else [])
    return [("".join(x + "\n" for x in old), "".join(x + "\n" for x in new)) for old, new in out]


def show(repo: Path, rev: str) -> str:
    command = ["git", "-C", str(repo), "show", f"{rev}:pkg/mod.py"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def replaced(text: str, blocks: list[tuple[str, str]]) -> str:
    for old, new in blocks:
        assert text.count(old) == 1
        text = text.replace(old, new, 1)
    return text


def test_history_cases_are_in_the_dev_schema_and_self_consistent(small_history, tmp_path):
    out = tmp_path / "cases.jsonl.gz"
    made = history_cases.build(small_history, "t/repo", 90, 3, out)  # two tries of each pair
    cases = read(out)
    assert made == len(cases) >= 45
    assert {c["perturbation"] for c in cases} >= {"exact", "crlf_file", "ambiguous"}
    for case in cases:
        assert list(case) == KEYS
        assert re.fullmatch(r"hist/t/repo/[0-9a-f]{10}/[0-9a-f]{6}/\w+/\w+", case["id"])
        assert re.fullmatch(r"t/repo@[0-9a-f]{40}:pkg/mod\.py", case["source"])
        assert case["format"] in history_cases.FORMATS
        assert case["perturbation"] in history_cases.KINDS
        assert list(case["meta"])[-3:] == ["file_lines", "changed_lines", "blocks"]
        [(path, before)] = case["files_before"].items()
        expect, kind = case["expect"], case["perturbation"]
        if expect.get("error"):
            assert expect["kind"] == kind and expect["files_after"] == {path: before}
            continue
        after = expect["files_after"][path]
        sha = case["source"].split("@")[1].split(":")[0]
        if kind not in ("crlf_file", "tabs_spaces", "trailing_ws", "ambiguous"):
            assert (before, after) == (show(small_history, f"{sha}^"), show(small_history, sha))
        if kind == "exact":
            assert replaced(before, pairs(case["format"], case["edit"])) == after
        elif kind == "crlf_file":
            plain = replaced(before.replace("\r\n", "\n"), pairs(case["format"], case["edit"]))
            assert plain.replace("\n", "\r\n") == after


def test_history_cases_are_the_same_for_the_same_seed(small_history, tmp_path):
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    history_cases.build(small_history, "t/repo", 30, 5, first)
    history_cases.build(small_history, "t/repo", 30, 5, second)
    assert read(first) == read(second)
