"""edit_file: exact replacement, every other byte kept, and each refusal explained."""

from __future__ import annotations

import hashlib
import stat


async def test_replaces_a_unique_string_and_shows_the_change(ws):
    path = ws.write("app.py", "def f():\n    return 1\n")
    content = await ws.ok("edit_file", path="app.py", old_str="return 1", new_str="return 2")
    assert path.read_text() == "def f():\n    return 2\n"
    assert content.startswith("Edited app.py: replaced 1 occurrence (line 2).\n\n")
    assert "-    return 1\n+    return 2" in content


async def test_every_byte_outside_the_replaced_range_is_kept(ws):
    original = "\ufeffkeep  \t\r\nmixed\nTARGET here\r\n  trailing   \n\nno newline at end"
    path = ws.write("odd.txt", original)
    await ws.ok("edit_file", path="odd.txt", old_str="TARGET", new_str="changed")
    assert path.read_bytes() == original.replace("TARGET", "changed").encode("utf-8")


async def test_a_crlf_file_edited_with_lf_text_keeps_crlf(ws):
    path = ws.write("win.txt", b"one\r\ntwo\r\nthree\r\n")
    await ws.ok("edit_file", path="win.txt", old_str="one\ntwo\n", new_str="uno\ndos\nextra\n")
    assert path.read_bytes() == b"uno\r\ndos\r\nextra\r\nthree\r\n"


async def test_replace_all_changes_every_occurrence(ws):
    path = ws.write("f.py", "x = 1\ny = x\nz = x\n")
    content = await ws.ok("edit_file", path="f.py", old_str="x", new_str="w", replace_all=True)
    assert path.read_text() == "w = 1\ny = w\nz = w\n"
    assert "replaced 3 (lines 1, 2, 3)" in content


async def test_several_occurrences_without_replace_all_are_refused_with_their_lines(ws):
    path = ws.write("f.py", "a = 1\nb = 2\na = 1\n\na = 1\n")
    error = await ws.fails("edit_file", path="f.py", old_str="a = 1", new_str="a = 9")
    assert "occurs 3 times" in error and "lines 1, 3, 5" in error and "replace_all" in error
    assert path.read_text() == "a = 1\nb = 2\na = 1\n\na = 1\n"


async def test_not_found_points_at_the_closest_lines(ws):
    ws.write("f.py", "class A:\n    def run(self,  x):\n        return x\n")
    error = await ws.fails(
        "edit_file", path="f.py", old_str="def run(self, x):\n    return x", new_str="pass"
    )
    assert error.startswith("old_str was not found in f.py.")
    assert "     2\t    def run(self,  x):\n     3\t        return x" in error


async def test_line_numbers_copied_from_read_file_are_read_when_they_name_the_line(ws):
    ws.write("f.py", "a = 1\nb = 2\n")
    await ws.ok("edit_file", path="f.py", old_str="     2\tb = 2", new_str="b = 3")
    assert (ws.root / "f.py").read_text() == "a = 1\nb = 3\n"
    error = await ws.fails("edit_file", path="f.py", old_str="     2\ta = 1", new_str="a = 3")
    assert "line numbers" in error


async def test_not_found_without_a_near_miss(ws):
    ws.write("f.py", "a = 1\n")
    error = await ws.fails("edit_file", path="f.py", old_str="zzz", new_str="y")
    assert error == "old_str was not found in f.py. Read the file again and copy the exact text."


async def test_refusals(ws):
    ws.write("f.py", "a = 1\n")
    error = await ws.fails("edit_file", path="missing.py", old_str="a", new_str="b")
    assert "missing.py does not exist" in error and "write_file" in error
    error = await ws.fails("edit_file", path="f.py", old_str="a", new_str="a")
    assert "old_str and new_str are the same" in error
    error = await ws.fails("edit_file", path="f.py", old_str="", new_str="b")
    assert "old_str is empty" in error
    ws.write("blob.bin", b"\x00\x01a")
    error = await ws.fails("edit_file", path="blob.bin", old_str="a", new_str="b")
    assert "binary file (3 bytes)" in error
    error = await ws.fails("edit_file", path="../f.py", old_str="a", new_str="b")
    assert "outside the workspace" in error
    assert ws.planned == []


async def test_the_edit_is_announced_before_it_lands_and_keeps_the_mode(ws):
    path = ws.write("s.sh", "echo old\n")
    path.chmod(0o700)
    inside: list[str] = []
    ws.on_write = lambda plan: inside.append(path.read_text())
    await ws.ok("edit_file", path="s.sh", old_str="old", new_str="new")
    assert inside == ["echo old\n"]
    [plan] = ws.planned
    assert plan.before_hash == hashlib.sha256(b"echo old\n").hexdigest()
    assert plan.after_hash == hashlib.sha256(b"echo new\n").hexdigest()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
