"""Live spend: a status line after each model call, the day in the footer, costs in the list."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cost_kit import Clock, done, make_loop, priced
from rich.console import Console
from typer.testing import CliRunner

from kestrel.cli.render import ConsoleFrontend, StreamJsonFrontend, footer, spend_line
from kestrel.cli.sessions import app as sessions_app
from kestrel.protocol.events import (
    ModelCompleted,
    Record,
    SessionFinished,
    SessionStarted,
    Totals,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, Usage
from kestrel.store import MemoryStore, SQLiteStore


def completed(seq: int, **usage: float) -> Record:
    event = ModelCompleted(
        request_id=str(seq),
        message=AssistantTurn(text="ok"),
        usage=Usage(model="m", **usage),  # type: ignore[arg-type]
    )
    return Record(session_id="s", seq=seq, at=0.0, event=event)


def view() -> tuple[ConsoleFrontend, io.StringIO]:
    out = io.StringIO()
    return ConsoleFrontend(Console(file=out, width=200, color_system=None)), out


def test_each_model_call_prints_the_running_spend() -> None:
    frontend, out = view()
    start = SessionStarted(session_id="s", task="t", cwd="/w", model="m")
    frontend.render(Record(session_id="s", seq=1, at=0.0, event=start))
    frontend.render(completed(2, input_tokens=1_000, output_tokens=200, cost_usd=0.012))
    frontend.render(Record(session_id="s", seq=3, at=0.0, event=UserMessage(text="more")))
    frontend.render(
        completed(4, input_tokens=200, cache_read_tokens=1_800, output_tokens=100, cost_usd=0.004)
    )
    lines = [line for line in out.getvalue().splitlines() if "⋯" in line]
    assert lines == [
        "  ⋯ spent 1.2k tokens · $0.0120 · 0% cache reads",
        "  ⋯ spent 3.3k tokens · $0.0160 · 60% cache reads",
    ]


def test_a_view_that_joins_midway_says_its_spend_is_this_run_s() -> None:
    frontend, out = view()
    frontend.render(completed(40, input_tokens=10, cost_usd=0.5))
    assert out.getvalue().strip() == "⋯ spent this run 10 tokens · $0.5000 · 0% cache reads"
    assert spend_line(Totals()) == "  ⋯ spent 0 tokens · $0.0000"


def test_the_footer_shows_the_day_only_with_a_daily_budget() -> None:
    totals = Totals(turns=2, input_tokens=100, cost_usd=0.02)
    with_day = SessionFinished(reason="budget", totals=totals, day_cost_usd=0.05, day_tokens=1_500)
    assert "· today $0.0500, 1.5k tokens in all sessions ·" in footer(with_day, "abc")
    assert "today" not in footer(SessionFinished(reason="done", totals=totals), "abc")


async def test_a_session_shows_spend_as_it_goes_and_stream_json_stays_json(
    tmp_path: Path,
) -> None:
    clock = Clock()
    (tmp_path / "w").mkdir()
    store = MemoryStore(clock=clock)
    loop = make_loop(tmp_path / "w", [*priced(0.01, 3), done()], store=store, clock=clock)
    await loop.run()
    records = store.read(loop.session_id)
    frontend, out = view()
    for record in records:
        frontend.render(record)
    shown = [line.strip() for line in out.getvalue().splitlines() if "⋯" in line]
    assert [line.split(" · ")[1] for line in shown] == ["$0.0100", "$0.0200", "$0.0300", "$0.0300"]
    stream = io.StringIO()
    as_json = StreamJsonFrontend(stream)
    for record in records:
        as_json.render(record)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(records)
    assert all(json.loads(line)["seq"] for line in lines)


def test_sessions_list_shows_each_session_s_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("KESTREL_DATA_DIR", str(data))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    with SQLiteStore(data / "sessions.db") as store:
        store.append("s1", SessionStarted(session_id="s1", task="fix it", cwd="/w", model="m"))
        store.append("s1", completed(2, input_tokens=10, cost_usd=0.25).event)
        store.append("s1", completed(3, input_tokens=10, cost_usd=0.125).event)
    runner = CliRunner()
    table = runner.invoke(sessions_app, ["list", "--all"])  # The session ran in another folder.
    assert table.exit_code == 0, table.output
    assert "cost" in table.output and "$0.3750" in table.output
    listed = runner.invoke(sessions_app, ["list", "--all", "--json"])
    assert json.loads(listed.output)[0]["cost_usd"] == 0.375
