"""The response cache: an identical model request within one session is answered with the reply
it got before, replayed as stream parts, instead of being paid for again.

When it helps: a session's process killed after the model answered but before the reply was
logged (a worker lost, a crash) sends the very same request when the session resumes; so does
a summary of the same turns asked twice. The request holds the whole conversation, so two
requests of one session are identical only when nothing happened in between.

When it must not: a session that keeps sending the same request is stuck, and replaying the
same reply would keep it stuck for as long as the entry lives. So an entry is replayed at most
`replays` times (once by default); the next identical request goes to the model, whose fresh
reply replaces the entry. A replayed reply is logged and its tool calls run like any other,
so loop detection sees every one of them.

The key is the session's id and a SHA-256 of the request in canonical JSON (the models the
role tries, the system prompt, messages, tools and parameters); the value is the `Completion`
in its JSON form. A cache that fails (Redis away) answers "miss" and stores nothing; it never
raises.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Protocol

from pydantic import TypeAdapter

from kestrel.models.retry import OnRetry
from kestrel.models.router import OnSwitch
from kestrel.protocol.events import ModelRole
from kestrel.protocol.messages import (
    Completion,
    ModelRequest,
    StreamPart,
    TextDelta,
    ToolCallDelta,
)

DEFAULT_TTL_S = 3600.0
"""How long a reply stays in the cache: long enough for a crashed session to be resumed."""


class ResponseCache(Protocol):
    """Completed replies by key. Implementations never raise: a failure is a miss."""

    async def take(self, key: str) -> Completion | None:
        """The reply stored under `key`, unless there is none or it was replayed enough."""
        ...

    async def keep(self, key: str, completion: Completion) -> None:
        """Store `completion` under `key` (replacing any entry) for the cache's time to live."""
        ...


@cache
def _completion_adapter() -> TypeAdapter[Completion]:
    return TypeAdapter(Completion)


@cache
def _request_adapter() -> TypeAdapter[ModelRequest]:
    return TypeAdapter(ModelRequest)


def encode_completion(completion: Completion) -> str:
    """The reply as JSON text."""
    return _completion_adapter().dump_json(completion).decode()


def decode_completion(text: str | bytes) -> Completion | None:
    """The reply from its JSON text; None when the text is not one (an older format)."""
    try:
        return _completion_adapter().validate_json(text)
    except ValueError:
        return None


def request_key(session_id: str, models: Sequence[str], request: ModelRequest) -> str:
    """The cache key of `request` in a session, sent to the role whose models are `models`."""
    data = _request_adapter().dump_python(request, mode="json")
    canonical = json.dumps(
        {"models": list(models), "request": data},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{session_id}:{digest}"


async def replay(completion: Completion) -> AsyncIterator[StreamPart]:
    """The reply's parts as a provider would stream them, ending in a `Completion` marked
    `cached`: its text, then each tool call whole."""
    if completion.message.text:
        yield TextDelta(text=completion.message.text)
    for index, call in enumerate(completion.message.tool_calls):
        yield ToolCallDelta(
            index=index, call_id=call.id, name=call.name, arguments_delta=call.arguments
        )
    yield Completion(
        message=completion.message,
        usage=completion.usage,
        stop_reason=completion.stop_reason,
        cached=True,
    )


class Streamer(Protocol):
    """What the agent's model streamer is: a request and a role in, stream parts out."""

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        """Stream the reply, reporting retries and moves to another model."""
        ...


@dataclass(frozen=True, slots=True)
class CachingStreamer:
    """A model streamer that answers a request of `session_id` from `cache` when it can, and
    keeps every completed reply it streams from `inner`."""

    inner: Streamer
    cache: ResponseCache
    session_id: str
    models_of: Callable[[ModelRole], Sequence[str]]
    """The models a role tries, in order: part of the key, since they decide the reply."""

    def __call__(
        self, request: ModelRequest, *, role: ModelRole, on_retry: OnRetry, on_switch: OnSwitch
    ) -> AsyncIterator[StreamPart]:
        """Replay the cached reply, or stream from `inner` and keep what it completes."""
        key = request_key(self.session_id, self.models_of(role), request)
        return self._stream(key, request, role, on_retry, on_switch)

    async def _stream(
        self,
        key: str,
        request: ModelRequest,
        role: ModelRole,
        on_retry: OnRetry,
        on_switch: OnSwitch,
    ) -> AsyncIterator[StreamPart]:
        found = await self.cache.take(key)
        if found is not None:
            async for part in replay(found):
                yield part
            return
        async for part in self.inner(request, role=role, on_retry=on_retry, on_switch=on_switch):
            if isinstance(part, Completion) and not part.cached:
                # Kept before it is passed on: a process killed while the caller logs it
                # finds it on resume.
                await self.cache.keep(key, part)
            yield part


@dataclass(slots=True)
class MemoryResponseCache:
    """A `ResponseCache` in this process's memory, for tests and single-process use."""

    ttl_s: float = DEFAULT_TTL_S
    replays: int = 1
    clock: Callable[[], float] = time.monotonic
    _entries: dict[str, tuple[float, str, int]] = field(default_factory=dict)

    async def take(self, key: str) -> Completion | None:
        """The entry under `key` while it lives and has replays left."""
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self.clock():
            self._entries.pop(key, None)
            return None
        expires, text, served = entry
        self._entries[key] = (expires, text, served + 1)
        return decode_completion(text) if served < self.replays else None

    async def keep(self, key: str, completion: Completion) -> None:
        """Store `completion` for `ttl_s` seconds, with its replays unused."""
        now = self.clock()
        self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
        self._entries[key] = (now + self.ttl_s, encode_completion(completion), 0)
