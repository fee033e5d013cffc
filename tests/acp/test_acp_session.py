"""`kestrel acp` as an editor sees it: the SDK's own client, over a real stdio pipe, to a real
agent process running scripted sessions on a small git repository."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp.exceptions import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)
from acp_kit import CALC, Editor, Repo, text_prompt, within

from kestrel.protocol.events import CancelRequested, SessionFinished

FIX = [
    {
        "text": "Planning. ",
        "tool_calls": [
            {
                "name": "todo",
                "arguments": {
                    "items": [
                        {"id": "1", "text": "Fix add", "status": "in_progress"},
                        {"id": "2", "text": "Check double", "status": "pending"},
                    ]
                },
            }
        ],
    },
    {
        "text": "Fixing add.",
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
            }
        ],
    },
    {"text": "Fixed: add now adds."},
]


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


async def test_a_whole_session_asks_streams_a_diff_and_applies_on_request(repo: Repo) -> None:
    model = repo.script(FIX)
    async with repo.editor("--model", model) as editor:
        new = await within(editor.agent.new_session(cwd=str(repo.root)))
        prompt = [
            TextContentBlock(type="text", text="Make add add."),
            ResourceContentBlock(
                type="resource_link", name="calc.py", uri=f"file://{repo.root}/calc.py"
            ),
        ]
        done = await within(editor.agent.prompt(session_id=new.session_id, prompt=prompt))

    assert done.stop_reason == "end_turn"
    assert new.modes is not None and new.modes.current_mode_id == "default"
    assert [m.id for m in new.modes.available_modes] == [
        "default",
        "accept-edits",
        "plan",
        "bypass",
    ]
    said = editor.agent_text()
    assert said.startswith("Planning. \n\nFixing add.\n\nFixed: add now adds.\n\nChange ready")
    assert said.count("Change ready: 1 file: 1 modified\n- M calc.py") == 1
    (plan,) = editor.of_kind("plan")
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Fix add", "in_progress"),
        ("Check double", "pending"),
    ]
    # The edit: asked about, with the text it replaces, then run and shown as a diff.
    (edit_asked, options), (apply_asked, _) = editor.asked
    assert edit_asked.title == "Edit calc.py" and edit_asked.kind == "edit"
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    call_id = edit_asked.tool_call_id
    start, *progress = editor.tool_updates(call_id)
    assert (start.kind, start.status, start.title) == ("edit", "pending", "Edit calc.py")
    assert [loc.path for loc in start.locations] == [str(repo.root / "calc.py")]
    assert [u.status for u in progress if u.status] == ["in_progress", "completed"]
    diffs = [
        c for u in progress for c in (u.content or []) if isinstance(c, FileEditToolCallContent)
    ]
    assert diffs and diffs[-1].path == str(repo.root / "calc.py")
    assert "return a - b" in (diffs[-1].old_text or "") and "return a + b" in diffs[-1].new_text
    # The change was kept out of the checkout until the editor said to apply it.
    assert apply_asked.title.startswith("Apply the change to your checkout")
    assert "Applied to your checkout: 1 written" in editor.agent_text()
    assert (repo.root / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert editor.schema.checked > 10


async def test_a_rejected_edit_fails_and_leaves_the_checkout_alone(repo: Repo) -> None:
    model = repo.script(FIX)
    async with repo.editor("--model", model) as editor:
        editor.choose = lambda _call, _options: "reject"
        new = await within(editor.agent.new_session(cwd=str(repo.root)))
        attached = EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri=f"file://{repo.root}/calc.py", text=CALC),
        )
        done = await within(
            editor.agent.prompt(
                session_id=new.session_id, prompt=[*text_prompt("Fix it."), attached]
            )
        )

    assert done.stop_reason == "end_turn"
    ((edit_asked, _),) = editor.asked  # No change, so no question about applying one.
    *_, last = editor.tool_updates(edit_asked.tool_call_id)
    assert last.status == "failed"
    assert "Permission denied" in last.content[-1].content.text
    assert (repo.root / "calc.py").read_text() == CALC


async def test_cancel_stops_the_prompt_midway_and_a_second_prompt_is_refused(repo: Repo) -> None:
    slow = [
        {
            "text": "Reading.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}],
        },
        {"text": "Still thinking.", "delay_s": 600},
    ]
    async with repo.editor("--model", repo.script(slow)) as editor:
        new = await within(editor.agent.new_session(cwd=str(repo.root)))
        sid = new.session_id
        running = asyncio.create_task(
            editor.agent.prompt(session_id=sid, prompt=text_prompt("Look."))
        )
        await within(_read_finished(editor))
        with pytest.raises(RequestError) as refused:
            await within(editor.agent.prompt(session_id=sid, prompt=text_prompt("And this?")))
        await editor.agent.cancel(session_id=sid)
        done = await within(running)

    assert done.stop_reason == "cancelled"
    finished = [e for e in repo.log(sid) if isinstance(e, SessionFinished)]
    assert [e.reason for e in finished] == ["cancelled"]
    assert any(isinstance(e, CancelRequested) and e.by == "editor" for e in repo.log(sid))
    assert refused.value.code == -32001
    assert "Still thinking." not in editor.agent_text()
    (read,) = editor.of_kind("tool_call")
    assert (read.kind, read.title) == ("read", "Read calc.py")


async def _read_finished(editor: Editor) -> None:
    """Wait until the editor has seen a tool call complete."""
    while not [u for u in editor.of_kind("tool_call_update") if u.status == "completed"]:
        await asyncio.sleep(0.05)


async def test_load_replays_an_earlier_session_and_takes_a_follow_up(repo: Repo) -> None:
    script = [*FIX[1:], {"text": "You are welcome."}]
    model = repo.script(script)
    async with repo.editor("--model", model) as first:
        new = await within(first.agent.new_session(cwd=str(repo.root)))
        await within(
            first.agent.set_session_mode(session_id=new.session_id, mode_id="accept-edits")
        )
        done = await within(
            first.agent.prompt(session_id=new.session_id, prompt=text_prompt("Fix add."))
        )
    assert done.stop_reason == "end_turn"
    assert first.asked == []  # accept-edits: the edit ran unasked and was applied.
    assert (repo.root / "calc.py").read_text() == CALC.replace("a - b", "a + b")

    async with repo.editor("--model", model) as second:
        with pytest.raises(RequestError) as unknown:
            await within(second.agent.load_session(cwd=str(repo.root), session_id="nope"))
        loaded = await within(
            second.agent.load_session(cwd=str(repo.root), session_id=new.session_id)
        )
        replayed = list(second.updates)
        more = await within(
            second.agent.prompt(session_id=new.session_id, prompt=text_prompt("Thanks!"))
        )

    assert unknown.value.code == -32002
    assert second.initialized.agent_capabilities.load_session is True
    assert loaded.modes is not None and loaded.modes.current_mode_id == "accept-edits"
    kinds = [u.session_update for _, u in replayed]
    assert kinds[0] == "user_message_chunk" and replayed[0][1].content.text == "Fix add."
    assert "tool_call" in kinds and "agent_message_chunk" in kinds
    assert all(sid == new.session_id for sid, _ in second.updates)
    assert more.stop_reason == "end_turn"
    assert second.agent_text().endswith("You are welcome.")


async def test_a_plan_proposed_in_plan_mode_is_approved_from_the_editor(repo: Repo) -> None:
    steps = [{"id": "s1", "title": "Make add add", "files": ["calc.py"]}]
    script = [
        {
            "text": "Here is my plan.",
            "tool_calls": [
                {"name": "propose_plan", "arguments": {"summary": "Fix add.", "steps": steps}}
            ],
        },
        {"text": "Done as planned."},
    ]
    async with repo.editor("--model", repo.script(script), "--permission-mode", "plan") as editor:
        new = await within(editor.agent.new_session(cwd=str(repo.root)))
        done = await within(
            editor.agent.prompt(session_id=new.session_id, prompt=text_prompt("Plan a fix."))
        )

    assert new.modes is not None and new.modes.current_mode_id == "plan"
    assert done.stop_reason == "end_turn"
    ((asked, options),) = editor.asked
    assert asked.title == "Approve the plan and start on it"
    assert [o.kind for o in options] == ["allow_once", "reject_once"]
    proposed, *approved = editor.of_kind("plan")  # Once approved, the steps are the task list.
    assert [(e.content, e.status) for e in proposed.entries] == [("Make add add", "pending")]
    assert approved and [e.content for e in approved[0].entries] == ["Make add add"]
    assert [u.current_mode_id for u in editor.of_kind("current_mode_update")] == ["default"]
    assert editor.agent_text().endswith("Done as planned.")
