"""Each edit format parsed and applied, multi-block all-or-nothing, and the refusals' messages."""

from __future__ import annotations

import pytest

from kestrel.edits import (
    Ambiguous,
    EditRejected,
    FileExists,
    FileMissing,
    MalformedEdit,
    NoMatch,
    apply_edit,
)

FILES = {"a.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n", "b.txt": "one\ntwo\n"}


def call(path: str, old: str, new: str, **extra: object) -> dict[str, object]:
    return {"command": "str_replace", "path": path, "old_str": old, "new_str": new, **extra}


# str_replace


def test_str_replace_exact_substring():
    out = apply_edit(FILES, [call("a.py", "return 1", "return 10")], "str_replace")
    assert out["a.py"] == FILES["a.py"].replace("return 1", "return 10")
    assert out["b.txt"] == FILES["b.txt"]


def test_str_replace_replace_all_and_ambiguity():
    files = {"x": "a a a\n"}
    with pytest.raises(Ambiguous):
        apply_edit(files, [call("x", "a", "b")], "str_replace")
    out = apply_edit(files, [call("x", "a", "b", replace_all=True)], "str_replace")
    assert out == {"x": "b b b\n"}


def test_str_replace_refusals():
    with pytest.raises(MalformedEdit, match="the same"):
        apply_edit(FILES, [call("a.py", "x", "x")], "str_replace")
    with pytest.raises(Ambiguous, match="empty"):
        apply_edit(FILES, [call("a.py", "", "x")], "str_replace")
    with pytest.raises(FileMissing, match="does not exist"):
        apply_edit(FILES, [call("nope.py", "x", "y")], "str_replace")
    with pytest.raises(MalformedEdit, match="unknown command"):
        apply_edit(FILES, [{"command": "view", "path": "a.py"}], "str_replace")


def test_str_replace_create_and_insert():
    out = apply_edit(
        FILES, [{"command": "create", "path": "n.py", "file_text": "x\n"}], "str_replace"
    )
    assert out["n.py"] == "x\n"
    edit = [{"command": "insert", "path": "b.txt", "insert_line": 1, "new_str": "one and a half"}]
    assert apply_edit(FILES, edit, "str_replace")["b.txt"] == "one\none and a half\ntwo\n"


def test_multi_block_failure_applies_nothing_and_names_the_blocks():
    edit = [call("a.py", "return 1", "return 10"), call("b.txt", "three", "3")]
    with pytest.raises(EditRejected) as info:
        apply_edit(FILES, edit, "str_replace")
    assert info.value.applied == (1,)
    [failure] = info.value.failed
    assert failure.index == 2 and failure.path == "b.txt"
    assert isinstance(failure.error, NoMatch)
    assert "Blocks that would apply: 1" in str(info.value) and "block 2 (b.txt)" in str(info.value)


# SEARCH/REPLACE


def test_search_replace_fenced_with_chatter_and_several_files():
    edit = (
        "Here is the change:\n\n```python\na.py\n<<<<<<< SEARCH\n    return 1\n=======\n"
        "    return 11\n>>>>>>> REPLACE\n```\n\nb.txt\n```\n<<<<<<< SEARCH\ntwo\n=======\n2\n"
        ">>>>>>> REPLACE\n```\n"
    )
    out = apply_edit(FILES, edit, "search_replace")
    assert "return 11" in out["a.py"] and out["b.txt"] == "one\n2\n"


def test_search_replace_empty_search_creates_a_file():
    edit = "new/file.txt\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n"
    assert apply_edit(FILES, edit, "search_replace")["new/file.txt"] == "hello\n"


def test_search_replace_dash_and_plus_spelling():
    edit = "b.txt\n------- SEARCH\none\n=======\n1\n+++++++ REPLACE\n"
    assert apply_edit(FILES, edit, "search_replace")["b.txt"] == "1\ntwo\n"


@pytest.mark.parametrize(
    "edit",
    [
        "b.txt\n<<<<<<< SEARCH\none\n>>>>>>> REPLACE\n",
        "b.txt\n-------SEARCH\none\n=======\n1\n+++++++ REPLACE\n",
        "b.txt\n<<<<<<< SEARCH\none\n======= \n1\n>>>>>>> REPLACE\n",
        "```\nb.txt\n<<<<<<< SEARCH\none\n=======\n1\n",
        "no blocks here at all",
    ],
)
def test_search_replace_malformed(edit):
    with pytest.raises(MalformedEdit):
        apply_edit(FILES, edit, "search_replace")


# unified diff


def test_udiff_line_numbers_break_ties_only():
    files = {"t.py": "x = 1\ny = 2\nx = 1\ny = 2\n"}
    edit = "--- a/t.py\n+++ b/t.py\n@@ -3,2 +3,2 @@\n x = 1\n-y = 2\n+y = 3\n"
    assert apply_edit(files, edit, "udiff")["t.py"] == "x = 1\ny = 2\nx = 1\ny = 3\n"
    stale = "--- a/t.py\n+++ b/t.py\n@@ -90,2 +90,2 @@\n-y = 2\n+y = 9\n x = 1\n"
    assert apply_edit(files, stale, "udiff")["t.py"] == "x = 1\ny = 9\nx = 1\ny = 2\n"


def test_udiff_without_numbers_and_ambiguous_is_refused():
    files = {"t.py": "x = 1\nx = 1\n"}
    with pytest.raises(Ambiguous):
        apply_edit(files, "--- t.py\n+++ t.py\n@@ ... @@\n-x = 1\n+x = 2\n", "udiff")


def test_udiff_new_and_deleted_files():
    edit = (
        "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        "--- a/b.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    )
    out = apply_edit(FILES, edit, "udiff")
    assert out["new.py"] == "a\nb\n" and "b.txt" not in out


def test_udiff_without_headers_is_malformed():
    with pytest.raises(MalformedEdit, match="no file headers"):
        apply_edit(FILES, "@@ -1 +1 @@\n-one\n+1\n", "udiff")


# apply_patch (V4A)


def test_apply_patch_update_add_delete_move():
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@ def g():\n-    return 2\n+    return 20\n"
        "*** Add File: c.py\n+print('c')\n*** Delete File: b.txt\n"
        "*** Update File: c.py\n*** Move to: d.py\n@@\n-print('c')\n+print('d')\n"
        "*** End Patch"
    )
    out = apply_edit(FILES, patch, "apply_patch")
    assert out["a.py"].endswith("    return 20\n")
    assert "b.txt" not in out and "c.py" not in out and out["d.py"] == "print('d')\n"


def test_apply_patch_anchor_picks_among_identical_hunks():
    files = {"m.py": "def f():\n    pass\n\ndef g():\n    pass\n"}
    patch = "*** Begin Patch\n*** Update File: m.py\n@@ def g():\n-    pass\n+    return 1\n"
    assert apply_edit(files, patch, "apply_patch")["m.py"].endswith("def g():\n    return 1\n")


def test_apply_patch_end_of_file_hunk():
    files = {"m.py": "x\ny\nx\n"}
    patch = "*** Begin Patch\n*** Update File: m.py\n@@\n-x\n+z\n*** End of File\n*** End Patch"
    assert apply_edit(files, patch, "apply_patch")["m.py"] == "x\ny\nz\n"


def test_apply_patch_refusals():
    with pytest.raises(FileExists):
        apply_edit(FILES, "*** Begin Patch\n*** Add File: b.txt\n+x\n*** End Patch", "apply_patch")
    with pytest.raises(FileMissing):
        apply_edit(FILES, "*** Begin Patch\n*** Delete File: zz\n*** End Patch", "apply_patch")
    with pytest.raises(MalformedEdit, match="not a V4A patch"):
        apply_edit(FILES, "hello", "apply_patch")
    bad = "*** Begin Patch\n*** Update File: b.txt\n@@\n?one\n*** End Patch"
    with pytest.raises(MalformedEdit, match="starts with"):
        apply_edit(FILES, bad, "apply_patch")
    move = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.txt\n*** End Patch"
    with pytest.raises(FileExists):
        apply_edit(FILES, move, "apply_patch")


def test_apply_patch_is_checked_whole_across_files():
    patch = (
        "*** Begin Patch\n*** Update File: b.txt\n@@\n-one\n+1\n"
        "*** Update File: a.py\n@@\n-    return 99\n+    return 0\n*** End Patch"
    )
    with pytest.raises(EditRejected) as info:
        apply_edit(FILES, patch, "apply_patch")
    assert info.value.applied == (1,) and info.value.failed[0].path == "a.py"


def test_unknown_format():
    with pytest.raises(MalformedEdit, match="unknown edit format"):
        apply_edit(FILES, "x", "yaml")
