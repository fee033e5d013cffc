"""Typed errors that cross package boundaries; branch on the type, never on the message."""

from __future__ import annotations


class KestrelError(Exception):
    """Root of every error Kestrel raises on purpose."""


class ConfigError(KestrelError):
    """A settings file, flag or environment variable is malformed; the message names where."""


class SessionNotFound(KestrelError):
    """No session has the given id (or id prefix)."""


class ProviderError(KestrelError):
    """A model provider failed; subclasses say how, and whether a retry can help."""

    retryable: bool = False

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class RateLimited(ProviderError):
    """The provider asked us to slow down (HTTP 429); `retry_after` is in seconds when known."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after


class Overloaded(ProviderError):
    """The provider is overloaded (Anthropic 529, or 503)."""

    retryable = True


class ServerError(ProviderError):
    """The provider failed on its side (5xx)."""

    retryable = True


class NetworkError(ProviderError):
    """The provider could not be reached, or the connection broke or timed out."""

    retryable = True


class ContextTooLong(ProviderError):
    """The request does not fit the model's context window."""


class AuthenticationFailed(ProviderError):
    """The API key is missing, wrong or lacks permission."""


class BadRequest(ProviderError):
    """The provider rejected the request as malformed."""


class StreamCut(ProviderError):
    """The reply stream ended before the server said the reply was finished (no finish reason,
    no end-of-stream marker): the reply is incomplete and must never count as a finished turn.

    Safe to retry only when nothing of the reply was shown yet; `models.retry` tries it once more.
    """

    retryable = True


class EmptyReply(ProviderError):
    """The server finished a reply that holds neither text nor a tool call.

    A model that has nothing to say is broken or overflowed; the turn is an error, not an answer.
    """

    retryable = True


class StoreError(KestrelError):
    """The event store cannot be opened or used; `session_id` names the session it stopped, if any.

    Subclasses say why: `StoreDamaged` (not a readable database), `StoreFull` (no room to write),
    `SessionLogLost` (a running session's log was deleted or replaced).
    """

    def __init__(self, message: str, *, path: str = "", session_id: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.session_id = session_id


class StoreDamaged(StoreError):
    """The store's file is torn or not a database; `kestrel doctor --repair` salvages the rest."""


class StoreFull(StoreError):
    """A write found no room (the disk is full, or a file size limit is reached); nothing of the
    failed append was kept, so the session can be resumed once there is space again."""


class SessionLogLost(StoreError):
    """The log of a session this process was writing has been deleted or replaced under it."""
