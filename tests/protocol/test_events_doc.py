"""docs/events.md must describe the event dataclasses as they are."""

from __future__ import annotations

import dataclasses
import importlib.util
import typing
from pathlib import Path
from types import ModuleType

import pytest

from kestrel.protocol.events import Event

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "events.md"
REGENERATE = "run `python scripts/gen_events_doc.py > docs/events.md`"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    """scripts/gen_events_doc.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location(
        "gen_events_doc", ROOT / "scripts" / "gen_events_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sections(text: str) -> dict[str, str]:
    """The doc's `### `name`` sections, by name."""
    found = {}
    for chunk in text.split("\n### `")[1:]:
        name, _, body = chunk.partition("`")
        found[name] = body
    return found


def test_every_event_type_and_field_is_documented() -> None:
    documented = sections(DOC.read_text(encoding="utf-8"))
    for cls in typing.get_args(typing.get_args(Event)[0]):
        fields = dataclasses.fields(cls)
        tag = next(f.default for f in fields if f.name == "type")
        assert tag in documented, f"event type {tag!r} is missing from docs/events.md; {REGENERATE}"
        for field in fields:
            if field.name != "type":
                assert f"| `{field.name}` |" in documented[tag], (
                    f"field {tag}.{field.name} is missing from docs/events.md; {REGENERATE}"
                )


def test_the_doc_is_what_the_generator_prints(generator: ModuleType) -> None:
    assert DOC.read_text(encoding="utf-8") == generator.render(), (
        f"docs/events.md is stale; {REGENERATE}"
    )


def test_shared_types_are_documented(generator: ModuleType) -> None:
    documented = sections(DOC.read_text(encoding="utf-8"))
    names = {cls.__name__ for cls in generator.shared_types()}
    assert {"Limits", "Totals", "AssistantTurn", "ToolCall", "Usage"} <= names
    for cls in generator.shared_types():
        for field in dataclasses.fields(cls):
            assert f"| `{field.name}` |" in documented[cls.__name__], f"{cls.__name__}.{field.name}"


def test_the_generator_refuses_an_undescribed_field(
    generator: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    meanings = {k: dict(v) for k, v in generator.MEANING.items()}
    del meanings["tool_finished"]["exit_code"]
    monkeypatch.setattr(generator, "MEANING", meanings)
    with pytest.raises(KeyError, match=r"tool_finished: describe \['exit_code'\]"):
        generator.render()
