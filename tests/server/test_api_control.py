"""Stopping, resuming and rewinding a hosted session over the API."""

from __future__ import annotations

import json

import httpx
from server_kit import BASH_THEN_DONE, Server, wait_for


def _approve_all(client: httpx.Client, sid: str) -> dict:
    while True:
        shown = wait_for(
            client, sid, lambda v: v["status"] == "idle" or v["waiting_on"] == "approval"
        )
        if shown["status"] == "idle":
            return shown
        for question in client.get(f"/sessions/{sid}/approvals").json():
            client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})


def test_rewind_restores_the_files_and_runs_on_with_a_message(server: Server) -> None:
    client = server.client(server.token("rewinder"))
    script = server.script([*BASH_THEN_DONE, {"text": "Started over."}], "rewind.json")
    body = {"task": "make a file", "source": {"path": str(server.repo("rw"))}, "model": script}
    sid = client.post("/sessions", json=body).json()["id"]
    assert _approve_all(client, sid)["finished"] == "done"
    kinds = [r["event"]["type"] for r in client.get(f"/sessions/{sid}/events").json()]
    assert kinds.count("session_resumed") >= 1
    events = client.get(f"/sessions/{sid}/events").json()
    checkpoints = [r["event"] for r in events if r["event"]["type"] == "checkpoint_created"]
    baseline = checkpoints[0]["checkpoint_id"]  # Before the first change.

    unknown = client.post(f"/sessions/{sid}/rewind", json={"checkpoint": "nope"})
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["message"]
    sneaky = client.post(f"/sessions/{sid}/rewind", json={"checkpoint": "--help"})
    assert sneaky.status_code == 422  # Not an id: never reaches the command line.

    back = client.post(f"/sessions/{sid}/rewind", json={"checkpoint": baseline})
    assert back.status_code == 202, back.text
    assert "+hi" not in client.get(f"/sessions/{sid}/diff").text
    again = client.post(
        f"/sessions/{sid}/rewind", json={"checkpoint": baseline, "message": "start over"}
    )
    assert again.status_code == 202, again.text
    done = _approve_all(client, sid)
    assert done["finished"] == "done"
    kinds = [r["event"]["type"] for r in client.get(f"/sessions/{sid}/events").json()]
    assert kinds.count("rewound") == 2
    texts = [
        r["event"]["text"]
        for r in client.get(f"/sessions/{sid}/events").json()
        if r["event"]["type"] == "user_message"
    ]
    assert texts[-1] == "start over"
    other = server.client(server.token("rewind-thief"))
    stolen = other.post(f"/sessions/{sid}/rewind", json={"checkpoint": baseline})
    assert stolen.status_code == 404


def test_a_cancelled_session_resumes_where_it_stopped(server: Server) -> None:
    client = server.client(server.token("pauser"))
    script = server.script(BASH_THEN_DONE, "pause.json")
    body = {"task": "make a file", "source": {"path": str(server.repo("pause"))}, "model": script}
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    assert client.post(f"/sessions/{sid}/cancel").status_code == 202
    stopped = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert stopped["finished"] == "cancelled", stopped
    resumed = client.post(f"/sessions/{sid}/resume")
    assert resumed.status_code == 202, resumed.text
    assert client.post(f"/sessions/{sid}/resume").status_code == 409  # Already on its way.
    assert _approve_all(client, sid)["finished"] == "done"
    again = client.post(f"/sessions/{sid}/resume")
    assert again.status_code == 409 and "follow-up" in again.json()["error"]["message"]
    kinds = [r["event"]["type"] for r in client.get(f"/sessions/{sid}/events").json()]
    assert kinds.count("session_resumed") >= 1


def test_the_stream_says_when_a_run_is_over_and_shows_no_server_folder(server: Server) -> None:
    client = server.client(server.token("watcher"))
    script = server.script([{"text": "Nothing to do."}], "watch.json")
    body = {"task": "look", "source": {"path": str(server.repo("watch"))}, "model": script}
    sid = client.post("/sessions", json=body).json()["id"]
    kinds: list[str] = []
    statuses: list[str] = []
    with client.stream("GET", f"/sessions/{sid}/events/stream") as stream:
        kind = ""
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
                kinds.append(kind)
            elif line.startswith("data: ") and kind == "status":
                statuses.append(json.loads(line.removeprefix("data: "))["status"])
                if statuses[-1] == "idle" and "session_finished" in kinds:
                    break
    assert statuses[-1] == "idle" and "session_finished" in kinds
    shown = client.get(f"/sessions/{sid}").json()
    events = client.get(f"/sessions/{sid}/events").json()
    assert shown["last_seq"] == events[-1]["seq"]
    assert events[0]["event"]["cwd"] == "."
    assert str(server.data) not in json.dumps(events)


def test_a_plan_is_shown_edited_and_approved_over_the_api(server: Server) -> None:
    client = server.client(server.token("planner"))
    steps = [
        {"id": "notes", "title": "Write NOTES.md", "files": ["NOTES.md"]},
        {"id": "more", "title": "Also rewrite everything", "depends_on": ["notes"]},
    ]
    propose = {"name": "propose_plan", "arguments": {"summary": "Notes.", "steps": steps}}
    write = {"name": "write_file", "arguments": {"path": "NOTES.md", "content": "notes\n"}}
    script = server.script(
        [{"tool_calls": [propose]}, {"tool_calls": [write]}, {"text": "Followed the plan."}],
        "plan.json",
    )
    body = {
        "task": "write notes",
        "source": {"path": str(server.repo("plan"))},
        "model": script,
        "plan_first": True,
    }
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "plan" and v["status"] == "idle")
    shown = client.get(f"/sessions/{sid}/plan")
    assert shown.status_code == 200, shown.text
    assert [s["id"] for s in shown.json()["steps"]] == ["notes", "more"]
    broken = [{"id": "notes", "title": "Write NOTES.md", "depends_on": ["gone"]}]
    refused = client.post(f"/sessions/{sid}/plan", json={"decision": "approve", "steps": broken})
    assert refused.status_code == 400, refused.text
    edited = [{"id": "notes", "title": "Write NOTES.md, briefly", "files": ["NOTES.md"]}]
    approved = client.post(
        f"/sessions/{sid}/plan",
        json={"decision": "approve", "steps": edited, "permission_mode": "accept-edits"},
    )
    assert approved.status_code == 202, approved.text
    done = _approve_all(client, sid)
    assert done["finished"] == "done", done
    assert client.get(f"/sessions/{sid}/plan").status_code == 404  # Nothing waits now.
    events = client.get(f"/sessions/{sid}/events").json()
    (decided,) = [r["event"] for r in events if r["event"]["type"] == "plan_decided"]
    assert decided["edited"] and [s["title"] for s in decided["steps"]] == [edited[0]["title"]]
