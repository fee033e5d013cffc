"""The `EventStore` contract, run against every implementation."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator

import pytest
from store_helpers import started

from kestrel.protocol.errors import SessionNotFound
from kestrel.protocol.events import (
    ApprovalDecided,
    ApprovalRequested,
    ContextAdded,
    ContextCompacted,
    Event,
    ModelCompleted,
    ModelTextDelta,
    PermissionDecided,
    Record,
    SessionFinished,
    SessionResumed,
    ToolFinished,
    Totals,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, Usage
from kestrel.store import EventStore
from kestrel.store.base import Spend


async def next_record(it: AsyncIterator[Record], timeout: float = 2.0) -> Record:
    """The subscriber's next record, failing the test instead of hanging."""
    return await asyncio.wait_for(anext(it), timeout)


def test_append_assigns_gap_free_seq_and_read_returns_equal_records(store: EventStore) -> None:
    events = [started("s1"), UserMessage(text="hello"), ModelTextDelta(request_id="r", text="hi")]
    records = [store.append("s1", event) for event in events]
    assert [r.seq for r in records] == [1, 2, 3]
    assert [r.event for r in records] == events
    assert all(r.session_id == "s1" for r in records)
    assert records[0].at < records[1].at < records[2].at
    assert list(store.read("s1")) == records


def test_read_after_seq_and_unknown_session(store: EventStore) -> None:
    store.append("s1", started("s1"))
    for i in range(4):
        store.append("s1", UserMessage(text=str(i)))
    assert [r.seq for r in store.read("s1", after_seq=3)] == [4, 5]
    assert list(store.read("s1", after_seq=5)) == []
    assert list(store.read("nobody")) == []


def test_sessions_number_independently(store: EventStore) -> None:
    store.append("a", started("a"))
    store.append("b", started("b"))
    store.append("a", UserMessage(text="x"))
    assert [r.seq for r in store.read("a")] == [1, 2]
    assert [r.seq for r in store.read("b")] == [1]


def test_event_before_session_started_is_refused(store: EventStore) -> None:
    with pytest.raises(SessionNotFound, match="no session_started"):
        store.append("ghost", UserMessage(text="hi"))
    assert list(store.read("ghost")) == []
    assert store.sessions() == []


def test_session_started_twice_or_for_another_id_is_refused(store: EventStore) -> None:
    store.append("s1", started("s1"))
    with pytest.raises(ValueError, match="already started"):
        store.append("s1", started("s1"))
    with pytest.raises(ValueError, match="names session 'other'"):
        store.append("s2", started("other"))
    assert [r.seq for r in store.read("s1")] == [1]
    assert [s.session_id for s in store.sessions()] == ["s1"]


def test_text_that_is_not_valid_utf8_survives(store: EventStore) -> None:
    # A lone surrogate can come from a model's JSON; the log must keep it rather than crash.
    store.append("s1", started("s1"))
    store.append("s1", UserMessage(text="bad \ud800 half"))
    assert store.read("s1")[1].event == UserMessage(text="bad \ud800 half")


def test_sessions_newest_first_with_summary_and_status(store: EventStore) -> None:
    store.append("old", started("old", task="first task"))
    store.append("new", started("new", task="second task"))
    store.append("old", UserMessage(text="more"))
    summaries = store.sessions()
    assert [s.session_id for s in summaries] == ["new", "old"]
    old = summaries[1]
    assert (old.task, old.cwd, old.model) == ("first task", "/src/project", "scripted:m")
    assert old.events == 2
    assert old.status == "running"
    assert old.updated_at > old.created_at
    assert summaries[0].updated_at == summaries[0].created_at


def test_status_follows_finish_and_resume(store: EventStore) -> None:
    def status() -> str:
        return store.sessions()[0].status

    store.append("s1", started("s1"))
    store.append("s1", SessionFinished(reason="budget", totals=Totals(turns=3)))
    assert status() == "budget"
    store.append("s1", SessionResumed(from_seq=2))
    assert status() == "running"
    store.append("s1", UserMessage(text="go on"))
    assert status() == "running"
    store.append("s1", SessionFinished(reason="done"))
    assert status() == "done"
    assert store.sessions()[0].events == 5


def test_status_says_when_a_session_waits_for_a_person(store: EventStore) -> None:
    def status() -> str:
        return store.sessions()[0].status

    store.append("s1", started("s1"))
    store.append(
        "s1",
        ApprovalRequested(call_id="c1", name="bash", arguments="{}", kind="execute", reason="r"),
    )
    assert status() == "waiting"
    store.append("s1", ApprovalDecided(call_id="c1", allow=True, by="kestrel approve"))
    assert status() == "waiting"  # Until the running process acts on the answer.
    store.append(
        "s1", PermissionDecided(call_id="c1", decision="allow", decided_by="user", reason="ok")
    )
    assert status() == "running"
    store.append("s1", SessionFinished(reason="cancelled"))
    store.append(
        "s1",
        ApprovalRequested(call_id="c2", name="bash", arguments="{}", kind="execute", reason="r"),
    )
    assert status() == "cancelled"  # Only a running session waits.


def test_resolve_exact_prefix_ambiguous_and_missing(store: EventStore) -> None:
    for session_id in ["abc123", "abd456", "abc", "zzz"]:
        store.append(session_id, started(session_id))
    assert store.resolve("abd") == "abd456"
    assert store.resolve("abc1") == "abc123"
    assert store.resolve("zzz") == "zzz"
    # A full id wins even though it is also the prefix of another id.
    assert store.resolve("abc") == "abc"
    with pytest.raises(SessionNotFound, match=r"'ab' is ambiguous: it matches abc, abc123, abd456"):
        store.resolve("ab")
    with pytest.raises(SessionNotFound, match="no session id starts with 'q'"):
        store.resolve("q")
    with pytest.raises(SessionNotFound, match="no session id given"):
        store.resolve("")


def test_resolve_names_only_a_few_of_many_matches(store: EventStore) -> None:
    for i in range(8):
        store.append(f"run-{i}", started(f"run-{i}"))
    with pytest.raises(SessionNotFound) as caught:
        store.resolve("run-")
    assert "run-0, run-1, run-2, run-3, run-4, ..." in str(caught.value)
    assert "run-7" not in str(caught.value)


async def test_subscribe_yields_old_records_then_new_ones_live(store: EventStore) -> None:
    store.append("s1", started("s1"))
    store.append("s1", UserMessage(text="one"))
    it = store.subscribe("s1")
    assert (await next_record(it)).seq == 1
    assert (await next_record(it)).seq == 2
    pending = asyncio.ensure_future(next_record(it))
    await asyncio.sleep(0.01)
    assert not pending.done()
    store.append("s1", UserMessage(text="two"))
    record = await pending
    assert (record.seq, record.event) == (3, UserMessage(text="two"))
    await it.aclose()  # type: ignore[attr-defined]


async def test_subscribe_after_seq_and_before_the_session_exists(store: EventStore) -> None:
    early = store.subscribe("later")
    pending = asyncio.ensure_future(next_record(early))
    await asyncio.sleep(0.01)
    store.append("later", started("later"))
    store.append("later", UserMessage(text="a"))
    store.append("later", UserMessage(text="b"))
    assert (await pending).seq == 1
    assert (await next_record(early)).seq == 2
    late = store.subscribe("later", after_seq=2)
    assert (await next_record(late)).event == UserMessage(text="b")
    assert (await next_record(early)).seq == 3


async def test_many_subscribers_each_see_every_record_in_order(store: EventStore) -> None:
    store.append("s1", started("s1"))

    async def collect(n: int) -> list[int]:
        it = store.subscribe("s1")
        return [(await next_record(it)).seq for _ in range(n)]

    tasks = [asyncio.ensure_future(collect(21)) for _ in range(3)]
    for i in range(20):
        store.append("s1", ToolFinished(call_id=f"c{i}", name="bash", content=str(i)))
        if i % 5 == 0:
            await asyncio.sleep(0)
    results = await asyncio.gather(*tasks)
    assert results == [list(range(1, 22))] * 3


async def test_append_from_another_thread_wakes_the_subscriber(store: EventStore) -> None:
    store.append("s1", started("s1"))
    it = store.subscribe("s1", after_seq=1)
    pending = asyncio.ensure_future(next_record(it))
    await asyncio.sleep(0.01)
    worker = threading.Thread(target=store.append, args=("s1", UserMessage(text="threaded")))
    worker.start()
    record = await pending
    worker.join()
    assert record.event == UserMessage(text="threaded")


def _completed(cost: float, *, fresh: int = 10, cached: int = 0, priced: bool = True) -> Event:
    usage = Usage(
        model="m",
        input_tokens=fresh,
        cache_read_tokens=cached,
        output_tokens=5,
        cost_usd=cost,
        priced=priced,
    )
    return ModelCompleted(request_id="r", message=AssistantTurn(text="ok \x00"), usage=usage)


def test_spend_and_costs_are_summed_from_model_calls(store: EventStore) -> None:
    store.append("a", started("a"))
    store.append("b", dataclasses.replace(started("b"), parent_session_id="a"))
    store.append("a", _completed(0.5, fresh=100))
    cut = store.read("a")[-1].at + 0.5
    store.append("a", _completed(0.25, fresh=10, cached=30))
    store.append("b", UserMessage(text="not a model call"))
    store.append("b", _completed(0.125, fresh=1, priced=False))
    assert store.spent_since(cut) == Spend(cost_usd=0.375, tokens=51, calls=2)
    assert store.spent_since(0.0).calls == 3
    assert store.spent_since(store.read("b")[-1].at + 1) == Spend()
    by_id = {s.session_id: s for s in store.sessions()}
    a, b = by_id["a"], by_id["b"]
    assert (a.cost_usd, a.turns, a.cost_known, a.parent_session_id) == (0.75, 2, True, None)
    assert (b.cost_usd, b.turns, b.cost_known, b.parent_session_id) == (0.125, 1, False, "a")


def test_calls_made_for_a_summary_or_a_reranking_are_spend_but_not_turns(
    store: EventStore,
) -> None:
    """The daily budget and a session's cost count every model call, not only its turns."""
    store.append("a", started("a"))
    store.append("a", _completed(0.5, fresh=100))
    reranked = _completed(0.25, fresh=20).usage
    store.append("a", ContextAdded(source="the context engine", text="files", usage=reranked))
    store.append("a", ContextAdded(source="a hook", text="no model call made this"))
    summarised = dataclasses.replace(_completed(0.125, fresh=30).usage, priced=False)
    store.append(
        "a",
        ContextCompacted(
            message="summary",
            kept=1,
            dropped=2,
            transcript="t",
            tokens_before=100,
            tokens_after=10,
            window_tokens=1000,
            usage=summarised,
        ),
    )
    assert store.spent_since(0.0) == Spend(cost_usd=0.875, tokens=165, calls=3)
    (a,) = store.sessions()
    assert (a.cost_usd, a.turns, a.cost_known) == (0.875, 1, False)


def test_a_prefix_is_matched_literally(store: EventStore) -> None:
    for session_id in ["a_b", "axb", "a%c"]:
        store.append(session_id, started(session_id))
    assert store.resolve("a_") == "a_b"
    assert store.resolve("a%") == "a%c"
    with pytest.raises(SessionNotFound, match="no session id starts with 'a_x'"):
        store.resolve("a_x")
