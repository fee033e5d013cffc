"""FailoverProvider and ModelRouter: which failures move a request on, and which do not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from wire_server import SleepRecorder, collect

from kestrel.models.retry import RetryPolicy
from kestrel.models.router import Candidate, FailoverPolicy, FailoverProvider, ModelRouter
from kestrel.models.scripted import ScriptedProvider, say
from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    ConfigError,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)
from kestrel.protocol.messages import Completion, ModelRequest, StreamPart, TextDelta, UserTurn

REQUEST = ModelRequest(system="Be brief.", messages=(UserTurn(text="Say hi."),))
NO_JITTER = RetryPolicy(jitter=0.0, base_delay_s=1.0)


class Flaky:
    """Raises the given errors on its first calls (after `parts_first` text parts), then
    answers like the scripted model; records every request it was sent."""

    def __init__(self, name: str, errors: list[ProviderError], *, parts_first: int = 0) -> None:
        self.inner = ScriptedProvider([say(f"hello from {name}")], model=name)
        self.errors = errors
        self.parts_first = parts_first
        self.requests: list[ModelRequest] = []

    @property
    def model(self) -> str:
        return self.inner.model

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self.requests.append(request)
        if self.errors:
            for _ in range(self.parts_first):
                yield TextDelta(text="partial ")
            raise self.errors.pop(0)
        async for part in self.inner.stream(request):
            yield part


def chain(
    *providers: Flaky, switch_after: int = 1, sleep: SleepRecorder | None = None
) -> FailoverProvider:
    return FailoverProvider(
        [Candidate(f"test:{p.model}", p) for p in providers],
        policy=FailoverPolicy(retry=NO_JITTER, switch_after=switch_after),
        sleep=sleep or SleepRecorder(),
    )


async def reply_of(provider: FailoverProvider, switches: list[tuple[str, str, str]]) -> str:
    def on_switch(old: str, new: str, error: ProviderError) -> None:
        switches.append((old, new, type(error).__name__))

    parts = await collect(provider.stream_observed(REQUEST, on_switch=on_switch))
    done = parts[-1]
    assert isinstance(done, Completion)
    return f"{done.usage.model}: {done.message.text}"


@pytest.mark.parametrize(
    "error",
    [Overloaded("busy", status=529), ServerError("boom", status=500), NetworkError("timed out")],
)
async def test_overload_server_errors_and_timeouts_move_on_at_once(error: ProviderError) -> None:
    first, second = Flaky("first", [error]), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    assert await reply_of(chain(first, second), switches) == "second: hello from second"

    assert switches == [("test:first", "test:second", type(error).__name__)]
    assert first.requests == second.requests == [REQUEST]


async def test_a_rate_limit_uses_its_retry_budget_before_moving_on() -> None:
    sleep = SleepRecorder()
    limits: list[ProviderError] = [RateLimited("slow", retry_after=2.0) for _ in range(5)]
    first, second = Flaky("first", limits), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    assert (
        await reply_of(chain(first, second, sleep=sleep), switches) == "second: hello from second"
    )

    assert sleep.delays == [2.0, 2.0, 2.0, 2.0]  # max_attempts 5: four waits, then the move
    assert len(first.requests) == 5 and len(second.requests) == 1
    assert switches == [("test:first", "test:second", "RateLimited")]


async def test_a_rate_limit_that_clears_within_the_budget_stays_on_the_model() -> None:
    first, second = Flaky("first", [RateLimited("slow down", retry_after=0.5)]), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    assert await reply_of(chain(first, second), switches) == "first: hello from first"
    assert switches == [] and second.requests == []


async def test_switch_after_gives_an_overloaded_model_more_attempts() -> None:
    sleep = SleepRecorder()
    first, second = Flaky("first", [Overloaded("busy")] * 2), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    answer = await reply_of(chain(first, second, switch_after=3, sleep=sleep), switches)

    assert answer == "first: hello from first" and sleep.delays == [1.0, 2.0]
    assert switches == []


async def test_the_last_model_keeps_the_whole_retry_budget() -> None:
    sleep = SleepRecorder()
    first, second = Flaky("first", [Overloaded("busy")]), Flaky("second", [Overloaded("busy")] * 2)
    switches: list[tuple[str, str, str]] = []

    answer = await reply_of(chain(first, second, sleep=sleep), switches)

    assert answer == "second: hello from second"
    assert sleep.delays == [1.0, 2.0] and len(second.requests) == 3


@pytest.mark.parametrize(
    "error", [BadRequest("malformed"), AuthenticationFailed("bad key", status=401)]
)
async def test_failures_another_model_cannot_fix_propagate(error: ProviderError) -> None:
    first, second = Flaky("first", [error]), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    with pytest.raises(type(error)):
        await reply_of(chain(first, second), switches)
    assert switches == [] and second.requests == []


async def test_a_failure_after_the_reply_began_is_not_replayed_elsewhere() -> None:
    first, second = Flaky("first", [Overloaded("busy")], parts_first=1), Flaky("second", [])
    switches: list[tuple[str, str, str]] = []

    with pytest.raises(Overloaded):
        await reply_of(chain(first, second), switches)
    assert switches == [] and second.requests == []


async def test_when_all_fail_the_last_error_propagates_after_each_move() -> None:
    models = [Flaky(name, [Overloaded(f"{name} busy")] * 9) for name in ("a", "b", "c")]
    switches: list[tuple[str, str, str]] = []
    provider = FailoverProvider(
        [Candidate(m.model, m) for m in models],
        policy=FailoverPolicy(retry=RetryPolicy(max_attempts=2)),
        sleep=SleepRecorder(),
    )

    with pytest.raises(Overloaded, match="c busy"):
        await reply_of(provider, switches)
    assert switches == [("a", "b", "Overloaded"), ("b", "c", "Overloaded")]
    assert [len(m.requests) for m in models] == [1, 1, 2]


async def test_stream_reports_moves_to_the_constructor_callback() -> None:
    first, second = Flaky("first", [Overloaded("busy")]), Flaky("second", [])
    seen: list[str] = []
    provider = FailoverProvider(
        [Candidate("one", first), Candidate("two", second)],
        on_switch=lambda old, new, error: seen.append(f"{old}->{new}"),
    )

    parts = await collect(provider.stream(REQUEST))

    assert seen == ["one->two"] and isinstance(parts[-1], Completion)
    assert provider.model == "first" and provider.names == ("one", "two")


def test_roles_without_models_of_their_own_use_main() -> None:
    main = chain(Flaky("big", []))
    fast = chain(Flaky("small", []))
    router = ModelRouter({"main": main, "fast": fast})

    assert router.for_role("fast") is fast
    assert router.for_role("plan") is main and router.for_role("edit") is main
    assert router.first_models() == {
        "main": "test:big",
        "plan": "test:big",
        "fast": "test:small",
        "edit": "test:big",
    }


def test_a_router_needs_a_main_role_and_a_role_needs_a_model() -> None:
    with pytest.raises(ConfigError):
        ModelRouter({"fast": chain(Flaky("small", []))})
    with pytest.raises(ConfigError):
        FailoverProvider([])
