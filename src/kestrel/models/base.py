"""The one interface every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from kestrel.protocol.messages import ModelRequest, StreamPart


class Provider(Protocol):
    """Streams one model reply. The last part is always a `Completion`.

    Failures raise a `kestrel.protocol.errors.ProviderError` subclass; no provider SDK type or
    exception escapes an implementation.
    """

    @property
    def model(self) -> str:
        """The model id, as priced and reported in usage."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Stream text and tool-call deltas, then the completed message with its usage."""
        ...
