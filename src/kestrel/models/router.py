"""Model roles and failover: each role has an ordered list of models, tried in turn.

A step asks for a role (`main`, `plan`, `fast`, `edit`); the router hands it that role's
`FailoverProvider`, which streams from the first model and, when that one is overloaded, rate
limited past its retry budget, failing on its side or unreachable before it has sent anything,
sends the very same request to the next one. The conversation lives in the request, so nothing is
lost by the move; the caller is told of every move so that it can log it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kestrel.models.base import Provider
from kestrel.models.retry import OnRetry, RetryPolicy, Sleep, close_stream, stream_with_retry
from kestrel.protocol.errors import ConfigError, ProviderError, RateLimited
from kestrel.protocol.events import ModelRole
from kestrel.protocol.messages import ModelRequest, StreamPart

ROLES: tuple[ModelRole, ...] = ("main", "plan", "fast", "edit")
"""Every role, `main` first: a role with no models of its own uses main's."""

OnSwitch = Callable[[str, str, ProviderError], None]
"""Told (the model that failed, the model tried next, the error) before the request moves on."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One entry of a role's list: its name, as `provider:model-id`, and its provider."""

    name: str
    provider: Provider


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverPolicy:
    """How long a model is retried before the request moves to the next one."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries of the last model, and of a rate-limited model before the request moves on."""
    switch_after: int = 1
    """Attempts an overloaded, failing or unreachable model gets while another one is left.

    Waiting out an overload with backoff is what the next model saves; a rate limit is retried
    on the same model first, because the server says when it will answer, and a move costs the
    prompt cache.
    """


@dataclass(frozen=True, slots=True)
class _BeforeSwitch:
    """The retry decision for a model that has a successor."""

    policy: FailoverPolicy

    def delay_for(self, attempt: int, error: ProviderError, unit: float) -> float | None:
        if not isinstance(error, RateLimited) and attempt >= self.policy.switch_after:
            return None
        return self.policy.retry.delay_for(attempt, error, unit)


class FailoverProvider:
    """A `Provider` over an ordered list of models: the first answers unless it fails over."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        policy: FailoverPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        on_retry: OnRetry | None = None,
        on_switch: OnSwitch | None = None,
    ) -> None:
        """Try `candidates` in order; the callbacks are used by `stream` (see `stream_observed`)."""
        if not candidates:
            raise ConfigError("a model role needs at least one model")
        self._candidates = tuple(candidates)
        self._policy = policy or FailoverPolicy()
        self._sleep = sleep
        self._on_retry = on_retry
        self._on_switch = on_switch

    @property
    def model(self) -> str:
        """The first model's id, as priced and reported in usage."""
        return self._candidates[0].provider.model

    @property
    def names(self) -> tuple[str, ...]:
        """The models in the order they are tried, as `provider:model-id`."""
        return tuple(c.name for c in self._candidates)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream the reply, reporting retries and moves to the constructor's callbacks."""
        return self.stream_observed(request, on_retry=self._on_retry, on_switch=self._on_switch)

    async def stream_observed(
        self,
        request: ModelRequest,
        *,
        on_retry: OnRetry | None = None,
        on_switch: OnSwitch | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Stream the reply of the first model that answers, telling of each retry and move.

        A failure after the first part has been yielded propagates as is: another model would
        repeat text the caller has already shown. So does a failure no retry can help (a bad
        request, a missing key, a context overflow), since another model would fail the same way.
        """
        last = len(self._candidates) - 1
        for index, candidate in enumerate(self._candidates):
            decider = self._policy.retry if index == last else _BeforeSwitch(self._policy)
            stream = stream_with_retry(
                candidate.provider, request, policy=decider, sleep=self._sleep, on_retry=on_retry
            )
            yielded = False
            try:
                async for part in stream:
                    yielded = True
                    yield part
                return
            except ProviderError as error:
                if yielded or index == last or not error.retryable:
                    raise
                if on_switch is not None:
                    on_switch(candidate.name, self._candidates[index + 1].name, error)
            finally:
                await close_stream(stream)


class ModelRouter:
    """Each role's failover list; a role without one of its own uses `main`'s."""

    def __init__(self, chains: Mapping[ModelRole, FailoverProvider]) -> None:
        """`chains` must hold `main`; the other roles are optional."""
        if "main" not in chains:
            raise ConfigError("the main model role needs at least one model")
        self._chains = dict(chains)

    def for_role(self, role: ModelRole) -> FailoverProvider:
        """The failover list that answers for `role`."""
        return self._chains.get(role) or self._chains["main"]

    def first_models(self) -> dict[ModelRole, str]:
        """The model each role asks first, as `provider:model-id`."""
        return {role: self.for_role(role).names[0] for role in ROLES}
