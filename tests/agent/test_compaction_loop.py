"""Compaction inside the loop: a long session compacts and keeps what must be kept verbatim."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from loop_kit import make_loop

from kestrel.agent.compaction import COMPACTION_OPEN
from kestrel.agent.loop import AgentLoop
from kestrel.agent.prompt import task_list_block
from kestrel.agent.state import replay
from kestrel.app import store_output
from kestrel.models.scripted import ScriptedTurn, call, say
from kestrel.protocol.events import (
    CheckpointCreated,
    ContextCompacted,
    Rewound,
    SessionFinished,
    TodoUpdated,
)
from kestrel.protocol.messages import ModelRequest, StreamPart, ToolResultTurn, UserTurn
from kestrel.tools.registry import ToolRegistry, default_tools
from kestrel.tools.todo import Todo

RULES = "RULES: never edit anything under vendor/; run the tests before finishing."
LATER = "Also cover the admin endpoints, please."
ITEMS = [
    {"id": "read", "text": "Read every module", "status": "in_progress"},
    {"id": "admin", "text": "Cover the admin endpoints"},
]


@dataclass
class Recorder:
    """Wraps the loop's model streamer and keeps every request with the role it was sent for."""

    inner: object
    requests: list[tuple[str, ModelRequest]] = field(default_factory=list)

    def __call__(self, request: ModelRequest, **kwargs: object) -> AsyncIterator[StreamPart]:
        self.requests.append((str(kwargs["role"]), request))
        return self.inner(request, **kwargs)  # type: ignore[operator,no-any-return]


def reads(first: int, count: int) -> list[ScriptedTurn]:
    return [call("read_file", path=f"mod{n}.py") for n in range(first, first + count)]


def long_session(
    tmp_path: Path, turns: list[ScriptedTurn], window: int, keep_share: float = 0.3
) -> tuple[AgentLoop, Recorder]:
    root = tmp_path / "repo"
    root.mkdir()
    for n in range(12):  # about 2,200 tokens each
        (root / f"mod{n}.py").write_text(f"# module {n}\n" + f"value_{n} = {n}\n" * 500)
    loop = make_loop(root, turns)
    loop.tools = ToolRegistry([*default_tools(), Todo()])
    loop.config = replace(
        loop.config,
        system_prompt=RULES,
        context_window=window,
        max_output_tokens=1_000,
        move_outputs_over=4_000,
        keep_share=keep_share,
    )
    loop.output_store = partial(store_output, tmp_path / "artifacts")
    recorder = Recorder(loop.streamer)
    loop.streamer = recorder
    return loop, recorder


def test_a_long_session_compacts_and_keeps_request_rules_and_task_list_verbatim(
    tmp_path: Path,
) -> None:
    turns = [call("todo", items=ITEMS), *reads(0, 5), say("First part done.")]
    turns += [*reads(5, 6), say("All done.")]
    loop, recorder = long_session(tmp_path, turns, window=16_000)

    first = asyncio.run(loop.run())
    second = asyncio.run(loop.send(LATER))

    assert (first.reason, second.reason) == ("done", "done")
    records = list(loop.store.read(loop.session_id))
    compactions = [r.event for r in records if isinstance(r.event, ContextCompacted)]
    assert len(compactions) >= 2
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    main = [request for role, request in recorder.requests if role == "main"]
    fast = [request for role, request in recorder.requests if role == "fast"]
    assert len(fast) == len(compactions)  # each summary was written by the fast role
    todos = [r.event for r in records if isinstance(r.event, TodoUpdated)]
    block = task_list_block(todos[-1].items)
    after = main[-1]  # the last request, after the last compaction
    assert after.system == RULES
    assert isinstance(after.messages[0], UserTurn)
    assert after.messages[0].text.startswith(COMPACTION_OPEN)
    texts = [
        m.text if isinstance(m, UserTurn) else getattr(m, "content", "") for m in after.messages
    ]
    assert any(LATER in text for text in texts)
    assert texts[-1].endswith(block)
    assert "fix it" in after.messages[0].text  # the session's goal, verbatim


def test_large_outputs_in_kept_turns_move_to_files_the_model_can_read(tmp_path: Path) -> None:
    turns = [*reads(0, 8), say("Done.")]
    loop, _ = long_session(tmp_path, turns, window=16_000, keep_share=0.5)  # 2 turns stay

    asyncio.run(loop.run())

    moved = [
        item
        for r in loop.store.read(loop.session_id)
        if isinstance(r.event, ContextCompacted)
        for item in r.event.moved
    ]
    assert moved
    for item in moved:
        assert "# module" in Path(item.path).read_text().splitlines()[0]
        assert item.path in item.content


def test_replaying_the_log_gives_the_compacted_conversation(tmp_path: Path) -> None:
    loop, _ = long_session(tmp_path, [*reads(0, 8), say("Done.")], window=16_000)
    asyncio.run(loop.run())

    replayed = replay(loop.store.read(loop.session_id))

    assert replayed.messages == loop.state.messages
    assert any(isinstance(r.event, ContextCompacted) for r in loop.store.read(loop.session_id))
    assert replayed.totals.turns == 9  # the summaries' calls are spent, but are not turns


def test_rewinding_to_before_a_compaction_restores_the_whole_conversation(tmp_path: Path) -> None:
    loop, _ = long_session(tmp_path, [*reads(0, 2), say("Done.")], window=16_000)
    asyncio.run(loop.run())
    before = list(loop.state.messages)
    mark = loop.emit(CheckpointCreated(checkpoint_id="cp1", label="before"))

    loop.emit(
        ContextCompacted(
            message=f'{COMPACTION_OPEN} turns="3">\nsummary',
            kept=1,
            dropped=len(before) - 1,
            transcript="...",
            tokens_before=9_000,
            tokens_after=3_000,
            window_tokens=16_000,
        )
    )
    assert len(loop.state.messages) == 2
    loop.emit(Rewound(checkpoint_id="cp1", to_seq=mark.seq))

    assert loop.state.messages == before


def test_a_request_that_cannot_fit_even_after_compaction_is_a_clear_error(tmp_path: Path) -> None:
    loop, _ = long_session(tmp_path, [*reads(0, 3), say("Done.")], window=3_000)

    finished = asyncio.run(loop.run())

    assert isinstance(finished, SessionFinished)
    assert finished.reason == "error"
    assert "context window" in finished.detail
    results = [m for m in loop.state.messages if isinstance(m, ToolResultTurn)]
    assert results and results[-1].content.count("value_") > 100  # nothing cut silently
