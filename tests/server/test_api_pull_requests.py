"""Pull requests of hosted sessions over the API: a session cloned from a real git server on
loopback becomes a pull request on a GitHub fake checked against GitHub's published API; two
review comments are picked up by the server's own sync job, sent to the session as a follow-up
through the worker pool, the fix pushed and the comments answered; a proposed convention is
kept in the tenant's memory and reaches the tenant's next session only. Another tenant gets 404
everywhere, and the server's token is in no event, log, file or output of the server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pull_kit import REPOSITORY, TOKEN, Delivering, edit, until
from server_kit import Server

SCRIPT = [
    {
        "text": "Looking at the environment first.",
        "tool_calls": [{"name": "bash", "arguments": {"command": "env; git config --list; true"}}],
    },
    edit("calc.py", "a - b", "a + b", "Fixing add."),
    {"text": "Fixed: add now adds."},
    edit("calc.py", "x / 2", "x // 2", "Handling the review."),
    {"text": "half now uses integer division, as the reviewer asked."},
]
DONE = [{"text": "Nothing to do."}]
RULE = "We always use integer division for halves"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Delivering]:
    # The sessions' processes get the server's KESTREL_SANDBOX, as under `kestrel serve`.
    monkeypatch.setenv("KESTREL_SANDBOX", "bwrap" if shutil.which("bwrap") else "none")
    # The token in the server's environment too, where an operator puts it: no session's
    # process may inherit it.
    for name in ("KESTREL_FORGE_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.setenv(name, TOKEN)
    running = Delivering(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    return [r["event"] for r in client.get(f"/sessions/{session_id}/events").json()]


def _learned(client: httpx.Client, session_id: str) -> list[str]:
    return [
        e["text"]
        for e in _events(client, session_id)
        if e["type"] == "context_added" and e["source"] == "memory"
    ]


def _round_done(client: httpx.Client, session_id: str) -> dict[str, Any] | None:
    shown = client.get(f"/sessions/{session_id}/pull-request").json()
    return shown if shown["rounds"] and not shown["following_up"] else None


def test_a_pull_request_whose_review_the_server_syncs_on_its_own(world: Delivering) -> None:
    server = world.server
    acme, globex = server.client(server.token("acme")), server.client(server.token("globex"))
    sid = world.start_session(acme, "fix add in calc.py", SCRIPT, "fix.json")

    for method, path in (
        ("POST", f"/sessions/{sid}/pull-request"),
        ("GET", f"/sessions/{sid}/pull-request"),
        ("POST", f"/sessions/{sid}/pull-request/sync"),
        ("GET", f"/sessions/{sid}/memory"),
        ("POST", f"/sessions/{sid}/memory/accept"),
    ):
        answer = globex.request(method, path, json={} if method == "POST" else None)
        assert answer.status_code == 404, (path, answer.text)
    assert world.forge.pulls == []
    assert acme.get(f"/sessions/{sid}/pull-request").status_code == 404
    shown = json.dumps(_events(acme, sid))
    assert "PATH=" in shown  # What the sandbox's environment holds is in the log to search.

    opened = acme.post(f"/sessions/{sid}/pull-request", json={})
    assert opened.status_code == 201, opened.text
    view = opened.json()
    pull = world.forge.pulls[0]
    assert (view["number"], view["repository"], view["base"]) == (1, REPOSITORY, "main")
    assert pull["head"] == view["branch"] and view["branch"].startswith("kestrel/fix-add-in-calc")
    assert "fix add in calc.py" in pull["body"] and "## Verification" in pull["body"]
    head = world.git.rev_parse(REPOSITORY, pull["head"])
    assert head == view["head"] and "a + b" in world.git.show_file(REPOSITORY, head, "calc.py")
    assert acme.post(f"/sessions/{sid}/pull-request", json={}).status_code == 409
    nothing = acme.post(f"/sessions/{sid}/pull-request/sync")
    assert nothing.status_code == 200 and nothing.json()["state"] == "nothing_new"

    first = world.forge.add_review_comment(REPOSITORY, 1, "calc.py", 6, "use integer division")
    second = world.forge.add_review_comment(
        REPOSITORY, 1, "calc.py", 2, "we always use integer division for halves"
    )
    synced = until(lambda: _round_done(acme, sid), "the server's job answering the review")

    assert synced["last_error"] is None, synced
    done = synced["rounds"][0]
    fixed = world.git.rev_parse(REPOSITORY, pull["head"])
    assert sorted(done["comments"]) == sorted([first, second]) == sorted(done["replied"])
    assert fixed == done["commit"] == synced["head"]
    assert world.git.is_ancestor(REPOSITORY, head, fixed)
    assert "x // 2" in world.git.show_file(REPOSITORY, fixed, "calc.py")
    assert sorted(c for c, _ in world.forge.replies) == sorted([first, second])
    assert all(f"Changed in {fixed[:10]}" in body for _, body in world.forge.replies)
    messages = [e["text"] for e in _events(acme, sid) if e["type"] == "user_message"]
    assert "calc.py:6 (reviewer): use integer division" in messages[-1]
    assert done["proposed"] == [RULE]

    _the_rule_is_kept_for_acme_only(world, acme, globex, sid)

    assert all(r["authorized"] for r in world.forge.requests)
    pushes = [r for r in world.git.requests if "receive-pack" in r["path"] + r["query"]]
    assert pushes and all(r["authorized"] for r in pushes)
    assert world.secrets_seen([acme, globex]) == []


def _the_rule_is_kept_for_acme_only(
    world: Delivering, acme: httpx.Client, globex: httpx.Client, sid: str
) -> None:
    """The review's proposed convention, accepted, starts acme's next session, not globex's."""
    memory = acme.get(f"/sessions/{sid}/memory").json()
    assert memory["repository"].endswith("/acme/shop") and memory["proposed"] == [RULE]
    kept = acme.post(f"/sessions/{sid}/memory/accept", json={}).json()
    assert [e["text"] for e in kept["kept"]] == [RULE] and kept["already"] == []
    assert acme.post(f"/sessions/{sid}/memory/accept").json() == {"kept": [], "already": [RULE]}
    later = world.start_session(acme, "look around", DONE, "later.json")
    theirs = world.start_session(globex, "look around", DONE, "theirs.json")
    assert any(RULE in text for text in _learned(acme, later))
    assert RULE not in json.dumps(_events(globex, theirs))
    assert globex.get("/memory").json() == []
    assert globex.delete(f"/memory/{kept['kept'][0]['id']}").status_code == 404


def test_a_change_the_gate_blocks_is_opened_only_when_accepted(world: Delivering) -> None:
    server = world.server
    acme = server.client(server.token("acme"))
    key = "AKIA" + "Z3MNQ7T4XKD2LW5P"
    turns = [edit("calc.py", "def half", f'KEY = "{key}"\n\n\ndef half'), {"text": "ok"}]
    sid = world.start_session(acme, "add the key", turns, "key.json")

    refused = acme.post(f"/sessions/{sid}/pull-request", json={})

    assert refused.status_code == 409, refused.text
    said = refused.json()["error"]["message"]
    assert "calc.py:5 adds an AWS access key" in said and "accept_security_findings" in said
    assert key not in said and world.forge.pulls == []
    bad = acme.post(f"/sessions/{sid}/pull-request", json={"branch": "main"})
    assert bad.status_code == 400 and world.forge.pulls == []
    accepted = acme.post(
        f"/sessions/{sid}/pull-request",
        json={"accept_security_findings": True, "branch": "kestrel/with-key", "draft": True},
    )
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["draft"] and world.forge.pulls[0]["head"] == "kestrel/with-key"


def test_a_failed_check_is_sent_once(world: Delivering) -> None:
    server = world.server
    acme = server.client(server.token("acme"))
    turns = [edit("calc.py", "a - b", "a + b"), {"text": "Fixed."}, {"text": "Nothing to fix."}]
    sid = world.start_session(acme, "fix add", turns, "check.json")
    view = acme.post(f"/sessions/{sid}/pull-request", json={}).json()
    world.forge.add_check_run(REPOSITORY, view["head"], "tests", "failure", "2 tests failed")

    synced = until(lambda: _round_done(acme, sid), "the failed check sent")

    assert synced["rounds"][0]["failed_checks"] == ["tests"]
    assert synced["rounds"][0]["commit"] == "" and synced["head"] == view["head"]
    messages = [e["text"] for e in _events(acme, sid) if e["type"] == "user_message"]
    assert "- tests: failure. 2 tests failed" in messages[-1]
    again = acme.post(f"/sessions/{sid}/pull-request/sync")
    assert again.status_code == 200 and again.json()["state"] == "nothing_new"
    assert len(acme.get(f"/sessions/{sid}/pull-request").json()["rounds"]) == 1


def test_a_server_without_a_forge_token_delivers_nothing(server: Server) -> None:
    client = server.client(server.token("no-forge"))
    body = {"task": "x", "source": {"path": str(server.repo("plain"))}}
    created = client.post("/sessions", json={**body, "model": server.script(DONE, "x.json")})
    assert created.status_code == 201, created.text

    refused = client.post(f"/sessions/{created.json()['id']}/pull-request", json={})

    assert refused.status_code == 503 and "no forge token" in refused.json()["error"]["message"]
