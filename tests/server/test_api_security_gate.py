"""The security gate over the HTTP API: a review's apply of a change that adds risky code is
refused, and goes through only with `accept_security_findings`, on record."""

from __future__ import annotations

import time

import httpx
from server_kit import Server

RISKY = (
    "import subprocess\n\n\ndef run(user_input):\n"
    "    return subprocess.run(user_input, shell=True)\n"
)
DONE: dict[str, object] = {"text": "Done."}
TURNS: list[dict[str, object]] = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "run.py", "content": RISKY}}]},
    *[DONE] * 5,
]


def _settle(client: httpx.Client, sid: str, timeout: float = 120) -> dict[str, object]:
    """Answer every question with yes until the session stops; its view."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for question in client.get(f"/sessions/{sid}/approvals").json():
            client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
        shown = client.get(f"/sessions/{sid}").json()
        if shown["status"] == "idle" and shown.get("finished"):
            return dict(shown)
        time.sleep(0.1)
    raise AssertionError(f"session {sid} never stopped")


def test_an_apply_over_the_api_needs_the_findings_accepted(server: Server) -> None:
    client = server.client(server.token("gate-co"))
    repo = server.repo("gate")
    body = {"task": "add a runner", "source": {"path": str(repo)}}
    started = client.post("/sessions", json={**body, "model": server.script(TURNS, "gate.json")})
    assert started.status_code == 201, started.text
    sid = str(started.json()["id"])
    _settle(client, sid)

    refused = client.post(f"/sessions/{sid}/review", json={"action": "apply"})

    assert refused.status_code == 200 and not refused.json()["ok"], refused.text
    assert "B602" in refused.json()["output"]
    assert "--accept-security-findings" in refused.json()["output"]

    accepted = client.post(
        f"/sessions/{sid}/review", json={"action": "apply", "accept_security_findings": True}
    )

    assert accepted.json()["ok"], accepted.text
    assert "accepted security finding" in accepted.json()["output"]
