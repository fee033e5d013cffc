"""A small suite of real-style tasks: git repositories with a real bug, tests, hidden tests, and
scripted sessions that resolve one task, fail the hidden tests of another, and run out of turns
on the third. The model is scripted: these runs score Kestrel's plumbing, not a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KESTREL = [sys.executable, "-m", "kestrel"]
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
TEST_CMD = f"{sys.executable} -m pytest -rA -p no:cacheprovider"
MAX_TURNS = 6

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def make_repo(root: Path, files: dict[str, str], hidden: dict[str, str]) -> tuple[str, str]:
    """A repository holding `files` in one commit; returns (commit, test patch adding `hidden`)."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    commit = git(root, "rev-parse", "HEAD").strip()
    for path, text in hidden.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", "-A")
    patch = git(root, "diff", "--cached", commit)
    git(root, "reset", "-q", "--hard", commit)
    return commit, patch


def turn(
    *calls: tuple[str, dict[str, Any]], text: str = "", tokens: tuple[int, int, float]
) -> dict[str, Any]:
    """One scripted turn with its usage given, so token and cost figures are exact."""
    data: dict[str, Any] = {
        "text": text,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1], "cost_usd": tokens[2]},
    }
    if calls:
        data["tool_calls"] = [{"name": n, "arguments": a} for n, a in calls]
    return data


WORDS = '''"""Counting words in text."""


def word_count(text):
    """How many words `text` holds; words are separated by any whitespace."""
    return len(text.split(" ")) if text else 0
'''
WORDS_TESTS = """from textkit.words import word_count


def test_simple():
    assert word_count("one two three") == 3


def test_empty():
    assert word_count("") == 0
"""
WORDS_HIDDEN = (
    WORDS_TESTS
    + """

def test_double_spaces():
    assert word_count("one  two") == 2


def test_newlines():
    assert word_count("one\\ntwo\\nthree\\n") == 3
"""
)

SPAN = '''"""Closed intervals, given as (start, end) pairs."""


def overlaps(a, b):
    """Whether the closed intervals `a` and `b` share at least one point."""
    return a[0] < b[1] and b[0] < a[1]
'''
SPAN_TESTS = """from intervals.span import overlaps


def test_disjoint():
    assert not overlaps((1, 2), (3, 4))


def test_nested():
    assert overlaps((1, 10), (2, 3))
"""
SPAN_HIDDEN = (
    SPAN_TESTS
    + """

def test_touching_right():
    assert overlaps((1, 2), (2, 3))


def test_touching_left():
    assert overlaps((2, 3), (1, 2))
"""
)

TOTAL = '''"""The total of a shopping cart, in cents."""


def total(items, discount_percent=0):
    """Quantity times unit price over `items`, less `discount_percent` percent."""
    subtotal = sum(quantity * price for quantity, price in items)
    return subtotal - discount_percent
'''
TOTAL_TESTS = """from cart.total import total


def test_no_discount():
    assert total([(2, 500)]) == 1000
"""
TOTAL_HIDDEN = (
    TOTAL_TESTS
    + """

def test_discount():
    assert total([(1, 1000)], 10) == 900
"""
)

SCRIPTS: dict[str, list[dict[str, Any]]] = {
    # Reads the right file, fixes it, runs the tests, and stops: resolved.
    "textkit-1": [
        turn(("read_file", {"path": "textkit/words.py"}), tokens=(1000, 50, 0.001)),
        turn(
            (
                "edit_file",
                {
                    "path": "textkit/words.py",
                    "old_str": 'return len(text.split(" ")) if text else 0',
                    "new_str": "return len(text.split())",
                },
            ),
            tokens=(1200, 80, 0.002),
        ),
        turn(("bash", {"command": PYTEST}), tokens=(1500, 40, 0.002)),
        turn(text="word_count now splits on any whitespace.", tokens=(1600, 30, 0.001)),
    ],
    # Finds the bug but fixes only one of the two comparisons; one edit misses its target.
    "intervals-1": [
        turn(("grep", {"pattern": "def overlaps"}), tokens=(1000, 100, 0.001)),
        turn(("read_file", {"path": "intervals/span.py"}), tokens=(1000, 100, 0.001)),
        turn(("read_file", {"path": "tests/test_span.py"}), tokens=(1000, 100, 0.001)),
        turn(
            (
                "edit_file",
                {
                    "path": "intervals/span.py",
                    "old_str": "a[0] < b[1] and b[0] < a[1]:",
                    "new_str": "a[0] <= b[1] and b[0] <= a[1]:",
                },
            ),
            tokens=(1000, 100, 0.001),
        ),
        turn(
            (
                "edit_file",
                {"path": "intervals/span.py", "old_str": "a[0] < b[1]", "new_str": "a[0] <= b[1]"},
            ),
            tokens=(1000, 100, 0.001),
        ),
        turn(text="Touching intervals now overlap.", tokens=(1000, 100, 0.001)),
    ],
    # Explores without ever editing, and runs out of turns before its fix.
    "cart-1": [
        turn(("list_files", {}), tokens=(2000, 100, 0.002)),
        turn(("read_file", {"path": "cart/total.py"}), tokens=(2000, 100, 0.002)),
        turn(("grep", {"pattern": "discount"}), tokens=(2000, 100, 0.002)),
        turn(("read_file", {"path": "tests/test_total.py"}), tokens=(2000, 100, 0.002)),
        turn(("bash", {"command": PYTEST}), tokens=(2000, 100, 0.002)),
        turn(("read_file", {"path": "cart/__init__.py"}), tokens=(2000, 100, 0.002)),
        turn(
            (
                "edit_file",
                {
                    "path": "cart/total.py",
                    "old_str": "return subtotal - discount_percent",
                    "new_str": "return subtotal * (100 - discount_percent) // 100",
                },
            ),
            tokens=(2000, 100, 0.002),
        ),
        turn(text="Fixed.", tokens=(2000, 100, 0.002)),
    ],
}

PROBLEMS = {
    "textkit-1": "word_count('one  two') says 3: words separated by two spaces or by newlines "
    "are miscounted. Words should be separated by any run of whitespace.",
    "intervals-1": "overlaps((1, 2), (2, 3)) is False, but closed intervals that touch at an "
    "endpoint share that point and overlap.",
    "cart-1": "total([(1, 1000)], 10) gives 990 cents; a 10% discount should give 900.",
}


def build_suite(tmp: Path) -> tuple[Path, Path]:
    """Write the three repositories, their scripts and the suite; returns (suite, scripts dir)."""
    repos = {
        "textkit-1": (
            "example/textkit",
            {"textkit/__init__.py": "", "textkit/words.py": WORDS,
             "tests/test_words.py": WORDS_TESTS},
            {"tests/test_words.py": WORDS_HIDDEN},
            ["textkit/words.py"],
            (["tests/test_words.py::test_double_spaces", "tests/test_words.py::test_newlines"],
             ["tests/test_words.py::test_simple", "tests/test_words.py::test_empty"]),
        ),
        "intervals-1": (
            "example/intervals",
            {"intervals/__init__.py": "", "intervals/span.py": SPAN,
             "tests/test_span.py": SPAN_TESTS},
            {"tests/test_span.py": SPAN_HIDDEN},
            ["intervals/span.py"],
            (["tests/test_span.py::test_touching_right", "tests/test_span.py::test_touching_left"],
             ["tests/test_span.py::test_disjoint", "tests/test_span.py::test_nested"]),
        ),
        "cart-1": (
            "example/cart",
            {"cart/__init__.py": "", "cart/total.py": TOTAL, "tests/test_total.py": TOTAL_TESTS},
            {"tests/test_total.py": TOTAL_HIDDEN},
            ["cart/total.py"],
            (["tests/test_total.py::test_discount"], ["tests/test_total.py::test_no_discount"]),
        ),
    }  # fmt: skip
    scripts = tmp / "scripts"
    scripts.mkdir()
    lines = []
    for instance, (repo, files, hidden, gold, (f2p, p2p)) in repos.items():
        commit, test_patch = make_repo(tmp / "repos" / repo.replace("/", "__"), files, hidden)
        (scripts / f"{instance}.json").write_text(json.dumps(SCRIPTS[instance], indent=1))
        line = {
            "instance_id": instance,
            "repo": repo,
            "base_commit": commit,
            "problem_statement": PROBLEMS[instance],
            "test_patch": test_patch,
            # As SWE-bench files hold them: JSON text of a list.
            "FAIL_TO_PASS": json.dumps(f2p),
            "PASS_TO_PASS": json.dumps(p2p),
            "gold_files": gold,
            "setup": [
                f"{sys.executable} -c \"import pathlib; assert pathlib.Path('tests').is_dir()\""
            ],
            "test_cmd": TEST_CMD,
        }
        lines.append(json.dumps(line))
    suite = tmp / "suite.jsonl"
    suite.write_text("\n".join(lines) + "\n")
    return suite, scripts


def isolated_env(tmp: Path) -> dict[str, str]:
    """The environment of an eval run: its own home, data directory, and no sandbox.

    Commands run unconfined (`--sandbox none`) so the figures do not depend on whether this
    machine has bubblewrap (with it, verification would also run after each edit).
    """
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")},
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "KESTREL_DATA_DIR": str(tmp / "data"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def eval_args(suite: Path, scripts: Path, runs: Path, *extra: str) -> list[str]:
    """The `kestrel eval run` command line for the bundled suite."""
    return [
        *KESTREL,
        "eval",
        "run",
        str(suite),
        "--model",
        f"scripted:{scripts}/{{instance_id}}.json",
        "--sandbox",
        "none",
        "--max-turns",
        str(MAX_TURNS),
        "--runs-dir",
        str(runs),
        *extra,
    ]


def results_of(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's results by instance id."""
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}
