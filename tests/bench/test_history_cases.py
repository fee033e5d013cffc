"""The edit-case generator over a repository's history (`bench/history_cases.py`): cases in
the dev schema, self-consistent (the exact ones, applied as plain text, give the expected
file), and the engine lands or refuses them as they say."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import history_cases  # noqa: E402

from kestrel.edits import EditError, apply_edit  # noqa: E402


def read(path: Path) -> str:
    with gzip.open(path, "rt") as handle:
        return handle.read()


def commit(repo: Path, text: str, message: str) -> None:
    (repo / "pkg").mkdir(exist_ok=True)
    (repo / "pkg" / "mod.py").write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            message,
        ],
        check=True,
    )


def module(version: int) -> str:
    body = []
    for n in range(12):
        value = n * version if n in (3, 8) else n
        body += [
            f"def f{n}(x):",
            f"    '''Return {n}.'''",
            f"    y = x + {value}",
            "    return y",
            "",
            "",
        ]
    return "\n".join(body).rstrip("\n") + "\n"


@pytest.fixture
def history(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for version in range(1, 9):
        commit(repo, module(version), f"v{version}")
    return repo


def test_generated_cases_are_well_formed_and_land_as_they_say(history: Path, tmp_path: Path):
    out = tmp_path / "cases.jsonl.gz"
    made = history_cases.build(history, "t/repo", 40, 3, out)
    assert made > 0
    cases = [json.loads(line) for line in read(out).splitlines()]
    assert len(cases) == made
    for case in cases:
        assert set(case) >= {"id", "source", "format", "perturbation", "files_before", "edit"}
        assert case["id"].startswith("hist/t/repo/")
        [(path, before)] = case["files_before"].items()
        assert path == "pkg/mod.py"
        expect = case["expect"]
        try:
            got = apply_edit(case["files_before"], case["edit"], case["format"])[path]
        except EditError:
            got = None
        if "files_after" in expect:
            assert got in (expect["files_after"][path], None), case["id"]
        else:
            assert got is None, case["id"]
        if case["perturbation"] == "exact" and case["format"] == "str_replace":
            text = before
            for call in case["edit"]:
                assert text.count(call["old_str"]) >= 1
                text = text.replace(call["old_str"], call["new_str"], 1)
            assert text == expect["files_after"][path]


def test_the_same_seed_gives_the_same_cases(history: Path, tmp_path: Path):
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    history_cases.build(history, "t/repo", 10, 5, first)
    history_cases.build(history, "t/repo", 10, 5, second)
    assert read(first) == read(second)
