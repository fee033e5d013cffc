"""What is written follows the file: its indentation style when the edit's contradicts a
consistent file, and each format's rule for the final newline."""

from __future__ import annotations

from kestrel.edits import apply_edit

SPACES = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
TABS = "def f():\n\treturn 1\n"


def sr(old: str, new: str, path: str = "f.py") -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def test_tabs_written_into_a_space_indented_file_become_its_spaces():
    # No indented line in the search text says how tabs map: the file's step (4) decides.
    edit = sr("def g():\n", "def g():\n\tx = 1\n\tif x:\n\t\tprint(x)\n")
    after = apply_edit({"f.py": SPACES}, edit, "search_replace")["f.py"]
    assert "def g():\n    x = 1\n    if x:\n        print(x)\n    return 2\n" in after


def test_spaces_written_into_a_tab_indented_file_become_tabs():
    edit = sr("def f():\n", "def f():\n    y = 2\n    if y:\n        y += 1\n")
    after = apply_edit({"f.py": TABS}, edit, "search_replace")["f.py"]
    assert after == "def f():\n\ty = 2\n\tif y:\n\t\ty += 1\n\treturn 1\n"


def test_a_file_that_mixes_both_keeps_what_the_edit_wrote():
    mixed = "def f():\n\treturn 1\n\n\ndef g():\n    return 2\n"
    edit = sr("def g():\n", "def g():\n\tx = 1\n")
    after = apply_edit({"f.py": mixed}, edit, "search_replace")["f.py"]
    assert "def g():\n\tx = 1\n    return 2\n" in after


def test_a_lazy_edit_in_tabs_lands_in_the_files_spaces():
    content = "# ... existing code ...\ndef g():\n\tx = 1\n\treturn 2\n"
    after = apply_edit({"f.py": SPACES}, {"path": "f.py", "content": content}, "lazy")["f.py"]
    assert after.endswith("def g():\n    x = 1\n    return 2\n")


def test_apply_patch_writes_a_final_newline_as_its_reference_does():
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n x = 1\n-y = 2\n+y = 3\n*** End Patch\n"
    assert apply_edit({"a.py": "x = 1\ny = 2"}, patch, "apply_patch")["a.py"] == "x = 1\ny = 3\n"
    crlf = apply_edit({"a.py": "x = 1\r\ny = 2\r\nz"}, patch, "apply_patch")["a.py"]
    assert crlf == "x = 1\r\ny = 3\r\nz\r\n"


def test_other_formats_keep_a_missing_final_newline():
    after = apply_edit({"a.py": "x = 1\ny = 2"}, sr("y = 2\n", "y = 3\n", "a.py"), "search_replace")
    assert after["a.py"] == "x = 1\ny = 3"


def test_an_exact_str_replace_writes_its_new_lines_in_the_files_style():
    text = "from m import (\n    a,\n)\n"
    call = {
        "command": "str_replace",
        "path": "f.py",
        "old_str": "    a,\n)",
        "new_str": "\ta,\n\tb,\n)",
    }
    after = apply_edit({"f.py": text}, [call], "str_replace")["f.py"]
    assert after == "from m import (\n    a,\n    b,\n)\n"
    mid = {"command": "str_replace", "path": "f.py", "old_str": "a,", "new_str": "a,\tb,"}
    assert apply_edit({"f.py": text}, [mid], "str_replace")["f.py"] == text.replace("a,", "a,\tb,")


def test_a_new_str_that_ends_with_a_newline_the_old_str_lacks_adds_a_line():
    # Matched line by line (the old text has a blank line the file lacks), the newline that
    # ends new_str must still leave an empty line, as a plain substring replace would.
    text = "def f():\n    x = 1\n\n    pass\n"
    call = {
        "command": "str_replace",
        "path": "a.py",
        "old_str": "    x = 1\n\n\n    pass",
        "new_str": "    x = 2\n    pass\n",
    }
    assert (
        apply_edit({"a.py": text}, [call], "str_replace")["a.py"]
        == "def f():\n    x = 2\n    pass\n\n"
    )


def test_a_search_text_that_copies_the_files_byte_order_mark_matches():
    block = "m.py\n<<<<<<< SEARCH\n\ufeffimport os\n=======\nimport sys\n>>>>>>> REPLACE\n"
    after = apply_edit({"m.py": "\ufeffimport os\nx = 1\n"}, block, "search_replace")
    assert after["m.py"] == "\ufeffimport sys\nx = 1\n"


def test_tabs_take_the_files_step_despite_a_hanging_indent():
    text = "from m import (a, b)\n\n\ndef f():\n    x = g(1,\n          2)\n    return x\n"
    block = sr("from m import (a, b)\n", "from m import (\n\ta, b, c\n)\n", "m.py")
    after = apply_edit({"m.py": text}, block, "search_replace")["m.py"]
    assert after.startswith("from m import (\n    a, b, c\n)\n")


def test_an_old_str_that_takes_a_newline_its_new_str_leaves_out_joins_the_next_line():
    # As a substring replace would: with trailing spaces tolerated, the line after the match
    # joins the last new line (here a blank one, so the file loses it).
    call = {
        "command": "str_replace",
        "path": "m.py",
        "old_str": "def f():  \n    return 1\n",
        "new_str": "def f():\n    return 1",
    }
    after = apply_edit({"m.py": "def f():\n    return 1\n\n"}, [call], "str_replace")
    assert after["m.py"] == "def f():\n    return 1\n"
