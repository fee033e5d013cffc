"""Retry a provider's stream on transient failures, but only before it has yielded anything."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from kestrel.models.base import Provider
from kestrel.protocol.errors import EmptyReply, ProviderError, RateLimited, StreamCut
from kestrel.protocol.messages import ModelRequest, StreamPart

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given number of seconds; `asyncio.sleep` in production, a recorder in tests."""

OnRetry = Callable[[int, float, ProviderError], None]
"""Told (failed attempt number from 1, delay in seconds, the error) before each wait."""


class RetryDecider(Protocol):
    """Decides whether, and after how long, a failed attempt is tried again."""

    def delay_for(self, attempt: int, error: ProviderError, unit: float) -> float | None:
        """The wait before the next attempt, or None when `error` should propagate now."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently to retry: exponential backoff with jitter."""

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    jitter: float = 0.25
    """Each backoff is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    attempt_caps: tuple[tuple[type[ProviderError], int], ...] = ((StreamCut, 2), (EmptyReply, 2))
    """Errors of these types end the retries once this many attempts were made, whatever
    `max_attempts` allows: a cut or empty reply is tried once more, since a server that sends
    two in a row (a context overflow on llama.cpp, a broken model) will not answer this request."""

    def attempts_for(self, error: ProviderError) -> int:
        """The most attempts a request may take when it fails with `error`."""
        caps = [cap for kind, cap in self.attempt_caps if isinstance(error, kind)]
        return min([self.max_attempts, *caps])

    def backoff(self, attempt: int, unit: float) -> float:
        """The wait after failed attempt `attempt` (from 1); `unit` is a random draw in [0, 1]."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return min(self.max_delay_s, delay * (1 + self.jitter * (2 * unit - 1)))

    def delay_for(self, attempt: int, error: ProviderError, unit: float) -> float | None:
        """The wait before the next attempt, or None when `error` should propagate now."""
        if not error.retryable or attempt >= self.attempts_for(error):
            return None
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        if retry_after is None:
            return self.backoff(attempt, unit)
        # The server knows its own recovery time; waiting longer than our cap means give up.
        return retry_after if retry_after <= self.max_delay_s else None


async def stream_with_retry(
    provider: Provider,
    request: ModelRequest,
    *,
    policy: RetryDecider | None = None,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
) -> AsyncIterator[StreamPart]:
    """Stream `request` from `provider`, retrying retryable errors raised before the first part.

    Once a part has been yielded a failure propagates as is: a retry would repeat deltas the
    caller has already shown or stored.
    """
    policy = policy or RetryPolicy()
    attempt = 1
    while True:
        yielded = False
        stream = provider.stream(request)
        try:
            async for part in stream:
                yielded = True
                yield part
            return
        except ProviderError as error:
            delay = None if yielded else policy.delay_for(attempt, error, _unit())
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(attempt, delay, error)
        finally:
            await close_stream(stream)
        await sleep(delay)
        attempt += 1


class RetryingProvider:
    """A `Provider` that wraps another with `stream_with_retry`, for the composition root."""

    def __init__(
        self,
        inner: Provider,
        *,
        policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        on_retry: OnRetry | None = None,
    ) -> None:
        """Wrap `inner`; the other arguments are passed to `stream_with_retry` on every call."""
        self._inner = inner
        self._policy = policy
        self._sleep = sleep
        self._on_retry = on_retry

    @property
    def model(self) -> str:
        """The wrapped provider's model id."""
        return self._inner.model

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream from the wrapped provider with retries."""
        return stream_with_retry(
            self._inner,
            request,
            policy=self._policy,
            sleep=self._sleep,
            on_retry=self._on_retry,
        )


def _unit() -> float:
    return random.random()  # noqa: S311 -- jitter spreads retries; it is not a secret


async def close_stream(stream: AsyncIterator[StreamPart]) -> None:
    """Close `stream` if it can be closed, releasing the HTTP response it may hold open."""
    # Async generators hold an HTTP response open until closed; plain iterators have no aclose.
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
