"""The whole loop over real files, real ripgrep, real bash and real pytest; only the model is
scripted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from loop_kit import make_loop, transcript

from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import FileChanged, ToolFinished

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"
TESTS = (
    "from calc import add, double\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_double():\n    assert double(4) == 8\n"
)
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(TESTS)
    return root


def fix_script() -> list[ScriptedTurn]:
    return [
        call("grep", "Looking for add.", pattern="def add"),
        call("read_file", path="calc.py"),
        call("bash", "Running the tests first.", command=PYTEST),
        call(
            "edit_file",
            "add subtracts.",
            path="calc.py",
            old_str="return a - b",
            new_str="return a + b",
        ),
        call("bash", command=PYTEST),
        say("Fixed: add now adds."),
    ]


async def test_a_scripted_session_fixes_a_real_bug(project: Path) -> None:
    loop = make_loop(project, fix_script())
    finished = await loop.run()

    assert finished.reason == "done"
    assert finished.final_text == "Fixed: add now adds."
    assert (project / "calc.py").read_text() == BUGGY.replace("a - b", "a + b")
    records = loop.store.read(loop.session_id)
    step = ["model request started", "model completed"]
    assert transcript(records) == [
        "session started",
        "user message",
        *step,
        "call grep",
        "allow by mode",
        "tool started",
        "result grep",
        *step,
        "call read_file",
        "allow by mode",
        "tool started",
        "result read_file",
        *step,
        "call bash",
        "allow by mode",
        "tool started",
        "result bash",
        *step,
        "call edit_file",
        "allow by mode",
        "tool started",
        "file changed",
        "result edit_file",
        *step,
        "call bash",
        "allow by mode",
        "tool started",
        "result bash",
        *step,
        "finished done",
    ]
    runs = [
        r.event for r in records if isinstance(r.event, ToolFinished) and r.event.name == "bash"
    ]
    assert [r.exit_code for r in runs] == [1, 0]
    assert "2 failed" in runs[0].content and "2 passed" in runs[1].content
    (change,) = [r.event for r in records if isinstance(r.event, FileChanged)]
    assert change.path == "calc.py" and "+    return a + b" in change.diff
    assert finished.totals.turns == 6 and finished.totals.tool_calls == 5


async def test_results_the_model_saw_are_in_its_next_request(project: Path) -> None:
    loop = make_loop(project, [*fix_script()[:2], say("ok")])
    await loop.run()
    contents = [m.content for m in loop.state.messages if m.role == "tool"]
    assert "def add" in contents[0]
    assert "     1\tdef add(a, b):" in contents[1]


async def test_malformed_tool_calls_come_back_as_errors_and_the_session_goes_on(
    project: Path,
) -> None:
    turns = [
        ScriptedTurn(tool_calls=(("no_such_tool", "{}"),)),
        ScriptedTurn(tool_calls=(("read_file", "{not json"),)),
        ScriptedTurn(tool_calls=(("read_file", "{}"),)),
        ScriptedTurn(tool_calls=(("read_file", '{"path": 7}'),)),
        ScriptedTurn(tool_calls=(("read_file", '["calc.py"]'),)),
        say("giving up"),
    ]
    loop = make_loop(project, turns)
    finished = await loop.run()
    assert finished.reason == "done"
    errors = [m.content for m in loop.state.messages if m.role == "tool"]
    assert len(errors) == 5
    assert all(m.is_error for m in loop.state.messages if m.role == "tool")  # type: ignore[union-attr]
    assert "no_such_tool" in errors[0] and "read_file" in errors[0]
    assert "JSON" in errors[1]
    assert "path" in errors[2]
    assert "path" in errors[3]
    assert "object" in errors[4]


async def test_parallel_reads_all_run_and_keep_the_model_s_order(project: Path) -> None:
    turn = ScriptedTurn(
        tool_calls=(
            ("read_file", '{"path": "calc.py"}'),
            ("grep", '{"pattern": "def "}'),
            ("list_files", "{}"),
        )
    )
    loop = make_loop(project, [turn, say("seen")])
    await loop.run()
    tool_turns = [m for m in loop.state.messages if m.role == "tool"]
    assert [m.name for m in tool_turns] == ["read_file", "grep", "list_files"]  # type: ignore[union-attr]
    assert not any(m.is_error for m in tool_turns)  # type: ignore[union-attr]


async def test_headless_default_mode_denies_and_tells_the_model(project: Path) -> None:
    turns = [call("bash", command="touch created"), say("ok")]
    loop = make_loop(project, turns, mode="default")
    finished = await loop.run()
    assert finished.reason == "done"
    assert not (project / "created").exists()
    result = loop.state.messages[-2]
    assert result.role == "tool" and result.is_error  # type: ignore[union-attr]
    assert "Permission denied" in result.content and "headless" in result.content  # type: ignore[union-attr]
    assert "deny by headless" in transcript(loop.store.read(loop.session_id))


async def test_plan_mode_refuses_edits(project: Path) -> None:
    turns = [call("write_file", path="new.txt", content="x"), say("ok")]
    loop = make_loop(project, turns, mode="plan")
    await loop.run()
    assert not (project / "new.txt").exists()
    assert "deny by mode" in transcript(loop.store.read(loop.session_id))


async def test_an_edit_of_a_file_changed_since_it_was_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    turns = [
        call("read_file", path="a.txt"),
        call("bash", command="echo two >> a.txt"),
        call("edit_file", path="a.txt", old_str="one", new_str="uno"),
        say("ok"),
    ]
    loop = make_loop(tmp_path, turns)
    await loop.run()
    result = loop.state.messages[-2]
    assert result.role == "tool" and result.is_error  # type: ignore[union-attr]
    assert "changed since you last read it" in result.content  # type: ignore[union-attr]
    assert (tmp_path / "a.txt").read_text() == "one\ntwo\n"
