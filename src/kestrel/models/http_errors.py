"""Turn a provider's HTTP failure (status, headers, error kind) into Kestrel's typed errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from kestrel.protocol.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextTooLong,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def retry_after_seconds(
    headers: Mapping[str, str], now: Callable[[], datetime] = _utc_now
) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms` or `retry-after`, if given."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    # RFC 9110 also allows an HTTP date.
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now()).total_seconds(), 0.0)


NOT_RETRIED = frozenset({400, 401, 403, 404, 422, 501})
"""Statuses that fail at once: the same request would get the same answer."""


def error_for_status(
    status: int,
    message: str,
    *,
    provider: str,
    retry_after: float | None = None,
    context_too_long: bool = False,
    url: str | None = None,
) -> ProviderError:
    """The typed error for an HTTP failure; `context_too_long` comes from the provider's body.

    The message names `url` when given, and keeps the server's own words.
    """
    where = f" from {url}" if url else ""
    text = f"{provider} error {status}{where}: {message}"
    if status == 429:
        return RateLimited(text, provider=provider, status=status, retry_after=retry_after)
    if status in (503, 529):
        return Overloaded(text, provider=provider, status=status)
    if status == 501:
        # Not Implemented: the server lacks the feature asked for, which no retry brings.
        return BadRequest(
            f"{text} (the server does not implement this request)", provider=provider, status=501
        )
    if status >= 500:
        return ServerError(text, provider=provider, status=status)
    if status in (401, 403):
        return AuthenticationFailed(text, provider=provider, status=status)
    if context_too_long and status in (400, 413, 422):
        return ContextTooLong(text, provider=provider, status=status)
    if status == 408:
        # The server timed out waiting for us: a network problem, worth another try.
        return NetworkError(text, provider=provider, status=status)
    return BadRequest(text, provider=provider, status=status)


def connection_error(
    provider: str, url: str | None, reason: str, *, mid_reply: bool
) -> NetworkError:
    """The error for a connection that failed, naming the URL and whether a reply was shown."""
    where = url or "the server"
    if mid_reply:
        text = f"{provider}: the stream was cut mid-reply ({reason}); {where}"
    else:
        text = f"{provider}: the connection to {where} failed ({reason})"
    return NetworkError(text, provider=provider)
