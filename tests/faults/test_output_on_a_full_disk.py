"""Tool output emitted on a timer when the store is full: the error reaches the next call of
the tool's own flow, not asyncio's "exception in callback" log with a traceback."""

from __future__ import annotations

import asyncio

import pytest

from kestrel.agent.output_coalescing import OutputCoalescer
from kestrel.protocol.errors import StoreFull
from kestrel.protocol.events import Event


async def test_a_failed_timed_emit_is_raised_by_the_next_flush() -> None:
    emitted: list[Event] = []
    full = [True]

    def emit(event: Event) -> None:
        if full[0]:
            raise StoreFull("no space left to write the event store", session_id="s1")
        emitted.append(event)

    loop = asyncio.get_running_loop()
    seen: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: seen.append(context))
    coalescer = OutputCoalescer("c1", emit, max_delay_s=0.01)
    coalescer.add("stdout", "first")
    await asyncio.sleep(0.2)  # The timer fires and its emit fails.
    assert seen == []
    with pytest.raises(StoreFull):
        coalescer.flush()
    full[0] = False
    coalescer.add("stdout", "second")
    coalescer.flush()
    assert [getattr(e, "text", None) for e in emitted] == ["second"]
