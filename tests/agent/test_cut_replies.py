"""A text reply the output cap cut off is never the session's answer."""

from __future__ import annotations

from pathlib import Path

from loop_kit import make_loop

from kestrel.models.scripted import ScriptedTurn, parse_script
from kestrel.protocol.events import ContextAdded


def cut(text: str) -> ScriptedTurn:
    return ScriptedTurn(text=text, cut=True)


async def test_a_cut_reply_asks_the_model_to_go_on_and_the_finished_one_ends_the_session(
    tmp_path: Path,
) -> None:
    loop = make_loop(tmp_path, [cut("The fix is to chan"), ScriptedTurn(text="Changed it.")])
    finished = await loop.run()
    assert (finished.reason, finished.final_text) == ("done", "Changed it.")
    notes = [r.event for r in loop.store.read(loop.session_id) if r.event.type == "context_added"]
    assert len(notes) == 1
    assert isinstance(notes[0], ContextAdded)
    assert "cut off at the output limit (8,192 tokens)" in notes[0].text


async def test_replies_cut_three_times_in_a_row_end_in_error_not_done(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, [cut("a"), cut("b"), cut("c"), ScriptedTurn(text="never")])
    finished = await loop.run()
    assert finished.reason == "error"
    assert "cut at the output limit (8,192 tokens) 3 times in a row" in finished.detail


async def test_a_reply_between_cut_ones_resets_the_count(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    turns = parse_script(
        [
            {"text": "x", "cut": True},
            {"text": "y", "cut": True},
            {"tool_calls": [{"name": "list_files", "arguments": {"pattern": "*"}}]},
            {"text": "z", "cut": True},
            {"text": "w", "cut": True},
            {"text": "Done."},
        ]
    )
    finished = await (make_loop(tmp_path, turns)).run()
    assert (finished.reason, finished.final_text) == ("done", "Done.")


def test_a_script_says_cut_as_true_or_false() -> None:
    import pytest

    from kestrel.protocol.errors import ConfigError

    with pytest.raises(ConfigError, match="'cut' must be true or false"):
        parse_script([{"text": "x", "cut": "yes"}])
