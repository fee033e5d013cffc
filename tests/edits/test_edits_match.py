"""Matching tiers, strict to tolerant: each lands exactly, and two candidates are always refused."""

from __future__ import annotations

import pytest

from kestrel.edits import Ambiguous, NoMatch, apply_edit


def sr(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def apply_sr(text: str, search: str, replace: str) -> str:
    return apply_edit({"f.py": text}, sr("f.py", search, replace), "search_replace")["f.py"]


def test_exact():
    assert apply_sr("a\nb\nc\n", "b\n", "B\n") == "a\nB\nc\n"


def test_trailing_whitespace_keeps_the_files_context_bytes():
    text = "def f():  \n    x = 1\n    return x\n"
    out = apply_sr(text, "def f():\n    x = 1\n", "def f():\n    x = 2\n")
    assert out == "def f():  \n    x = 2\n    return x\n"


def test_crlf_file_edited_with_lf_text_stays_crlf():
    out = apply_sr("a\r\nb\r\nc\r\n", "b\n", "B\nB2\n")
    assert out == "a\r\nB\r\nB2\r\nc\r\n"


def test_mixed_line_endings_keep_each_lines_own():
    out = apply_sr("a\r\nb\nc\r\n", "a\nb\n", "a\nB\n")
    assert out == "a\r\nB\r\nc\r\n" or out == "a\r\nB\nc\r\n"
    assert out.startswith("a\r\n") and out.endswith("c\r\n")


def test_uniform_indentation_offset_is_reapplied_to_new_lines():
    text = "class A:\n    def f(self):\n        return 1\n"
    out = apply_sr(text, "def f(self):\n    return 1\n", "def f(self):\n    x = 1\n    return x\n")
    assert out == "class A:\n    def f(self):\n        x = 1\n        return x\n"


def test_over_indented_edit_is_dedented():
    text = "def f():\n    return 1\n"
    out = apply_sr(
        text, "        def f():\n            return 1\n", "        def f():\n            return 2\n"
    )
    assert out == "def f():\n    return 2\n"


def test_tabs_in_the_edit_become_the_files_spaces():
    text = "def f():\n    if x:\n        return 1\n"
    out = apply_sr(text, "def f():\n\tif x:\n\t\treturn 1\n", "def f():\n\tif x:\n\t\treturn 2\n")
    assert out == "def f():\n    if x:\n        return 2\n"


def test_spaces_in_the_edit_become_the_files_tabs():
    text = "def f():\n\tif x:\n\t\treturn 1\n"
    out = apply_sr(
        text, "def f():\n    if x:\n        return 1\n", "def f():\n    if x:\n        y = 2\n"
    )
    assert out == "def f():\n\tif x:\n\t\ty = 2\n"


def test_blank_line_missing_from_the_search_only_is_not_doubled():
    text = "a = 1\n\n\nb = 2\nc = 3\n"
    out = apply_sr(text, "a = 1\n\nb = 2\n", "a = 1\n\n\nb = 20\n")
    assert out == "a = 1\n\n\nb = 20\nc = 3\n"


def test_blank_line_missing_in_a_diff_is_kept():
    text = "a = 1\n\n\nb = 2\nc = 3\n"
    edit = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a = 1\n \n-b = 2\n+b = 20\n"
    assert apply_edit({"f.py": text}, edit, "udiff")["f.py"] == "a = 1\n\n\nb = 20\nc = 3\n"


def test_blank_line_added_in_the_search_only_matches_and_new_text_is_kept():
    text = "a = 1\nb = 2\nc = 3\n"
    out = apply_sr(text, "a = 1\n\nb = 2\n", "a = 1\n\nb = 20\n")
    assert out == "a = 1\n\nb = 20\nc = 3\n"


def test_unicode_look_alikes_match_and_are_folded_in_new_lines():
    text = 'msg = "it\'s - ok"\n'
    out = apply_sr(
        text, "msg = \u201cit\u2019s \u2013 ok\u201d\n", "msg = \u201cit\u2019s \u2013 fine\u201d\n"
    )
    assert out == 'msg = "it\'s - fine"\n'


def test_elision_markers_stand_for_the_lines_between_unique_anchors():
    text = "def f():\n    a = 1\n    b = 2\n    c = 3\n    return a\n"
    search = "def f():\n    # ... existing code ...\n    return a\n"
    replace = "def f():\n    # ... existing code ...\n    return a + c\n"
    out = apply_sr(text, search, replace)
    assert out == "def f():\n    a = 1\n    b = 2\n    c = 3\n    return a + c\n"


def test_elision_marker_moved_by_the_edit_is_refused():
    text = "a\nb\nc\nd\n"
    with pytest.raises(Exception, match="elision marker"):
        apply_sr(text, "a\n...\nd\n", "...\na\nd\n")


def test_two_candidates_at_the_deciding_tier_are_refused_with_their_lines():
    text = "x = 1\ny = 2\nx = 1\n"
    with pytest.raises(Ambiguous) as info:
        apply_sr(text, "x = 1\n", "x = 3\n")
    assert info.value.lines == (1, 3)
    assert "lines 1, 3" in str(info.value)


def test_ambiguity_at_a_tolerant_tier_is_refused_too():
    text = "if a:\n    x = 1\nif b:\n        x = 1\n"
    with pytest.raises(Ambiguous) as info:
        apply_sr(text, "  x = 1\n", "  x = 2\n")
    assert info.value.lines == (2, 4)
    assert "indentation" in str(info.value)


def test_a_stricter_tier_wins_over_a_looser_one():
    text = "    x = 1\nx = 1  \n"
    assert apply_sr(text, "    x = 1\n", "    x = 2\n") == "    x = 2\nx = 1  \n"


def test_no_match_shows_the_closest_lines_and_a_diff():
    text = "".join(f"line {n}\n" for n in range(1, 30)) + "def run(self, x):\n    return x\n"
    with pytest.raises(NoMatch) as info:
        apply_sr(text, "def run(self, y):\n    return x\n", "pass\n")
    error = info.value
    assert error.closest_line == 30
    assert "    30\tdef run(self, x):" in str(error)
    assert "-def run(self, y):" in error.diff and "+def run(self, x):" in error.diff


def test_no_match_without_anything_close():
    with pytest.raises(NoMatch) as info:
        apply_sr("a\n", "zzz qqq\n", "y\n")
    assert info.value.closest_line is None
    assert "Read the file again" in str(info.value)


def test_final_newline_absent_stays_absent():
    assert apply_sr("a\nb", "b\n", "c\n") == "a\nc"
    assert apply_sr("a\nb", "a\n", "x\n") == "x\nb"


def test_bom_is_kept():
    assert apply_sr("\ufeffa\nb\n", "a\n", "x\n") == "\ufeffx\nb\n"


def test_empty_file_gets_content_from_an_empty_search():
    assert apply_sr("", "", "hello\n") == "hello\n"


def test_large_file_lands_only_the_edited_range():
    lines = [f"value_{n} = {n}\n" for n in range(5000)]
    text = "".join(lines)
    out = apply_sr(text, "value_2500 = 2500\n", "value_2500 = -1\n")
    assert out == text.replace("value_2500 = 2500\n", "value_2500 = -1\n")
