"""grep: ripgrep's output parsed into matches, rendered per file, capped with a note."""

from __future__ import annotations

import asyncio
import os

import pytest

from kestrel.tools.base import ToolFailed
from kestrel.tools.grep_output import (
    GREP_OUTPUT_FLAGS,
    GrepCollector,
    GrepLine,
    GrepMatch,
    GrepReport,
    clip_line,
    render_report,
)
from kestrel.tools.search import run_rg, stream_rg


@pytest.fixture
def code(ws):
    ws.write(".gitignore", "vendor/\n*.log\n")
    ws.write(
        "src/app.py", "import os\n\ndef main():\n    return helper()\n\ndef helper():\n    pass\n"
    )
    ws.write("src/util.py", "def helper_two():\n    return 2\n")
    ws.write("vendor/lib.py", "def helper(): ...\n")
    ws.write("trace.log", "def helper in a log\n")
    return ws


async def test_matches_are_rendered_as_path_line_text(code):
    content = await code.ok("grep", pattern=r"def \w+")
    assert content == (
        "3 matching lines in 2 files under .:\n\n"
        "src/app.py:3: def main():\n"
        "--\n"
        "src/app.py:6: def helper():\n"
        "\n"
        "src/util.py:1: def helper_two():"
    )


async def test_context_lines_are_marked_and_shared_once(code):
    content = await code.ok("grep", pattern="helper", path="src/app.py", context=1)
    assert content.splitlines()[2:] == [
        "src/app.py:3- def main():",
        "src/app.py:4:     return helper()",
        "src/app.py:5- ",
        "src/app.py:6: def helper():",
        "src/app.py:7-     pass",
    ]


async def test_the_structured_matches_carry_their_context(code):
    collector = GrepCollector(context=1, limit=10)
    end = await stream_rg(
        [*GREP_OUTPUT_FLAGS, "--context", "1", "--regexp", "helper", "src/app.py"],
        cwd=code.root,
        on_stdout=collector.feed,
    )
    report = collector.report()
    assert end.exit_code == 0
    assert report.total_matches == 2 and report.total_files == 1
    assert report.matches == (
        GrepMatch(
            path="src/app.py",
            line_number=4,
            text="    return helper()",
            before=(GrepLine(line_number=3, text="def main():"),),
            after=(GrepLine(line_number=5, text=""),),
        ),
        GrepMatch(
            path="src/app.py",
            line_number=6,
            text="def helper():",
            before=(GrepLine(line_number=5, text=""),),
            after=(GrepLine(line_number=7, text="    pass"),),
        ),
    )


async def test_gitignored_files_are_not_searched_even_when_a_glob_names_them(code):
    content = await code.ok("grep", pattern="helper")
    assert "vendor/" not in content and "trace.log" not in content
    assert await code.ok("grep", pattern="helper", glob="*.log") == (
        "No files under . match the glob '*.log'."
    )


async def test_a_glob_narrows_the_files_searched(code):
    content = await code.ok("grep", pattern="def", glob="util.*")
    assert content.splitlines()[1:] == ["", "src/util.py:1: def helper_two():"]


async def test_case_insensitive(code):
    assert "No matches" in await code.ok("grep", pattern="IMPORT OS")
    assert "src/app.py:1: import os" in await code.ok(
        "grep", pattern="IMPORT OS", case_insensitive=True
    )


async def test_no_match_is_an_answer_not_an_error(code):
    assert await code.ok("grep", pattern="zebra") == "No matches for 'zebra' in .."


async def test_an_invalid_regex_is_an_error_from_ripgrep(code):
    error = await code.fails("grep", pattern="def (")
    assert "regex parse error" in error and "unclosed group" in error


async def test_a_pattern_may_start_with_a_dash(ws):
    ws.write("notes.txt", "--verbose flag\n")
    assert "notes.txt:1: --verbose flag" in await ws.ok("grep", pattern="--verbose")


async def test_results_past_max_results_are_counted_in_a_note(ws):
    ws.write("many.txt", "".join(f"hit {n}\n" for n in range(250)))
    rows = (await ws.ok("grep", pattern="hit", max_results=10)).splitlines()
    assert rows[0] == "250 matching lines in 1 file under .:"
    assert rows[2] == "many.txt:1: hit 0"
    assert rows[11] == "many.txt:10: hit 9"
    assert rows[-1] == (
        "[showing the first 10 of 250 matching lines; narrow the pattern, path or glob, "
        "or raise max_results to see more]"
    )


async def test_missing_and_outside_paths_are_refused(ws):
    assert "missing does not exist" in await ws.fails("grep", pattern="x", path="missing")
    assert "outside the workspace" in await ws.fails("grep", pattern="x", path="/")


async def test_long_matched_lines_are_shown_around_the_match(ws):
    ws.write("min.js", "a" * 3000 + "NEEDLE" + "b" * 3000 + "\n")
    row = (await ws.ok("grep", pattern="NEEDLE")).splitlines()[2]
    assert "NEEDLE" in row and len(row) < 700
    assert row.startswith("min.js:1: [... 2900 chars] ")


def test_clip_line_keeps_short_lines_whole():
    assert clip_line("short", 0) == "short"
    assert clip_line("x" * 600, 0) == "x" * 500 + " [... 100 more chars]"


def test_render_separates_files_and_gaps():
    matches = (
        GrepMatch(path="a", line_number=1, text="one"),
        GrepMatch(path="a", line_number=9, text="nine"),
        GrepMatch(path="b", line_number=2, text="two"),
    )
    report = GrepReport(matches=matches, total_matches=3, total_files=2)
    assert render_report(report) == "a:1: one\n--\na:9: nine\n\nb:2: two"


async def test_binary_files_are_skipped_in_a_walk_and_named_when_searched_by_name(ws):
    ws.write("src/a.py", "needle = 1\n")
    ws.write("blob.bin", b"needle\0needle\n")
    assert (await ws.ok("grep", pattern="needle")).splitlines() == [
        "1 matching line in 1 file under .:",
        "",
        "src/a.py:1: needle = 1",
    ]
    assert await ws.ok("grep", pattern="needle", path="blob.bin") == (
        "Only binary files match 'needle' in blob.bin (lines not shown): blob.bin"
    )
    both = await ws.ok("grep", pattern="needle", glob="*.{py,bin}")
    assert both.startswith("1 matching line in 1 file under . (files matching '*.{py,bin}'):")
    assert both.endswith("[binary files also match (lines not shown): blob.bin]")


async def test_a_file_name_that_is_not_utf8_is_shown_with_a_replacement_character(ws):
    (ws.root / "caf\udce9.txt").write_bytes(b"needle\n")
    assert "caf\ufffd.txt:1: needle" in await ws.ok("grep", pattern="needle")


async def test_a_search_that_hangs_is_stopped_at_the_timeout(ws):
    os.mkfifo(ws.root / "pipe")  # ripgrep waits for a writer that never comes
    with pytest.raises(ToolFailed, match=r"longer than 0\.3 s"):
        await run_rg(["--regexp", "x", "pipe"], cwd=ws.root, timeout_s=0.3)


async def test_a_cancelled_search_stops_ripgrep_and_ends(ws):
    os.mkfifo(ws.root / "pipe")
    search = asyncio.ensure_future(run_rg(["--regexp", "x", "pipe"], cwd=ws.root))
    await asyncio.sleep(0.2)
    search.cancel()
    with pytest.raises(asyncio.CancelledError):
        await search
