"""Streamed tool output becomes one event per 64 KB or per 100 ms, not one per pipe read."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from loop_kit import make_loop

from kestrel.agent.output_coalescing import OutputCoalescer
from kestrel.models.scripted import call, say
from kestrel.protocol.events import Event, ToolOutputChunk


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def chunks(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.stream, e.text) for e in events if isinstance(e, ToolOutputChunk)]


def test_pieces_are_joined_until_the_size_limit() -> None:
    events: list[Event] = []
    out = OutputCoalescer("c1", events.append, max_chars=10, clock=Clock())
    for piece in ["abc", "def", "ghi"]:
        out.add("stdout", piece)
    assert events == []
    out.add("stdout", "jk")
    out.add("stdout", "l")
    out.flush()
    assert chunks(events) == [("stdout", "abcdefghijk"), ("stdout", "l")]


def test_a_piece_after_the_delay_emits_what_gathered() -> None:
    clock = Clock()
    events: list[Event] = []
    out = OutputCoalescer("c1", events.append, max_delay_s=0.1, clock=clock)
    out.add("stdout", "one ")
    clock.now += 0.05
    out.add("stdout", "two ")
    assert events == []
    clock.now += 0.06
    out.add("stdout", "three")
    assert chunks(events) == [("stdout", "one two three")]


def test_a_change_of_stream_keeps_the_order() -> None:
    events: list[Event] = []
    out = OutputCoalescer("c1", events.append, clock=Clock())
    out.add("stdout", "a")
    out.add("stdout", "b")
    out.add("stderr", "oops")
    out.add("stdout", "c")
    out.flush()
    assert chunks(events) == [("stdout", "ab"), ("stderr", "oops"), ("stdout", "c")]
    assert all(e.call_id == "c1" for e in events if isinstance(e, ToolOutputChunk))


async def test_output_that_goes_quiet_is_emitted_without_waiting_for_more() -> None:
    events: list[Event] = []
    out = OutputCoalescer("c1", events.append, max_delay_s=0.01)
    out.add("stdout", "starting server")
    for _ in range(500):
        if events:
            break
        await asyncio.sleep(0.01)
    assert chunks(events) == [("stdout", "starting server")]
    out.flush()
    assert len(events) == 1


async def test_a_megabyte_of_lines_streams_whole_in_few_events(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    lines = 12_500  # one flushed 80-character line at a time: 1 MB
    (root / "chatty.py").write_text(
        f"import sys\nfor i in range({lines}):\n    print('%079d' % i)\n"
        "print('the end', file=sys.stderr)\n"
    )
    loop = make_loop(root, [call("bash", command=f"{sys.executable} -u chatty.py"), say("ok")])
    started = time.monotonic()
    await loop.run()
    seconds = time.monotonic() - started
    got = chunks([r.event for r in loop.store.read(loop.session_id)])
    stdout = "".join(text for stream, text in got if stream == "stdout")
    assert stdout == "".join(f"{i:079d}\n" for i in range(lines))
    assert got[-1] == ("stderr", "the end\n")
    # 16 events by size, plus at most one per 100 ms the run took, plus the stderr line.
    assert len(got) <= 16 + 1 + int(seconds / 0.1) + 1
