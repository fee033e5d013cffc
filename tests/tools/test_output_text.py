"""Output that is not valid UTF-8 is still text, shown with replacement characters; only output
with NUL bytes near its start is called binary."""

from __future__ import annotations

from pathlib import Path

from kestrel.sandbox.output import looks_binary


async def test_invalid_utf8_from_a_command_shows_with_replacement_characters(ws):
    outcome = await ws.call("bash", command=r"printf 'caf\xe9 ok\n\xff\xfe done\n'")
    assert not outcome.is_error and not outcome.truncated
    assert outcome.content == "caf\ufffd ok\n\ufffd\ufffd done\n[exit code 0]"
    assert "binary" not in outcome.content
    assert "".join(text for _, text in ws.output) == "caf\ufffd ok\n\ufffd\ufffd done\n"


async def test_a_character_split_across_reads_is_not_mangled(ws):
    # 70,000 'é' (two bytes each) cross the 64 KB pipe reads at odd offsets.
    ws.max_output_chars = 200_000
    content = await ws.ok("bash", command="python3 -c \"print('é' * 70000)\"")
    assert content == "é" * 70000 + "\n[exit code 0]"


async def test_output_with_nul_bytes_is_binary_and_saved_whole(ws):
    outcome = await ws.call("bash", command=r"printf 'PK\x03\x04\x00\x00rest'; echo")
    assert not outcome.is_error and outcome.truncated
    first, status = outcome.content.splitlines()
    assert status == "[exit code 0]"
    assert first.startswith("[binary output: 11 characters with NUL bytes near the start, saved ")
    assert "\0" not in outcome.content
    assert outcome.full_output_path is not None
    assert Path(outcome.full_output_path).read_text() == "PK\x03\x04\x00\x00rest\n"
    assert outcome.full_output_path in first


async def test_read_file_shows_text_in_another_encoding(ws):
    ws.write("latin1.txt", "café\nnaïve\n".encode("latin-1"))
    content = await ws.ok("read_file", path="latin1.txt")
    assert content.splitlines()[:2] == ["     1\tcaf\ufffd", "     2\tna\ufffdve"]


def test_only_a_nul_near_the_start_makes_output_binary() -> None:
    assert looks_binary("a\0b")
    assert not looks_binary("\ufffd\ufffd not utf-8 but text")
    assert not looks_binary("x" * 8192 + "\0")
