"""Candidates found with different kinds of tolerance: the one that needs fewer wins, and
two that each need a tolerance the other does not are refused, whatever order tiers run in."""

from __future__ import annotations

import pytest

from kestrel.edits import Ambiguous, apply_edit


def sr(old: str, new: str, path: str = "f.txt") -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def test_an_indent_shift_and_a_missing_blank_line_are_equally_good_explanations():
    # `x = 1` + blank fits line 2 shifted by four spaces, and line 1 with a blank line added.
    text = "x = 1\n    x = 1\n\nend"
    with pytest.raises(Ambiguous) as caught:
        apply_edit({"f.txt": text}, sr("x = 1\n\n", "y = 2\n"), "search_replace")
    assert caught.value.lines == (1, 2)


def test_trailing_whitespace_is_a_lesser_tolerance_than_indentation():
    # The needle's trailing spaces are noise; the copy at another indentation is not meant.
    text = (
        "def f():\n    a = 1\n    b = 2\n\nclass K:\n    def f():\n        a = 1\n        b = 2\n"
    )
    edit = sr("def f():  \n    a = 1\n    b = 2\n", "def f():\n    a = 10\n    b = 2\n")
    after = apply_edit({"f.txt": text}, edit, "search_replace")["f.txt"]
    assert after == text.replace("    a = 1\n    b", "    a = 10\n    b", 1)


def test_a_blank_line_tolerance_loses_to_an_exact_indentation_fit_elsewhere():
    # Shifted by four spaces the needle fits lines 4-5 exactly; at lines 1-3 it needs the
    # shift too and a blank line dropped, so the first candidate explains it with less.
    text = "a = 1\n\nb = 2\n    a = 1\n    b = 2\n"
    after = apply_edit(
        {"f.txt": text},
        sr("        a = 1\n        b = 2\n", "        a = 3\n        b = 2\n"),
        "search_replace",
    )["f.txt"]
    assert after == "a = 1\n\nb = 2\n    a = 3\n    b = 2\n"
