"""read_file: numbered pages, explicit notes for everything left out, and its refusals."""

from __future__ import annotations

import os
import re

from kestrel.tools.files import READ_MAX_CHARS

NOTE = re.compile(r"\[lines \d+-\d+ of \d+ shown; call read_file with offset=(\d+) to continue\]")


async def test_lines_are_numbered_like_cat_n(ws):
    ws.write("a.py", "first\n\tsecond\nthird")
    content = await ws.ok("read_file", path="a.py")
    assert content == "     1\tfirst\n     2\t\tsecond\n     3\tthird"


async def test_a_5000_line_file_is_paged_with_a_note_and_nothing_is_lost(ws):
    lines = [f"line {n}" for n in range(1, 5001)]
    ws.write("big.txt", "\n".join(lines) + "\n")

    first = await ws.ok("read_file", path="big.txt")
    assert first.splitlines()[-1] == (
        "[lines 1-2000 of 5000 shown; call read_file with offset=2001 to continue]"
    )

    seen: list[str] = []
    offset = 1
    while True:
        page = await ws.ok("read_file", path="big.txt", offset=offset)
        rows = page.splitlines()
        note = NOTE.fullmatch(rows[-1])
        body = rows[:-1] if note else rows
        seen += [row.split("\t", 1)[1] for row in body]
        if not note:
            break
        offset = int(note.group(1))
    assert seen == lines


async def test_offset_and_limit_pick_the_window(ws):
    ws.write("f.txt", "".join(f"{n}\n" for n in range(1, 11)))
    content = await ws.ok("read_file", path="f.txt", offset=4, limit=2)
    assert content.splitlines() == [
        "     4\t4",
        "     5\t5",
        "[lines 4-5 of 10 shown; call read_file with offset=6 to continue]",
    ]
    assert await ws.ok("read_file", path="f.txt", offset=10) == "    10\t10"


async def test_offset_past_the_end_is_refused(ws):
    ws.write("f.txt", "one\ntwo\n")
    error = await ws.fails("read_file", path="f.txt", offset=3)
    assert "offset 3 is past the end" in error and "2 lines" in error


async def test_a_page_stops_early_rather_than_grow_huge(ws):
    width = 1000
    ws.write("wide.txt", "".join("x" * width + "\n" for _ in range(500)))
    content = await ws.ok("read_file", path="wide.txt")
    assert len(content) < READ_MAX_CHARS + 2 * width
    shown = len(content.splitlines()) - 1
    assert shown < 500
    assert content.endswith(
        f"[lines 1-{shown} of 500 shown; call read_file with offset={shown + 1} to continue]"
    )


async def test_very_long_lines_are_cut_with_a_marker(ws):
    ws.write("min.js", "a" * 5000 + "\nshort\n")
    rows = (await ws.ok("read_file", path="min.js")).splitlines()
    assert rows[0] == "     1\t" + "a" * 2000 + " [... line cut: 5,000 characters in all]"
    assert rows[1] == "     2\tshort"


async def test_binary_files_are_refused_with_their_size(ws):
    ws.write("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    error = await ws.fails("read_file", path="image.png")
    assert "image.png is a binary file (116 bytes)" in error


async def test_empty_files_say_so(ws):
    ws.write("empty.txt", "")
    outcome = await ws.call("read_file", path="empty.txt")
    assert not outcome.is_error
    assert outcome.content == "empty.txt is empty (0 bytes)."


async def test_missing_files_and_directories_are_refused(ws):
    (ws.root / "pkg").mkdir()
    assert "nope.py does not exist" in await ws.fails("read_file", path="nope.py")
    error = await ws.fails("read_file", path="pkg")
    assert "pkg is a directory" in error and "list_files" in error


async def test_crlf_lines_are_shown_without_the_carriage_return(ws):
    ws.write("win.txt", b"one\r\ntwo\r\n")
    assert await ws.ok("read_file", path="win.txt") == "     1\tone\n     2\ttwo"


async def test_files_in_the_artifacts_folder_can_be_read(ws):
    ws.artifacts.mkdir()
    saved = ws.artifacts / "out.txt"
    saved.write_text("full output\n")
    assert await ws.ok("read_file", path=str(saved)) == "     1\tfull output"


async def test_paths_outside_the_workspace_are_refused(ws):
    outside = ws.root.parent / "secret.txt"
    outside.write_text("secret\n")
    for path in ("../secret.txt", str(outside), "sub/../../secret.txt"):
        error = await ws.fails("read_file", path=path)
        assert "outside the workspace" in error
        assert "secret" not in error.replace("secret.txt", "")


async def test_symlinks_leading_out_are_refused_and_those_inside_followed(ws):
    outside = ws.root.parent / "secret.txt"
    outside.write_text("secret\n")
    os.symlink(outside, ws.root / "link.txt")
    error = await ws.fails("read_file", path="link.txt")
    assert "symlink" in error and "outside the workspace" in error

    ws.write("real.txt", "inside\n")
    os.symlink(ws.root / "real.txt", ws.root / "alias.txt")
    assert await ws.ok("read_file", path="alias.txt") == "     1\tinside"


async def test_an_absolute_path_inside_the_workspace_is_fine(ws):
    path = ws.write("src/m.py", "x = 1\n")
    assert await ws.ok("read_file", path=str(path)) == "     1\tx = 1"
