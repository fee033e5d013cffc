"""The versioned JSON form of records: round trips, refusals, and the published JSON Schema."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.protocol.codec import (
    DecodeError,
    event_from_dict,
    record_from_json,
    record_json_schema,
    record_to_json,
)
from kestrel.protocol.events import (
    SCHEMA_VERSION,
    Event,
    Record,
    ToolFinished,
    UserMessage,
)

EVENT_CLASSES: list[type] = list(typing.get_args(typing.get_args(Event)[0]))

# JSON has no NaN or infinity, so the codec cannot be asked to carry them.
FLOATS = st.floats(allow_nan=False, allow_infinity=False)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a field's type, built field by field so that defaulted fields vary too."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is float:
        return FLOATS
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(strategy_for(arg) for arg in args))
    if origin is tuple:
        return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(hint)}
        return st.builds(hint, **fields)
    return st.from_type(hint)


def records_of(cls: type) -> st.SearchStrategy[Record]:
    """Records holding events of class `cls`."""
    return st.builds(
        Record,
        session_id=st.text(min_size=1),
        seq=st.integers(min_value=1, max_value=2**53),
        at=FLOATS,
        event=strategy_for(cls),
    )


ANY_RECORD = st.one_of(*(records_of(cls) for cls in EVENT_CLASSES))
VALIDATOR = jsonschema.Draft202012Validator(record_json_schema())


def test_event_types_have_distinct_tags() -> None:
    tags = [
        next(f.default for f in dataclasses.fields(cls) if f.name == "type")
        for cls in EVENT_CLASSES
    ]
    assert len(set(tags)) == len(EVENT_CLASSES) >= 18


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_event_type_round_trips(cls: type, data: st.DataObject) -> None:
    record = data.draw(records_of(cls))
    line = record_to_json(record)
    assert "\n" not in line
    assert record_from_json(line) == record


@settings(max_examples=150, deadline=None)
@given(record=ANY_RECORD)
def test_encoded_records_satisfy_the_json_schema(record: Record) -> None:
    VALIDATOR.validate(json.loads(record_to_json(record)))


def test_text_that_is_not_valid_utf8_round_trips() -> None:
    record = Record(session_id="s", seq=1, at=0.0, event=UserMessage(text="half \ud83d pair"))
    assert record_from_json(record_to_json(record)) == record


def _line(**changes: Any) -> str:
    data: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "session_id": "s",
        "seq": 1,
        "at": 1.5,
        "event": {"type": "user_message", "text": "hi"},
    }
    data.update(changes)
    return json.dumps(data)


def test_a_record_written_by_hand_decodes() -> None:
    assert record_from_json(_line()) == Record(
        session_id="s", seq=1, at=1.5, event=UserMessage(text="hi")
    )


def test_unknown_fields_are_ignored_so_additions_keep_the_version() -> None:
    event = {"type": "user_message", "text": "hi", "added_later": [1, 2]}
    assert record_from_json(_line(event=event)).event == UserMessage(text="hi")


def test_missing_defaulted_fields_take_their_defaults() -> None:
    event = {"type": "tool_finished", "call_id": "c1", "name": "bash", "content": "ok"}
    assert event_from_dict(event) == ToolFinished(call_id="c1", name="bash", content="ok")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_line(event={"type": "telepathy", "text": "hi"}), "telepathy"),
        (_line(event={"text": "no type"}), "type"),
        (_line(v=2), "unsupported event schema version 2"),
        (_line(v=None), "unsupported event schema version None"),
        (json.dumps({"session_id": "s", "seq": 1, "at": 0, "event": {}}), "version"),
        (_line(event={"type": "user_message", "text": 5}), "text"),
        (_line(event={"type": "model_request_started", "request_id": "r", "model": "m"}), "turn"),
        (_line(event={"type": "permission_decided", "call_id": "c", "decision": "maybe",
                      "decided_by": "rule"}), "decision"),
        (json.dumps({"v": 1, "seq": 1, "at": 0, "event": {"type": "user_message", "text": ""}}),
         "session_id"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "not JSON"),
    ],
)  # fmt: skip
def test_bad_lines_raise_decode_error(line: str, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        record_from_json(line)


def test_the_schema_is_valid_and_accepts_a_hand_written_record() -> None:
    jsonschema.Draft202012Validator.check_schema(record_json_schema())
    VALIDATOR.validate(json.loads(_line()))


@pytest.mark.parametrize(
    "changes",
    [
        {"seq": "one"},
        {"seq": 0},
        {"at": "yesterday"},
        {"v": 2},
        {"extra": True},
        {"event": {"type": "user_message", "text": 5}},
        {"event": {"type": "user_message"}},
        {"event": {"type": "telepathy"}},
        {"event": {"type": "tool_finished", "call_id": "c", "name": "n", "content": "",
                   "exit_code": "zero"}},
        {"event": {"type": "tool_call_requested", "call": {"id": "c", "name": "n"}}},
    ],
)  # fmt: skip
def test_the_schema_rejects_wrong_types_and_shapes(changes: dict[str, Any]) -> None:
    data = json.loads(_line())
    data.update(changes)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(data)
