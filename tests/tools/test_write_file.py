"""write_file: atomic, announced before it lands, modes kept, confined to the workspace."""

from __future__ import annotations

import hashlib
import stat

from kestrel.tools.paths import sha256_hex


async def test_creates_the_file_and_its_folders(ws):
    content = await ws.ok("write_file", path="a/b/new.py", content="x = 1\ny = 2\n")
    assert content == "Created a/b/new.py (2 lines)."
    assert (ws.root / "a/b/new.py").read_bytes() == b"x = 1\ny = 2\n"


async def test_overwrites_saying_so(ws):
    ws.write("f.txt", "old\n")
    content = await ws.ok("write_file", path="f.txt", content="new\nlonger\nfile")
    assert content == "Overwrote f.txt (3 lines; it had 1)."
    assert (ws.root / "f.txt").read_text() == "new\nlonger\nfile"


async def test_the_planned_write_is_announced_before_the_file_changes(ws):
    path = ws.write("f.txt", "old\n")
    seen_inside: list[bytes] = []
    ws.on_write = lambda plan: seen_inside.append(path.read_bytes())

    await ws.ok("write_file", path="f.txt", content="new\n")

    assert seen_inside == [b"old\n"]
    [plan] = ws.planned
    assert plan.path == "f.txt"
    assert plan.before_hash == hashlib.sha256(b"old\n").hexdigest()
    assert plan.after_hash == hashlib.sha256(b"new\n").hexdigest()
    assert "-old" in plan.diff and "+new" in plan.diff
    assert path.read_bytes() == b"new\n"


async def test_a_new_file_is_announced_with_no_before_hash(ws):
    existed: list[bool] = []
    ws.on_write = lambda plan: existed.append((ws.root / "n.txt").exists())
    await ws.ok("write_file", path="n.txt", content="hi\n")
    assert existed == [False]
    [plan] = ws.planned
    assert plan.before_hash is None
    assert plan.after_hash == sha256_hex(b"hi\n")
    assert plan.diff.splitlines()[:2] == ["--- /dev/null", "+++ b/n.txt"]


async def test_if_the_announcement_fails_nothing_is_written(ws):
    path = ws.write("f.txt", "old\n")

    def refuse(plan):
        raise RuntimeError("store is down")

    ws.on_write = refuse
    error = await ws.fails("write_file", path="f.txt", content="new\n")
    assert "RuntimeError: store is down" in error
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in ws.root.iterdir()) == ["f.txt"]


async def test_mode_bits_of_an_existing_file_are_kept(ws):
    path = ws.write("run.sh", "#!/bin/sh\n")
    path.chmod(0o751)
    await ws.ok("write_file", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


async def test_no_temporary_files_are_left_behind(ws):
    await ws.ok("write_file", path="d/f.txt", content="one\n")
    await ws.ok("write_file", path="d/f.txt", content="two\n")
    assert [p.name for p in (ws.root / "d").iterdir()] == ["f.txt"]


async def test_writing_the_same_content_changes_nothing(ws):
    ws.write("f.txt", "same\n")
    content = await ws.ok("write_file", path="f.txt", content="same\n")
    assert "already has exactly this content" in content
    assert ws.planned == []


async def test_long_diffs_are_capped(ws):
    await ws.ok("write_file", path="big.txt", content="".join(f"{n}\n" for n in range(1000)))
    [plan] = ws.planned
    lines = plan.diff.splitlines()
    assert len(lines) == 301
    assert lines[-1].startswith("[... diff cut: ")


async def test_refusals(ws):
    (ws.root / "dir").mkdir()
    assert "dir is a directory" in await ws.fails("write_file", path="dir", content="x")
    assert "outside the workspace" in await ws.fails("write_file", path="../x", content="x")
    # The artifacts folder is readable, never writable.
    error = await ws.fails("write_file", path=str(ws.artifacts / "x.txt"), content="x")
    assert "outside the workspace" in error
    assert not (ws.root.parent / "x").exists()


async def test_a_file_where_a_folder_should_be_is_a_clear_error(ws):
    ws.write("plain", "I am a file\n")
    error = await ws.fails("write_file", path="plain/child.txt", content="x")
    assert error.startswith("could not write plain/child.txt")
