"""ripgrep prints whole per-file blocks in no set order; the collector shows the first by path."""

from __future__ import annotations

from kestrel.tools.grep_output import GrepCollector, GrepReport


def block(path: bytes, lines: list[int]) -> bytes:
    """One file's block as ripgrep prints it with `GREP_OUTPUT_FLAGS`."""
    return path + b"\0" + b"".join(b"%d:1:hit %d\n" % (n, n) for n in lines)


def output(*blocks: bytes) -> bytes:
    """Blocks as one run prints them: separated by an empty line."""
    return b"\n".join(blocks)


def collect(data: bytes, *, limit: int, chunk: int | None = None) -> GrepReport:
    collector = GrepCollector(context=0, limit=limit)
    step = chunk or len(data) or 1
    for start in range(0, len(data), step):
        collector.feed(data[start : start + step])
    return collector.report()


def shown(report: GrepReport) -> list[tuple[str, int]]:
    return [(m.path, m.line_number) for m in report.matches]


UNORDERED = output(block(b"z.py", [1, 2]), block(b"a.py", [5]), block(b"m/b.py", [3, 4, 9]))


def test_blocks_come_back_in_path_order_and_counts_survive_the_limit() -> None:
    report = collect(UNORDERED, limit=2)
    assert shown(report) == [("a.py", 5), ("m/b.py", 3)]
    assert report.total_matches == 6 and report.total_files == 3


def test_output_cut_anywhere_gives_the_same_report() -> None:
    whole = collect(UNORDERED, limit=4)
    assert shown(whole) == [("a.py", 5), ("m/b.py", 3), ("m/b.py", 4), ("m/b.py", 9)]
    for size in range(1, 12):
        assert collect(UNORDERED, limit=4, chunk=size) == whole


def test_blocks_that_cannot_be_shown_are_dropped_as_they_come_but_still_counted() -> None:
    paths = [b"f%04d.py" % n for n in range(1000)]
    data = output(*(block(p, [1, 2]) for p in reversed(paths)))
    report = collect(data, limit=3, chunk=100)
    assert shown(report) == [("f0000.py", 1), ("f0000.py", 2), ("f0001.py", 1)]
    assert report.total_matches == 2000 and report.total_files == 1000


def test_runs_are_ended_one_by_one() -> None:
    collector = GrepCollector(context=0, limit=10)
    collector.feed(block(b"b.py", [7]))
    collector.end_run()
    collector.feed(block(b"a.py", [3]))
    report = collector.report()
    assert shown(report) == [("a.py", 3), ("b.py", 7)]


def test_context_lines_and_group_separators() -> None:
    body = b"1-one\n2:1:two\n3-three\n--\n8-eight\n9:3:nine\n10-ten\n"
    collector = GrepCollector(context=1, limit=10)
    collector.feed(b"c.py\0" + body)
    report = collector.report()
    assert report.total_matches == 2
    [first, second] = report.matches
    assert [c.line_number for c in first.before + first.after] == [1, 3]
    assert [c.line_number for c in second.before + second.after] == [8, 10]
    assert second.text == "nine"


def test_the_last_match_shown_keeps_its_context_after() -> None:
    collector = GrepCollector(context=1, limit=1)
    collector.feed(b"c.py\0" + b"1:1:one\n2-two\n3:1:three\n")
    report = collector.report()
    assert [(m.line_number, [a.line_number for a in m.after]) for m in report.matches] == [(1, [2])]
    assert report.total_matches == 2


def test_binary_files_are_named_not_counted_and_their_notes_are_not_lines() -> None:
    data = output(
        b'img.bin: binary file matches (found "\\0" byte around offset 10)\n',
        block(b"a.py", [1])
        + b'a.py: WARNING: stopped searching binary file after match (found "\\0" byte '
        b"around offset 9000)\n",
    )
    report = collect(data, limit=10)
    assert shown(report) == [("a.py", 1)]
    assert report.total_matches == 1 and report.total_files == 1
    assert report.binary_files == ("img.bin",)


def test_odd_paths_survive() -> None:
    data = output(block(b"caf\xe9.py", [1]), block(b"two\n\nlines.py", [2]), block(b"./x.py", [3]))
    for size in (None, 1, 3):
        report = collect(data, limit=10, chunk=size)
        assert shown(report) == [("caf\ufffd.py", 1), ("two\n\nlines.py", 2), ("x.py", 3)]


def test_a_long_line_is_cut_around_the_match_column_in_characters() -> None:
    line = "é" * 1000 + "NEEDLE" + "b" * 1000
    column = len(("é" * 1000).encode()) + 1
    collector = GrepCollector(context=0, limit=1)
    collector.feed(b"min.js\0" + b"1:%d:" % column + line.encode() + b"\r\n")
    [match] = collector.report().matches
    assert match.text.startswith("[... 900 chars] ") and "NEEDLE" in match.text
    assert match.text.endswith(" [... 606 more chars]")
