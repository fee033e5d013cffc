"""Lazy edits whose anchors fit several places: which reading the edit's own lines prove."""

from __future__ import annotations

import pytest

from kestrel.edits import Ambiguous, apply_edit


def lazy(content: str, text: str, path: str = "m.py") -> str:
    return apply_edit({path: text}, {"path": path, "content": content}, "lazy")[path]


TESTS = (
    "class T:\n"
    "    def test_a(self):\n"
    "        c = make()\n"
    "        rv = c.delete('/x')\n"
    "        assert rv.status == 405\n"
    "\n"
    "    def test_b(self):\n"
    "        app = new()\n"
    "        c = make()\n"
    "        rv = c.delete('/x')\n"
    "        assert rv.status == 405\n"
    "\n"
    "    def test_c(self):\n"
    "        app = new()\n"
    "        assert app\n"
)


def test_an_insertion_beats_a_reading_that_rewrites_similar_code_unseen():
    # From test_a's `rv` the stretch would rewrite test_b and keep more of its own lines (the
    # new test resembles it); from test_b's it only adds lines, changing fewer.
    runs = "        app.run()\n"
    edit = (
        "        # ... existing code ...\n"
        "        rv = c.delete('/x')\n"
        "        assert rv.status == 405\n"
        "\n"
        "    def test_new(self):\n"
        "        app = new()\n"
        f"{runs}"
        "\n"
        "    def test_c(self):\n"
        "        app = new()\n"
        "        # ... existing code ...\n"
    )
    new = f"    def test_new(self):\n        app = new()\n{runs}\n"
    assert lazy(edit, TESTS) == TESTS.replace("    def test_c", new + "    def test_c")


def test_a_rewrite_that_changes_fewer_lines_keeps_the_edit_ambiguous():
    # Rewriting test_b into the stretch changes fewer lines than inserting it after test_b
    # would, so neither reading is proven.
    edit = (
        "        # ... existing code ...\n"
        "        rv = c.delete('/x')\n"
        "        assert rv.status == 405\n"
        "\n"
        "    def test_new(self):\n"
        "        app = new()\n"
        "        c = make()\n"
        "        rv = c.delete('/x')\n"
        "        assert rv.status == 404\n"
        "\n"
        "    def test_c(self):\n"
        "        app = new()\n"
        "        # ... existing code ...\n"
    )
    with pytest.raises(Ambiguous):
        lazy(edit, TESTS)


MODULE = '"""\nModule doc.\n"""\nimport a\nimport b\nimport c\n\nX = 1\n'


def test_a_marker_above_the_first_line_elides_nothing_so_a_later_place_is_meant():
    # `"""` is lines 1 and 3; from line 1 the marker above the edit would stand for no line.
    edit = '# ... existing code ...\n"""\nimport a\nimport c\n# ... existing code ...\n'
    assert lazy(edit, MODULE) == MODULE.replace("import b\n", "")


def test_the_files_byte_order_mark_copied_into_the_edit_is_not_written_twice():
    text = '\ufeff\n"""Doc."""\nimport a\nimport b\n'
    edit = '\ufeff"""Doc."""\nimport a\n# ... existing code ...\n'
    assert lazy(edit, text) == '\ufeff"""Doc."""\nimport a\nimport b\n'


def test_a_stretch_that_rewrites_a_unique_definition_is_not_read_as_an_insertion():
    # From Old's `def u` the stretch only inserts, changing fewest lines, but its `p = 1`
    # would then be in the file twice; from T's it rewrites Old. Which is meant is not proven.
    text = (
        "class T:\n    def u(self):\n        return self.d\n\n"
        "class Old:\n    p = 1\n    q = 2\n    s = 4\n    t = 5\n\n"
        "    def u(self):\n        return self.d\n\nclass Z:\n    pass\n"
    )
    edit = (
        "# ... existing code ...\n    def u(self):\n        return self.d\n\n"
        "class Old(Base):\n    p = 1\n    r = 3\n\nclass Z:\n# ... existing code ...\n"
    )
    with pytest.raises(Ambiguous):
        lazy(edit, text)
