"""Status codes and retry headers to typed provider errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kestrel.models.http_errors import error_for_status, retry_after_seconds
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

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "9"}, 9.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0.0),
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers, now=lambda: NOW) == seconds


@pytest.mark.parametrize(
    ("status", "too_long", "expected"),
    [
        (429, False, RateLimited),
        (529, False, Overloaded),
        (503, False, Overloaded),
        (500, False, ServerError),
        (504, False, ServerError),
        (401, False, AuthenticationFailed),
        (403, False, AuthenticationFailed),
        (400, True, ContextTooLong),
        (413, True, ContextTooLong),
        (422, True, ContextTooLong),
        (400, False, BadRequest),
        (404, True, BadRequest),
        (408, False, NetworkError),
    ],
)
def test_error_for_status(status: int, too_long: bool, expected: type[ProviderError]) -> None:
    error = error_for_status(
        status, "msg", provider="p", retry_after=2.0, context_too_long=too_long
    )

    assert type(error) is expected
    assert (error.status, error.provider) == (status, "p")
    if isinstance(error, RateLimited):
        assert error.retry_after == 2.0
