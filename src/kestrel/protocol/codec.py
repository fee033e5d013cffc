"""The versioned JSON form of events and records, and its JSON Schema.

A record's JSON form is `{"v": 1, "session_id": ..., "seq": ..., "at": ..., "event": {...}}`, where
the event object is tagged by its `type` field.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from kestrel.protocol.events import SCHEMA_VERSION, Event, Record


class DecodeError(ValueError):
    """A JSON text is not a valid event or record of a known schema version."""


@cache
def _event_adapter() -> TypeAdapter[Event]:
    return TypeAdapter(Event)


def event_to_dict(event: Event) -> dict[str, Any]:
    """The event as plain JSON-ready data."""
    data: dict[str, Any] = _event_adapter().dump_python(event, mode="json")
    return data


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event; raises `DecodeError` for unknown types or bad fields."""
    try:
        return _event_adapter().validate_python(data)
    except ValueError as exc:
        raise DecodeError(str(exc)) from exc


def record_to_dict(record: Record) -> dict[str, Any]:
    """The record's versioned JSON form as plain data."""
    return {
        "v": SCHEMA_VERSION,
        "session_id": record.session_id,
        "seq": record.seq,
        "at": record.at,
        "event": event_to_dict(record.event),
    }


def record_to_json(record: Record) -> str:
    """One line of JSON for the record."""
    # allow_nan=False: NaN and Infinity are not JSON, and other languages' parsers reject them.
    return json.dumps(
        record_to_dict(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def record_from_dict(data: dict[str, Any]) -> Record:
    """Rebuild a record; raises `DecodeError` when it is not of this schema version."""
    if data.get("v") != SCHEMA_VERSION:
        raise DecodeError(f"unsupported event schema version {data.get('v')!r}")
    try:
        return Record(
            session_id=str(data["session_id"]),
            seq=int(data["seq"]),
            at=float(data["at"]),
            event=event_from_dict(data["event"]),
        )
    except (KeyError, TypeError) as exc:
        raise DecodeError(f"malformed record: {exc}") from exc


def record_from_json(text: str) -> Record:
    """Parse one line written by `record_to_json`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DecodeError("a record must be a JSON object")
    return record_from_dict(data)


def event_json_schema() -> dict[str, Any]:
    """JSON Schema of one event object (a union tagged by `type`)."""
    schema: dict[str, Any] = _event_adapter().json_schema(mode="serialization")
    for definition in schema.get("$defs", {}).values():
        # Every event carries its tag; the default on the dataclass is for Python callers only.
        tag = definition.get("properties", {}).get("type", {})
        if isinstance(tag, dict) and "const" in tag:
            required = definition.setdefault("required", [])
            if "type" not in required:
                required.insert(0, "type")
    return schema


def record_json_schema() -> dict[str, Any]:
    """JSON Schema of one record line, as `--output-format stream-json` prints it."""
    event_schema = event_json_schema()
    defs = event_schema.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Kestrel event record",
        "type": "object",
        "required": ["v", "session_id", "seq", "at", "event"],
        "additionalProperties": False,
        "properties": {
            "v": {"const": SCHEMA_VERSION},
            "session_id": {"type": "string"},
            "seq": {"type": "integer", "minimum": 1},
            "at": {"type": "number"},
            "event": event_schema,
        },
        "$defs": defs,
    }
