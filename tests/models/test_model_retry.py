"""stream_with_retry and RetryPolicy against a small provider that fails as told."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from wire_server import SleepRecorder, collect

from kestrel.models.retry import RetryingProvider, RetryPolicy, stream_with_retry
from kestrel.protocol.errors import (
    BadRequest,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    StreamPart,
    TextDelta,
    Usage,
    UserTurn,
)

REQUEST = ModelRequest(system="", messages=(UserTurn(text="hi"),))
NO_JITTER = RetryPolicy(jitter=0.0)
DONE = Completion(message=AssistantTurn(text="ok"), usage=Usage(model="flaky"))


class FlakyProvider:
    """Each call plays the next script: parts to yield, then an error to raise (or none)."""

    def __init__(self, *scripts: tuple[list[StreamPart], ProviderError | None]) -> None:
        self.scripts = list(scripts)
        self.calls = 0
        self.closed = 0

    @property
    def model(self) -> str:
        return "flaky"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        parts, error = self.scripts[self.calls]
        self.calls += 1
        try:
            for part in parts:
                yield part
            if error is not None:
                raise error
        finally:
            self.closed += 1


def fails(error: ProviderError) -> tuple[list[StreamPart], ProviderError | None]:
    return [], error


def succeeds() -> tuple[list[StreamPart], ProviderError | None]:
    return [TextDelta(text="ok"), DONE], None


async def test_retryable_errors_back_off_exponentially(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(
        fails(Overloaded("busy")),
        fails(ServerError("oops")),
        fails(NetworkError("reset")),
        succeeds(),
    )
    retries: list[tuple[int, float, str]] = []

    parts = await collect(
        stream_with_retry(
            flaky,
            REQUEST,
            policy=NO_JITTER,
            sleep=sleep,
            on_retry=lambda n, d, e: retries.append((n, d, type(e).__name__)),
        )
    )

    assert parts == [TextDelta(text="ok"), DONE]
    assert sleep.delays == [1.0, 2.0, 4.0]
    assert retries == [(1, 1.0, "Overloaded"), (2, 2.0, "ServerError"), (3, 4.0, "NetworkError")]
    assert flaky.closed == 4


async def test_gives_up_after_max_attempts(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(*(fails(Overloaded(f"busy {n}")) for n in range(3)))

    with pytest.raises(Overloaded, match="busy 2"):
        await collect(
            stream_with_retry(flaky, REQUEST, policy=RetryPolicy(max_attempts=3), sleep=sleep)
        )

    assert flaky.calls == 3
    assert len(sleep.delays) == 2


async def test_non_retryable_error_propagates_at_once(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(fails(BadRequest("bad")), succeeds())

    with pytest.raises(BadRequest):
        await collect(stream_with_retry(flaky, REQUEST, sleep=sleep))

    assert (flaky.calls, sleep.delays) == (1, [])


async def test_error_after_a_yielded_part_is_not_retried(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(([TextDelta(text="Hel")], NetworkError("reset")), succeeds())
    seen: list[StreamPart] = []

    with pytest.raises(NetworkError):
        async for part in stream_with_retry(flaky, REQUEST, sleep=sleep):
            seen.append(part)

    assert seen == [TextDelta(text="Hel")]
    assert (flaky.calls, sleep.delays) == (1, [])


async def test_retry_after_is_honoured_over_backoff(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(fails(RateLimited("slow down", retry_after=12.5)), succeeds())

    await collect(stream_with_retry(flaky, REQUEST, policy=NO_JITTER, sleep=sleep))

    assert sleep.delays == [12.5]


async def test_retry_after_beyond_the_cap_gives_up(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(fails(RateLimited("come back tomorrow", retry_after=86_400)), succeeds())

    with pytest.raises(RateLimited):
        await collect(stream_with_retry(flaky, REQUEST, sleep=sleep))

    assert sleep.delays == []


async def test_rate_limit_without_retry_after_uses_backoff(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(fails(RateLimited("slow down")), succeeds())

    await collect(stream_with_retry(flaky, REQUEST, policy=NO_JITTER, sleep=sleep))

    assert sleep.delays == [1.0]


async def test_stopping_early_closes_the_inner_stream(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(succeeds())
    outer = stream_with_retry(flaky, REQUEST, sleep=sleep)

    assert await anext(outer) == TextDelta(text="ok")
    await outer.aclose()

    assert flaky.closed == 1


async def test_retrying_provider_wraps_another(sleep: SleepRecorder) -> None:
    flaky = FlakyProvider(fails(Overloaded("busy")), succeeds())
    wrapped = RetryingProvider(flaky, policy=NO_JITTER, sleep=sleep)

    parts = await collect(wrapped.stream(REQUEST))

    assert wrapped.model == "flaky"
    assert parts[-1] == DONE
    assert sleep.delays == [1.0]


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0, jitter=0.0)

    assert [policy.backoff(n, 0.5) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_jitter_stays_within_its_band() -> None:
    policy = RetryPolicy(base_delay_s=2.0, jitter=0.25)

    assert policy.backoff(1, 0.0) == pytest.approx(1.5)
    assert policy.backoff(1, 1.0) == pytest.approx(2.5)
    assert policy.backoff(1, 0.5) == pytest.approx(2.0)


def test_delay_for_refuses_non_retryable_and_last_attempt() -> None:
    policy = RetryPolicy(max_attempts=2, jitter=0.0)

    assert policy.delay_for(1, BadRequest("bad"), 0.5) is None
    assert policy.delay_for(2, Overloaded("busy"), 0.5) is None
    assert policy.delay_for(1, Overloaded("busy"), 0.5) == 1.0
