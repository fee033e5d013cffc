"""What the OpenAI SDK and its HTTP layer raise, as Kestrel's typed errors naming the URL."""

from __future__ import annotations

import httpx2
import openai

from kestrel.models.endpoint_probe import describe_http_error
from kestrel.models.http_errors import connection_error, error_for_status, retry_after_seconds
from kestrel.protocol.errors import ContextTooLong, ProviderError, ServerError

PROVIDER = "openai"


def map_error(
    err: BaseException, *, url: str | None = None, mid_reply: bool = False
) -> ProviderError:
    """The Kestrel error for anything the SDK or its HTTP layer raised while asking `url`.

    `mid_reply` says whether parts of the reply were already shown, so a broken connection
    says that the stream was cut mid-reply.
    """
    if isinstance(err, ProviderError):
        return err
    if isinstance(err, openai.APIStatusError):
        return error_for_status(
            err.status_code,
            _body_message(err),
            provider=PROVIDER,
            retry_after=retry_after_seconds(err.response.headers),
            context_too_long=_says_context_too_long(err),
            url=url,
        )
    if isinstance(err, openai.APIConnectionError | httpx2.HTTPError | OSError):
        return connection_error(PROVIDER, url, _reason(err), mid_reply=mid_reply)
    if isinstance(err, openai.APIError):
        return _stream_error(err, url)
    where = f" ({url})" if url else ""
    if isinstance(err, ValueError):
        # A malformed chunk (bad JSON, unexpected shape): the server's fault, worth a retry.
        return ServerError(f"{PROVIDER} sent a malformed stream{where}: {err}", provider=PROVIDER)
    return ProviderError(f"{PROVIDER}{where}: {type(err).__name__}: {err}", provider=PROVIDER)


def _reason(err: BaseException) -> str:
    """Why the connection failed: the SDK's own error only says "Connection error."."""
    if isinstance(err, openai.APITimeoutError):
        return "timed out"
    cause = err.__cause__ if isinstance(err, openai.APIConnectionError) else err
    if isinstance(cause, httpx2.RemoteProtocolError):
        return "the server closed the connection"
    if isinstance(cause, httpx2.HTTPError | OSError):
        return describe_http_error(cause)
    return str(err).rstrip(".").lower() or "connection error"


def _body_message(err: openai.APIError) -> str:
    """The server's own words, whatever the body's shape: OpenAI's `{"error": {"message"}}`,
    FastAPI's `{"detail": ...}` (llama-cpp-python, vLLM), or plain text."""
    body = err.body
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        detail = body.get("detail")
        if isinstance(detail, str) and detail:
            return detail
        if isinstance(detail, list):
            words = [item.get("msg") for item in detail if isinstance(item, dict)]
            joined = "; ".join(word for word in words if isinstance(word, str))
            if joined:
                return joined
    return err.message


def _says_context_too_long(err: openai.APIError) -> bool:
    # OpenAI sends a code; vLLM and llama.cpp only say it in words or in the error type.
    message = err.message.lower()
    return (
        err.code == "context_length_exceeded"
        or err.type == "exceed_context_size_error"
        or "maximum context length" in message
        or "context size" in message
    )


def _stream_error(err: openai.APIError, url: str | None) -> ProviderError:
    """An error object sent inside a 200 stream; its code is an HTTP status on some routers."""
    if _says_context_too_long(err):
        return ContextTooLong(f"{PROVIDER}: {err.message}", provider=PROVIDER)
    code = str(err.code or "")
    status = int(code) if code.isdigit() else 500
    if err.type == "rate_limit_exceeded" or code == "rate_limit_exceeded":
        status = 429
    return error_for_status(status, err.message, provider=PROVIDER, url=url)
