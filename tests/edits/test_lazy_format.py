"""Lazy edits: merging a region with elided code, and every reason one is refused."""

from __future__ import annotations

import pytest

from kestrel.edits import Ambiguous, EditRejected, FileMissing, MalformedEdit, NoMatch, apply_edit
from kestrel.edits.elide import classify, is_marker_line, looks_like_note

BEFORE = (
    "import os\n"
    "\n"
    "\n"
    "def load(path):\n"
    "    with open(path) as handle:\n"
    "        data = handle.read()\n"
    "    return data\n"
    "\n"
    "\n"
    "def save(path, data):\n"
    "    with open(path, 'w') as handle:\n"
    "        handle.write(data)\n"
    "    return len(data)\n"
)


def lazy(content: str, files: dict[str, str] | None = None, path: str = "m.py") -> str:
    files = {path: BEFORE} if files is None else files
    return apply_edit(files, {"path": path, "content": content}, "lazy")[path]


def test_a_region_between_markers_replaces_only_its_span():
    edit = (
        "# ... existing code ...\n"
        "def load(path):\n"
        "    with open(path, encoding='utf-8') as handle:\n"
        "        data = handle.read()\n"
        "    return data.strip()\n"
        "\n"
        "\n"
        "def save(path, data):\n"
        "# ... existing code ...\n"
    )
    assert lazy(edit) == BEFORE.replace("open(path) as", "open(path, encoding='utf-8') as").replace(
        "return data\n", "return data.strip()\n"
    )


def test_elided_spans_inside_a_function_are_kept_verbatim():
    edit = (
        "# ... existing code ...\n"
        "def load(path):\n"
        "    # ... existing code ...\n"
        "    return data\n"
        "\n"
        "\n"
        "def save(path, data):\n"
        "    print(path)\n"
        "    with open(path, 'w') as handle:\n"
        "    # ... rest of the function ...\n"
    )
    assert lazy(edit) == BEFORE.replace("data):\n", "data):\n    print(path)\n")


def test_the_text_form_with_a_path_line_and_a_fence():
    edit = "m.py\n```python\nimport os\nimport sys\nx = 1\n# ... existing code ...\n```\n"
    out = apply_edit({"m.py": "import os\nx = 1\ny = 2\n", "n.py": ""}, edit, "lazy")
    assert out == {"m.py": "import os\nimport sys\nx = 1\ny = 2\n", "n.py": ""}


def test_a_whole_file_without_markers_and_new_lines_at_the_top():
    text = "import os\nx = 1\n"
    assert lazy("import os\nx = 2\n", {"m.py": text}) == "import os\nx = 2\n"
    assert lazy("import re\nimport os\nx = 1\n", {"m.py": text}) == "import re\n" + text


def test_other_comment_styles():
    js = "function a() {\n  return 1;\n}\n\nfunction b() {\n  return 2;\n}\n"
    edit = "// ... existing code ...\nfunction b() {\n  return 3;\n}\n"
    assert lazy(edit, {"a.js": js}, "a.js") == js.replace("return 2", "return 3")
    html = "<ul>\n  <li>a</li>\n  <li>b</li>\n</ul>\n"
    edit = "<!-- ... -->\n  <li>b</li>\n  <li>c</li>\n</ul>\n"
    assert lazy(edit, {"a.html": html}, "a.html") == html.replace("</ul>", "  <li>c</li>\n</ul>")


def test_crlf_files_keep_their_endings_and_final_newline_state():
    text = BEFORE.replace("\n", "\r\n")
    edit = "# ... existing code ...\n        handle.write(data)\n    return len(data) * 2\n"
    out = lazy(edit, {"m.py": text})
    assert out == text.replace("return len(data)\r\n", "return len(data) * 2\r\n")
    bare = "a = 1\r\nb = 2"
    assert lazy("a = 1\nb = 3\n", {"m.py": bare}) == "a = 1\r\nb = 3"


def test_a_region_written_with_other_indentation_is_reindented():
    text = "class A:\n    def f(self):\n        x = 1\n        return x\n\n    def g(self):\n"
    edit = "# ...\ndef f(self):\n    x = 1\n    y = 2\n    return x\n# ...\n"
    assert lazy(edit, {"m.py": text}) == text.replace("x = 1\n", "x = 1\n        y = 2\n")


def test_a_python_ellipsis_body_is_code_not_an_elision():
    text = "class P:\n    def f(self) -> int:\n        ...\n"
    edit = (
        "class P:\n    def f(self) -> int:\n        ...\n\n    def g(self) -> str:\n        ...\n"
    )
    assert lazy(edit, {"m.py": text}) == edit


def test_a_bare_ellipsis_that_could_be_either_is_refused():
    text = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    edit = "def f():\n    ...\n\n\ndef g():\n    return 2\n"
    with pytest.raises(MalformedEdit, match=r"could be Python's `\.\.\.`"):
        lazy(edit, {"m.py": text})
    # When the file's body already is `...`, both readings agree.
    same = text.replace("return 1", "...")
    assert lazy(edit.replace("return 2", "return 3"), {"m.py": same}) == same.replace("2", "3")


def test_a_bare_ellipsis_outside_a_block_body_is_an_elision():
    edit = "...\n        handle.write(data)\n    return len(data) - 1\n"
    assert lazy(edit) == BEFORE.replace("return len(data)\n", "return len(data) - 1\n")


def test_an_anchor_that_fits_twice_lands_where_nothing_unseen_is_lost():
    edit = (
        "# ... existing code ...\n"
        "    with open(path) as handle:\n"
        "        print(path)\n"
        "        handle.write(data)\n"
        "# ...\n"
    )
    text = BEFORE.replace("open(path, 'w')", "open(path)")
    # From line 5 the edit would delete load's body and save's head without showing them.
    assert lazy(edit, {"m.py": text}) == text.replace(
        "        handle.write(data)", "        print(path)\n        handle.write(data)"
    )


def test_a_region_the_file_has_twice_is_refused_with_its_candidates():
    twice = BEFORE + "\n\n" + BEFORE.split("\n\n\n", 1)[1]  # load() and save() again
    edit = (
        "# ... existing code ...\n"
        "def save(path, data):\n"
        "    with open(path, 'w') as handle:\n"
        "        handle.write(data.strip())\n"
        "    return len(data)\n"
        "# ...\n"
    )
    with pytest.raises(Ambiguous) as caught:
        lazy(edit, {"m.py": twice})
    assert caught.value.lines == (10, 22)
    assert "matches 2 places" in caught.value.message


def test_a_reading_that_deletes_unseen_lines_is_no_better_than_another():
    # Both `)` fit as well as each other, and either reading deletes a function unseen.
    text = (
        "f(\n    1,\n)\n\ndef a():\n    pass\n\n"
        "g(\n    2,\n)\n\ndef b():\n    pass\n\n"
        "class K:\n    pass\n"
    )
    edit = "# ...\n)\n\nclass K:\n    pass\n"
    with pytest.raises(Ambiguous):
        lazy(edit, {"m.py": text})


def test_a_missing_anchor_is_refused_with_the_closest_line():
    edit = "# ... existing code ...\n    return data.strip()\n# ... existing code ...\n"
    with pytest.raises(NoMatch) as caught:
        lazy(edit)
    assert caught.value.closest_line == 7
    assert "must be unchanged lines copied from the file" in caught.value.message


def test_anchors_out_of_order_are_refused():
    edit = "# ...\ndef save(path, data):\n# ...\ndef load(path):\n    return data\n# ...\n"
    with pytest.raises(MalformedEdit, match="out of order"):
        lazy(edit)


def test_a_missing_leading_or_trailing_marker_is_refused():
    with pytest.raises(MalformedEdit, match="no elision marker above"):
        lazy("def save(path, data):\n    return 0\n")
    with pytest.raises(MalformedEdit, match="no elision marker below"):
        lazy("import os\nimport sys\n")


def test_an_elision_whose_end_cannot_be_found_is_refused():
    # The line after the marker was changed, so where the elided code ends is unknown.
    edit = "# ... existing code ...\n        handle.write(data.encode())\n    return 0\n"
    with pytest.raises(NoMatch, match="line after a marker"):
        lazy(edit)


def test_a_note_without_dots_is_refused():
    edit = "import os\n\n\ndef load(path):\n    # rest of the function unchanged\n# ...\n"
    with pytest.raises(MalformedEdit, match="reads like a note"):
        lazy(edit)


def test_markers_on_a_missing_file_and_an_edit_of_only_markers():
    with pytest.raises(FileMissing):
        apply_edit({}, {"path": "n.py", "content": "# ...\nx = 1\n"}, "lazy")
    assert apply_edit({}, {"path": "n.py", "content": "x = 1"}, "lazy") == {"n.py": "x = 1\n"}
    with pytest.raises(MalformedEdit, match="only elision markers"):
        lazy("# ...\n\n// ...\n")


def test_one_failing_file_refuses_the_whole_edit():
    files = {"a.py": "a = 1\n", "b.py": "b = 1\n"}
    edit = [
        {"path": "a.py", "content": "a = 2\n"},
        {"path": "b.py", "content": "# ...\nc\n# ...\n"},
    ]
    with pytest.raises(EditRejected) as caught:
        apply_edit(files, edit, "lazy")
    assert caught.value.applied == (1,)
    assert [f.path for f in caught.value.failed] == ["b.py"]


def test_marker_forms():
    for line in ("...", "# ... existing code ...", "// ...", "/* ... */", "<!-- ... -->", "…"):
        assert is_marker_line(line), line
    for line in ("...args,", "x = ...", "# Retrying...", "print(...)", "pass"):
        assert not is_marker_line(line), line
    assert looks_like_note("// rest of the code unchanged")
    assert not looks_like_note("# reuse the existing connection")
    assert classify(["def f():", "    ...", "..."], "m.py") == ["code", "doubtful", "marker"]
    assert classify(["def f():", "    ..."], "m.js") == ["code", "marker"]


def test_a_large_edit_lands_exactly():
    before = "".join(f"def f{n}(x):\n    return x + {n}\n\n\n" for n in range(300))
    body = "".join(f"def f{n}(x):\n    return x * {n}\n\n\n" for n in range(100, 226))
    edit = f"# ... existing code ...\n{body}def f226(x):\n# ... existing code ...\n"
    assert edit.count("\n") > 500
    old = "".join(f"def f{n}(x):\n    return x + {n}\n\n\n" for n in range(100, 226))
    assert lazy(edit, {"m.py": before}) == before.replace(old, body)


def test_a_doctest_continuation_and_a_stub_body_are_code_not_markers():
    text = (
        "class P:\n"
        "    def size(self) -> int:\n"
        '        """How big."""\n'
        "        ...\n"
        "\n"
        "    def name(self) -> str:\n"
        '        """Its name.\n'
        "\n"
        "        >>> f(1,\n"
        "        ...   2)\n"
        '        """\n'
        "        ...\n"
    )
    edit = (
        "# ... existing code ...\n"
        '        """How big."""\n'
        "        ...\n"
        "\n"
        "    def name(self, short: bool = False) -> str:\n"
        '        """Its name.\n'
        "\n"
        "        >>> f(1,\n"
        "        ...   2)\n"
        '        """\n'
        "        ...\n"
    )
    assert lazy(edit, {"m.py": text}) == text.replace(
        "name(self)", "name(self, short: bool = False)"
    )


def test_a_reading_that_changes_nothing_does_not_win():
    # From the second `}` the stretch is the file as it is; from the first it deletes g().
    text = "def f():\n    x = {\n    }\n\ndef g():\n    y = {\n    }\n\nEND = 1\n"
    edit = "# ...\n    }\n\nEND = 1\n"
    with pytest.raises(Ambiguous):
        lazy(edit, {"m.py": text})


def test_repeated_blocks_leave_which_lines_go_unproven():
    # The stretch rewrites the first block. Ending at the second block's `)` reads as rewriting
    # the first and deleting the second unseen: its ends prove less, but both readings remove
    # lines and keep as many of the stretch's, so the choice would be a guess.
    block = "if m and (\n    10,\n    4,\n    {n},\n) < v:\n    s.update(\n        '{u}',\n    )\n"
    text = (
        "S = {\n    'a': 1,\n}\n" + block.format(n=3, u="x") + block.format(n=12, u="y") + "E = 1\n"
    )
    edit = (
        "# ... existing code ...\n}\nif m and (\n    v < 5\n):\n"
        "    s.update(\n        'x',\n    )\n# ... existing code ...\n"
    )
    with pytest.raises(Ambiguous, match="matches 2 places"):
        lazy(edit, {"m.py": text})


def test_a_twin_block_with_context_at_both_ends_is_refused_not_outvoted():
    # The edit rewrites the second block (quotes, a new line). The first block, untouched,
    # matches more of the edit's tail, but the second has three lines of context at both ends
    # too: both are real candidates, so the edit is refused rather than landed on the first.
    def block(name: str, q: str) -> str:
        return (
            f"def test_{name}():\n    cfg = Config()\n    for s in items:\n        # Multiline\n"
            f"        a = {name}(\n            f{q}{{s}}{q},\n            {q}x{q},\n"
            "        )\n        b = 1\n        assert a\n\n\n"
        )

    text = block("Google", "'") + block("Numpy", '"')
    edit = (
        "# ... existing code ...\n    cfg = Config()\n    for s in items:\n        # Multiline\n"
        "        u = 1\n        a = Numpy(\n            f'{s}',\n            'x',\n"
        "        )\n        b = 1\n        assert a\n# ... existing code ...\n"
    )
    with pytest.raises(Ambiguous):
        lazy(edit, {"m.py": text})
