"""Edits that are unique once read the way the model wrote them: line numbers copied from a
read, padded V4A headers, V4A chunks that only add lines. Each still refuses when unproven."""

from __future__ import annotations

import pytest

from kestrel.edits import EditError, MalformedEdit, NoMatch, apply_edit

TWICE = "def f():\n    x = 1\n    return x\n\n\ndef g():\n    x = 1\n    return x\n"


def replace(old: str, new: str) -> list[dict[str, str]]:
    return [{"command": "str_replace", "path": "a.py", "old_str": old, "new_str": new}]


def test_read_line_numbers_pick_the_copy_they_name():
    edit = replace(
        "     7\t    x = 1\n     8\t    return x", "     7\t    x = 2\n     8\t    return x"
    )
    after = apply_edit({"a.py": TWICE}, edit, "str_replace")["a.py"]
    assert after == TWICE[: TWICE.rindex("x = 1")] + "x = 2\n    return x\n"


def test_other_numbering_styles_are_read_too():
    edit = replace("2 | x = 1\n3 | return x", "x = 5\nreturn x")
    after = apply_edit({"a.py": "def f():\nx = 1\nreturn x\n"}, edit, "str_replace")["a.py"]
    assert after == "def f():\nx = 5\nreturn x\n"


def test_numbers_that_do_not_name_the_place_are_refused():
    edit = replace("     5\t    x = 1\n     6\t    return x", "    x = 2\n    return x")
    with pytest.raises(NoMatch):
        apply_edit({"a.py": TWICE}, edit, "str_replace")


def test_numbers_out_of_sequence_are_not_read_as_line_numbers():
    edit = replace("     2\t    x = 1\n     7\t    return x", "    x = 2\n    return x")
    with pytest.raises(NoMatch):
        apply_edit({"a.py": TWICE}, edit, "str_replace")


def patch(body: str) -> str:
    return f"*** Begin Patch\n{body}*** End Patch\n"


def test_padded_and_trimmed_v4a_headers_are_read():
    edit = patch(
        "  *** Update File:a.py   \n@@ def g():\n     x = 1\n-    return x\n+    return -x\n"
    )
    after = apply_edit({"a.py": TWICE}, edit, "apply_patch")["a.py"]
    assert after.endswith("def g():\n    x = 1\n    return -x\n")


def test_a_v4a_chunk_that_only_adds_goes_below_its_anchor_line():
    edit = patch("*** Update File: a.py\n@@ def g():\n+    y = 0\n")
    after = apply_edit({"a.py": TWICE}, edit, "apply_patch")["a.py"]
    assert "def g():\n    y = 0\n    x = 1\n" in after


def test_a_v4a_chunk_that_only_adds_with_no_anchor_goes_at_the_end():
    edit = patch("*** Update File: a.py\n@@\n+# end\n")
    assert apply_edit({"a.py": TWICE}, edit, "apply_patch")["a.py"] == TWICE + "# end\n"


def test_an_anchor_line_the_file_has_twice_or_not_at_all_is_refused():
    with pytest.raises(EditError, match="matches 2 places"):
        apply_edit({"a.py": TWICE}, patch("*** Update File: a.py\n@@ x = 1\n+y\n"), "apply_patch")
    with pytest.raises(MalformedEdit, match="has no such line"):
        apply_edit(
            {"a.py": TWICE}, patch("*** Update File: a.py\n@@ def h():\n+y\n"), "apply_patch"
        )


def roo_block(start: str, old: str, new: str) -> str:
    return (
        f"a.py\n<<<<<<< SEARCH\n:start_line:{start}\n-------\n{old}=======\n{new}>>>>>>> REPLACE\n"
    )


def test_a_roo_code_start_line_picks_one_of_several_matches():
    after = apply_edit(
        {"a.py": TWICE}, roo_block("7", "    x = 1\n", "    x = 2\n"), "search_replace"
    )
    assert after["a.py"] == TWICE[: TWICE.rindex("x = 1")] + "x = 2\n    return x\n"
    first = apply_edit(
        {"a.py": TWICE}, roo_block("2", "    x = 1\n", "    x = 2\n"), "search_replace"
    )
    assert first["a.py"].startswith("def f():\n    x = 2\n")


def test_without_a_start_line_the_same_block_is_ambiguous():
    block = "a.py\n<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError, match="matches 2 places"):
        apply_edit({"a.py": TWICE}, block, "search_replace")


TOTAL = (
    "def total(items):\n"
    "    # add up the prices\n"
    "    result = 0\n"
    "    for item in items:\n"
    "        result += item.price\n"
    "    return result\n"
)


def sr(old: str, new: str) -> str:
    return f"a.py\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def test_context_lines_only_similar_place_the_edit_and_keep_the_files_text():
    old = TOTAL.replace("add up", "sum").replace("    return result\n", "")
    new = old.replace("item.price\n", "item.price * item.count\n")
    after = apply_edit({"a.py": TOTAL}, sr(old, new), "search_replace")["a.py"]
    assert after == TOTAL.replace("item.price\n", "item.price * item.count\n")


def test_a_changed_line_that_is_not_the_files_is_refused_however_similar():
    old = TOTAL.replace("item.price", "item.cost")
    with pytest.raises(NoMatch):
        apply_edit({"a.py": TOTAL}, sr(old, old.replace("cost", "cost * 2")), "search_replace")


def test_two_windows_alike_within_the_margin_are_refused():
    twice = TOTAL + "\n\n" + TOTAL.replace("total", "totals").replace("add up", "add all")
    old = TOTAL.replace("add up", "add").replace("    return result\n", "")
    new = old.replace("item.price\n", "item.price * 2\n")
    with pytest.raises(NoMatch):
        apply_edit({"a.py": twice}, sr(old, new), "search_replace")


def test_v4a_hunks_are_found_in_order_as_the_reference_does():
    text = "a = 1\nb = 2\n\nc = 3\n\na = 1\nb = 2\n"
    edit = patch("*** Update File: a.py\n@@\n-c = 3\n+c = 4\n@@\n a = 1\n-b = 2\n+b = 5\n")
    after = apply_edit({"a.py": text}, edit, "apply_patch")["a.py"]
    assert after == "a = 1\nb = 2\n\nc = 4\n\na = 1\nb = 5\n"


def test_an_rst_underline_in_a_block_is_not_its_divider():
    text = 'def f():\n    """Sum.\n\n    Examples\n    ========\n    """\n'
    block = (
        'a.py\n<<<<<<< SEARCH\n    Examples\n    ========\n    """\n=======\n'
        '    Examples\n    ========\n    >>> f()\n    """\n>>>>>>> REPLACE\n'
    )
    after = apply_edit({"a.py": text}, block, "search_replace")["a.py"]
    assert after.endswith('    Examples\n    ========\n    >>> f()\n    """\n')
