"""How one event row of the SQLite store is written and read back."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kestrel.protocol.events import Record


def storable(text: str) -> str:
    """JSON text SQLite can hold as UTF-8: lone surrogates (from model output) become escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
    return text


def decode(session_id: str, seq: int, text: str) -> Record:
    """Decode one stored row, naming the row when it cannot be read."""
    from kestrel.protocol.codec import DecodeError, record_from_json

    try:
        record = record_from_json(text)
    except DecodeError as exc:
        raise DecodeError(f"session {session_id!r}, seq {seq}: {exc}") from exc
    if record.session_id != session_id or record.seq != seq:
        raise DecodeError(
            f"session {session_id!r}, seq {seq}: the stored record says "
            f"session {record.session_id!r}, seq {record.seq}"
        )
    return record
