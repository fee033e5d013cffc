"""How the loop meets a failing model: retries are logged, hard failures end the session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from loop_kit import make_loop, transcript

from kestrel.app import streamer_for
from kestrel.models.retry import RetryPolicy
from kestrel.models.scripted import ScriptedProvider, call, say
from kestrel.protocol.errors import ContextTooLong, Overloaded, ProviderError, RateLimited
from kestrel.protocol.events import ErrorOccurred, ModelRetrying
from kestrel.protocol.messages import ModelRequest, StreamPart


class FailingFirst:
    """Raises the given errors on the first calls, then answers like the scripted model."""

    def __init__(self, errors: list[ProviderError], inner: ScriptedProvider) -> None:
        self.errors = errors
        self.inner = inner

    @property
    def model(self) -> str:
        return "failing-first"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        if self.errors:
            raise self.errors.pop(0)
        async for part in self.inner.stream(request):
            yield part


async def test_transient_errors_are_retried_and_logged(tmp_path: Path) -> None:
    provider = FailingFirst(
        [RateLimited("slow down", retry_after=0.0), Overloaded("busy")],
        ScriptedProvider([call("list_files"), say("done")]),
    )
    loop = make_loop(tmp_path, [])
    loop.streamer = streamer_for(provider, RetryPolicy(base_delay_s=0.001, jitter=0))
    finished = await loop.run()
    assert finished.reason == "done"
    retries = [
        r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, ModelRetrying)
    ]
    assert [(e.attempt, e.error_kind) for e in retries] == [(1, "RateLimited"), (2, "Overloaded")]
    assert finished.totals.turns == 2


async def test_a_context_overflow_ends_the_session_with_the_error(tmp_path: Path) -> None:
    provider = FailingFirst([ContextTooLong("prompt is too long")], ScriptedProvider([]))
    loop = make_loop(tmp_path, [])
    loop.streamer = streamer_for(provider, RetryPolicy(base_delay_s=0.001))
    finished = await loop.run()
    assert finished.reason == "error" and "ContextTooLong" in finished.detail
    errors = [
        r.event for r in loop.store.read(loop.session_id) if isinstance(r.event, ErrorOccurred)
    ]
    assert [(e.error_kind, e.recoverable) for e in errors] == [("ContextTooLong", False)]
    assert transcript(loop.store.read(loop.session_id))[-3:] == [
        "model request started",
        "error",
        "finished error",
    ]


async def test_retries_give_up_after_the_policy_s_attempts(tmp_path: Path) -> None:
    provider = FailingFirst([Overloaded("busy")] * 10, ScriptedProvider([]))
    loop = make_loop(tmp_path, [])
    loop.streamer = streamer_for(provider, RetryPolicy(max_attempts=3, base_delay_s=0.001))
    finished = await loop.run()
    assert finished.reason == "error" and "Overloaded" in finished.detail
    retries = [r for r in loop.store.read(loop.session_id) if isinstance(r.event, ModelRetrying)]
    assert len(retries) == 2
