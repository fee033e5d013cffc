"""Hosted memory over the API: a tenant's entries for a repository, kept in the server's store,
start that tenant's next sessions on it (a `context_added` event with source `memory`) and never
another tenant's, even on the same repository; another tenant's entry answers 404."""

from __future__ import annotations

import json
from typing import Any

import httpx
from server_kit import Server, wait_for

DONE = [{"text": "Done."}]
RULE = "Use pathlib, not os.path."


def _session(server: Server, client: httpx.Client, path: str, name: str) -> str:
    body = {"task": "look", "source": {"path": path}, "model": server.script(DONE, name)}
    created = client.post("/sessions", json=body)
    assert created.status_code == 201, created.text
    session_id = str(created.json()["id"])
    wait_for(client, session_id, lambda v: v["status"] == "idle" and v["finished"])
    return session_id


def _memory_events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    records = client.get(f"/sessions/{session_id}/events").json()
    return [
        r["event"]
        for r in records
        if r["event"]["type"] == "context_added" and r["event"]["source"] == "memory"
    ]


def test_entries_reach_their_tenants_sessions_only(server: Server) -> None:
    repo = str(server.repo("shared"))
    acme, globex = server.client(server.token("acme")), server.client(server.token("globex"))
    first = _session(server, acme, repo, "first.json")
    repository = acme.get(f"/sessions/{first}/memory").json()["repository"]
    assert repository.startswith("path:") and repository.endswith("/shared")
    assert _memory_events(acme, first) == []

    added = acme.post("/memory", json={"repository": repository, "text": f"  {RULE}  "})
    assert added.status_code == 201, added.text
    entry = added.json()
    assert entry["text"] == RULE and entry["source"] == "added by hand"
    duplicate = acme.post("/memory", json={"repository": repository, "text": RULE})
    assert duplicate.status_code == 400 and "already remembered" in duplicate.text
    assert acme.post("/memory", json={"repository": repository, "text": " "}).status_code == 400

    mine = _session(server, acme, repo, "mine.json")
    theirs = _session(server, globex, repo, "theirs.json")

    learned = _memory_events(acme, mine)
    assert len(learned) == 1 and f"- {RULE}" in learned[0]["text"]
    assert RULE not in json.dumps(globex.get(f"/sessions/{theirs}/events").json())
    assert globex.get("/memory").json() == []
    assert globex.get(f"/sessions/{theirs}/memory").json()["entries"] == []
    assert globex.delete(f"/memory/{entry['id']}").status_code == 404
    assert [e["text"] for e in acme.get("/memory", params={"repository": repository}).json()] == [
        RULE
    ]
    assert acme.get("/memory", params={"repository": "elsewhere"}).json() == []
    assert acme.get(f"/sessions/{mine}/memory").json()["entries"][0]["id"] == entry["id"]
    assert acme.post(f"/sessions/{mine}/memory/accept", json={"texts": ["x"]}).status_code == 400

    assert acme.delete(f"/memory/{entry['id']}").status_code == 204
    assert acme.get("/memory").json() == []
    again = _session(server, acme, repo, "again.json")
    assert _memory_events(acme, again) == []


def test_another_tenant_gets_404_from_every_delivery_and_memory_route(server: Server) -> None:
    owner = server.client(server.token("owner"))
    sid = _session(server, owner, str(server.repo("owned")), "owned.json")
    repository = owner.get(f"/sessions/{sid}/memory").json()["repository"]
    entry = owner.post("/memory", json={"repository": repository, "text": "Owner's rule."}).json()
    attacker = server.client(server.token("attacker"))
    paths = [
        ("POST", "/sessions/{}/pull-request", {}),
        ("GET", "/sessions/{}/pull-request", None),
        ("POST", "/sessions/{}/pull-request/sync", None),
        ("GET", "/sessions/{}/memory", None),
        ("POST", "/sessions/{}/memory/accept", {}),
    ]
    for guess in (sid, sid[:8], sid.upper(), "../" + sid):
        for method, path, body in paths:
            answer = attacker.request(method, path.format(guess), json=body)
            assert answer.status_code == 404, (method, path, guess, answer.text)
            assert "Owner's rule" not in answer.text and repository not in answer.text
    for guess in (entry["id"], entry["id"][:6], entry["id"].upper()):
        assert attacker.delete(f"/memory/{guess}").status_code == 404
    assert "Owner's rule" not in attacker.get("/memory", params={"repository": repository}).text
    assert [e["text"] for e in owner.get("/memory").json()] == ["Owner's rule."]
