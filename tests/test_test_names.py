"""Every module under tests/ has a name of its own: pytest imports test files and the kits beside
them by base name, so two files of one name in different folders break the collection of the
whole suite (one of them is silently the other when run alone)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(
        path.name
        for path in TESTS.rglob("*.py")
        if path.name not in {"conftest.py", "__init__.py"} and "fixtures" not in path.parts
    )
    assert [name for name, count in names.items() if count > 1] == []
