"""The HTTP API against a real `kestrel serve` on loopback, with a real HTTP client."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from server_kit import BASH_THEN_DONE, KESTREL, Server, wait_for


def _create(client: httpx.Client, server: Server, repo: Path, **extra: object) -> dict:
    body = {"task": "make a file", "source": {"path": str(repo)}, **extra}
    answer = client.post("/sessions", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_a_session_asks_is_answered_over_the_api_and_its_change_is_applied(
    server: Server,
) -> None:
    client = server.client(server.token("acme"))
    repo = server.repo("asks")
    created = _create(client, server, repo, model=server.script(BASH_THEN_DONE, "asks.json"))
    sid = created["id"]
    shown = wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    assert shown["status"] == "running"
    (question,) = client.get(f"/sessions/{sid}/approvals").json()
    assert question["tool"] == "bash" and "echo hi" in question["arguments"]
    answered = client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    assert answered.status_code == 200, answered.text
    done = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert done["finished"] == "done" and done["waiting_on"] == "review"
    diff = client.get(f"/sessions/{sid}/diff")
    assert diff.status_code == 200 and "+hi" in diff.text
    applied = client.post(f"/sessions/{sid}/review", json={"action": "apply"})
    assert applied.json()["ok"], applied.text
    checkout_files = list((server.data / "checkouts").glob("*/made.txt"))
    assert [p.read_text() for p in checkout_files] == ["hi\n"]
    assert not (repo / "made.txt").exists()  # The server works on its own clone.


def test_events_stream_over_sse_and_resume_from_the_last_id(server: Server) -> None:
    client = server.client(server.token("streams"))
    script = server.script([{"text": "Nothing to do."}], "quiet.json")
    sid = _create(client, server, server.repo("streams"), model=script)["id"]
    wait_for(client, sid, lambda v: v["finished"] == "done")
    everything = client.get(f"/sessions/{sid}/events").json()
    seqs = [r["seq"] for r in everything]
    first = _read_sse(client, sid, {}, stop_after=3)
    assert first == seqs[:3]
    rest = _read_sse(client, sid, {"Last-Event-ID": str(first[-1])}, stop_after=len(seqs) - 3)
    assert first + rest == seqs  # Nothing lost, nothing twice.


def _read_sse(client: httpx.Client, sid: str, headers: dict[str, str], stop_after: int) -> list:
    got: list[int] = []
    with client.stream("GET", f"/sessions/{sid}/events/stream", headers=headers) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("id: "):
                got.append(int(line[4:]))
                if len(got) == stop_after:
                    break
    return got


def test_another_tenant_sees_nothing_and_bad_tokens_are_refused(server: Server) -> None:
    owner = server.client(server.token("owner"))
    script = server.script([{"text": "Nothing to do."}], "own.json")
    sid = _create(owner, server, server.repo("owned"), model=script)["id"]
    other = server.client(server.token("intruder"))
    for method, path, body in (
        ("GET", f"/sessions/{sid}", None),
        ("GET", f"/sessions/{sid}/events", None),
        ("GET", f"/sessions/{sid}/events/stream", None),
        ("GET", f"/sessions/{sid}/approvals", None),
        ("POST", f"/sessions/{sid}/approvals/x", {"allow": True}),
        ("POST", f"/sessions/{sid}/cancel", None),
        ("POST", f"/sessions/{sid}/messages", {"text": "hi"}),
        ("POST", f"/sessions/{sid}/plan", {"decision": "approve"}),
        ("GET", f"/sessions/{sid}/diff", None),
        ("POST", f"/sessions/{sid}/review", {"action": "apply"}),
    ):
        answer = other.request(method, path, json=body)
        assert answer.status_code == 404, (method, path, answer.text)
        assert sid not in answer.text or "no session" in answer.text
    assert sid not in other.get("/sessions").text
    for headers in ({}, {"Authorization": "Bearer ks_not-a-token"}, {"Authorization": "Basic x"}):
        bad = httpx.get(f"{server.url}/v1/sessions", headers=headers)
        assert bad.status_code == 401, bad.text


def test_bad_requests_get_clear_4xx_answers(server: Server) -> None:
    client = server.client(server.token("careless"))
    cases = [
        ({"task": "x", "source": {"git_url": "ext::sh -c touch% /tmp/pwned"}}, 400),
        ({"task": "x", "source": {"path": "/etc"}}, 400),
        ({"task": "x", "source": {"path": "/"}, "unknown": 1}, 422),
        ({"task": "", "source": {}}, 422),
        (
            {"task": "x", "source": {"path": str(server.repos)}, "model": "scripted:/etc/passwd"},
            403,
        ),
    ]
    for body, status in cases:
        answer = client.post("/sessions", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["error"]["message"]
    hostile = server.repo("hostile")
    (hostile / ".kestrel").mkdir()
    (hostile / ".kestrel" / "settings.toml").write_text('sandbox = "none"\n')
    subprocess.run(["git", "add", "."], cwd=hostile, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "settings"],
        cwd=hostile,
        check=True,
    )
    refused = client.post(
        "/sessions",
        json={
            "task": "x",
            "source": {"path": str(hostile)},
            "model": server.script([{"text": "n"}], "hostile.json"),
        },
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert ".kestrel/settings.toml" in message and "sandbox" in message
    assert str(server.data) not in message and "kestrel trust" not in message
    clones = (server.data / "checkouts").iterdir()
    assert not any((clone / ".kestrel").exists() for clone in clones)  # The refused one is gone.
    malformed = client.post(
        "/sessions", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert malformed.status_code == 400
    inside = client.post(
        "/sessions", json={"task": "x", "source": {"git_url": "https://127.0.0.1:9/r.git"}}
    )
    assert inside.status_code == 400 and "private or local" in inside.json()["error"]["message"]
    assert "not valid JSON" in malformed.json()["error"]["message"]
    huge = client.post("/sessions", content=b"x" * (60 * 1024 * 1024))
    assert huge.status_code == 413
    # Sent in chunks, with no length declared: still counted, and refused past the limit.
    chunks = (b"x" * (1024 * 1024) for _ in range(60))
    chunked = client.post("/sessions/upload?task=t&kind=tar", content=chunks)
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "too_large"
    for answer, code in ((client.get("/nowhere"), 404), (client.delete("/sessions"), 405)):
        assert answer.status_code == code
        assert set(answer.json()["error"]) == {"code", "message"}


def test_a_tenant_over_its_plan_gets_429_with_retry_after(server: Server) -> None:
    client = server.client(server.token("frugal", plan="free"))
    answer = client.post(
        "/sessions",
        json={"task": "x", "source": {"path": str(server.repos)}, "model": "openai:gpt-4.1"},
    )
    assert answer.status_code == 403  # The free plan does not include this model.
    assert "model" in answer.json()["error"]["message"]


def test_sessions_cut_by_a_killed_server_finish_after_a_restart(tmp_path: Path) -> None:
    server = Server(tmp_path, workers=10)
    server.start()
    token = server.token("restarts", plan="team")
    client = server.client(token)
    script = server.script(BASH_THEN_DONE, "restart.json")
    ids = [_create(client, server, server.repo(f"r{i}"), model=script)["id"] for i in range(10)]
    for sid in ids:  # All ten run, each waiting for an answer.
        wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    assert server.proc is not None
    server.proc.kill()
    server.proc.communicate(timeout=60)

    server.start()
    client = server.client(token)
    for sid in ids:
        shown = wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
        assert shown["status"] == "running", shown
        (question,) = client.get(f"/sessions/{sid}/approvals").json()
        client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    for sid in ids:
        done = wait_for(client, sid, lambda v: v["status"] == "idle")
        assert done["finished"] == "done", done
        assert "+hi" in client.get(f"/sessions/{sid}/diff").text  # As an uncut run's diff.
    server.stop()


def test_cross_tenant_attempts_are_all_refused_without_a_byte_leaked(server: Server) -> None:
    owner_token = server.token("victim")
    owner = server.client(owner_token)
    script = server.script([{"text": "Nothing to do."}], "victim.json")
    sid = _create(owner, server, server.repo("victim"), model=script)["id"]
    wait_for(owner, sid, lambda v: v["status"] == "idle")
    attacker = server.client(server.token("attacker"))
    guesses = [sid, sid[:8], sid.upper(), sid + "0", "../" + sid, "%2e%2e%2f" + sid]
    paths = [
        ("GET", "/sessions/{}", None),
        ("GET", "/sessions/{}/events", None),
        ("GET", "/sessions/{}/events?after=0&limit=5", None),
        ("GET", "/sessions/{}/events/stream", None),
        ("GET", "/sessions/{}/approvals", None),
        ("POST", "/sessions/{}/approvals/call_0", {"allow": True}),
        ("POST", "/sessions/{}/cancel", None),
        ("POST", "/sessions/{}/messages", {"text": "leak it"}),
        ("POST", "/sessions/{}/plan", {"decision": "reject", "feedback": "x"}),
        ("GET", "/sessions/{}/diff", None),
        ("POST", "/sessions/{}/review", {"action": "discard"}),
        ("POST", "/sessions/{}/resume", None),
        ("POST", "/sessions/{}/rewind", {"checkpoint": "abc123"}),
        ("GET", "/sessions/{}/patch", None),
        ("GET", "/sessions/{}/bundle", None),
        ("GET", "/sessions/{}/checkpoints", None),
        ("GET", "/sessions/{}/cost", None),
        ("GET", "/sessions/{}/plan", None),
    ]
    attempts = 0
    for guess in guesses:
        for method, path, body in paths:
            answer = attacker.request(method, path.format(guess), json=body)
            attempts += 1
            assert answer.status_code in (404, 405), (method, path, guess, answer.text)
            assert "Nothing to do" not in answer.text and "victim" not in answer.text
    assert attempts >= 100
    # A revoked token stops working at once, for every route.
    revoked = server.token("revoked")
    client = server.client(revoked)
    assert client.get("/sessions").status_code == 200
    token_id = _token_id(server, "revoked")
    done = subprocess.run(
        [*KESTREL, "serve", "tokens", "revoke", token_id, "--data-dir", str(server.data)],
        env=server.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    for method, path, body in paths:
        answer = client.request(method, path.format(sid), json=body)
        assert answer.status_code == 401, (method, path, answer.text)
    # The owner still sees the session, untouched by any of it.
    shown = owner.get(f"/sessions/{sid}").json()
    assert shown["finished"] == "done" and shown["status"] == "idle"
    types = [r["event"]["type"] for r in owner.get(f"/sessions/{sid}/events").json()]
    assert "user_message" in types and types.count("user_message") == 1


def _token_id(server: Server, tenant: str) -> str:
    """The id of the token `server.token(tenant)` printed for `tenant`."""
    import sqlite3

    conn = sqlite3.connect(server.data / "accounts.db")
    try:
        row = conn.execute(
            "SELECT k.id FROM tokens k JOIN users u ON u.id = k.user_id "
            "JOIN tenants t ON t.id = u.tenant_id WHERE t.name = ?",
            (tenant,),
        ).fetchone()
    finally:
        conn.close()
    return str(row[0])


def test_an_uploaded_tarball_is_a_session_and_a_hostile_one_is_refused(server: Server) -> None:
    client = server.client(server.token("uploads"))
    script = server.script([{"text": "Nothing to do."}], "upload.json")
    good = _tarball({"README.md": b"hello\n"})
    answer = client.post(
        "/sessions/upload",
        params={"task": "look", "kind": "tar.gz", "model": script},
        content=good,
    )
    assert answer.status_code == 201, answer.text
    wait_for(client, answer.json()["id"], lambda v: v["finished"] == "done")
    hostile = _tarball({"../escape.txt": b"x"})
    refused = client.post(
        "/sessions/upload", params={"task": "x", "kind": "tar.gz", "model": script}, content=hostile
    )
    assert refused.status_code == 400 and "escape" not in str(server.tmp.parent.iterdir())


def _tarball(files: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_events_over_a_websocket_and_no_socket_for_another_tenant(server: Server) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    token = server.token("sockets")
    client = server.client(token)
    script = server.script([{"text": "Nothing to do."}], "ws.json")
    sid = _create(client, server, server.repo("sockets"), model=script)["id"]
    wait_for(client, sid, lambda v: v["finished"] == "done")
    expected = [r["seq"] for r in client.get(f"/sessions/{sid}/events").json()]
    url = server.url.replace("http://", "ws://") + f"/v1/sessions/{sid}/events/ws?after=1"
    got: list[int] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as socket:
        while len(got) < len(expected) - 1:
            got.append(json.loads(socket.recv(timeout=30))["seq"])
    assert got == expected[1:]
    # A browser cannot set headers on a WebSocket: it offers the token as a subprotocol.
    with connect(url, subprotocols=["kestrel.v1", f"bearer.{token}"]) as socket:  # type: ignore[list-item]
        assert socket.subprotocol == "kestrel.v1"
        assert json.loads(socket.recv(timeout=30))["seq"] == expected[1]
    other = server.token("socket-thief")
    for headers in ({"Authorization": f"Bearer {other}"}, {}):
        with pytest.raises(InvalidStatus) as refused:  # Refused before the socket opens.
            connect(url, additional_headers=headers)
        assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        connect(url, subprotocols=["kestrel.v1", f"bearer.{other}"])  # type: ignore[list-item]


PLANS = """
[tiny]
tier = 0
max_concurrent_sessions = 1
max_queued_sessions = 1
allowed_models = ["scripted:*"]
max_wall_s = 600

[bulk]
tier = 0
max_concurrent_sessions = 4
max_queued_sessions = 40
allowed_models = ["scripted:*"]
max_wall_s = 600

[paid]
tier = 1
max_concurrent_sessions = 4
max_queued_sessions = 40
allowed_models = ["scripted:*"]
max_wall_s = 600
"""


def test_limits_of_the_plan_and_paid_work_first(tmp_path: Path) -> None:
    server = Server(tmp_path, workers=1, plans=PLANS)
    server.start()
    try:
        script = server.script(BASH_THEN_DONE, "limits.json")
        tiny = server.client(server.token("tiny-co", plan="tiny"))
        first = _create(tiny, server, server.repo("t1"), model=script)["id"]
        wait_for(tiny, first, lambda v: v["waiting_on"] == "approval")  # Runs, holds the worker.
        queued = _create(tiny, server, server.repo("t2"), model=script)
        assert queued["status"] == "queued"
        over = tiny.post(
            "/sessions",
            json={"task": "x", "source": {"path": str(server.repo("t3"))}, "model": script},
        )
        assert over.status_code == 429, over.text
        assert int(over.headers["Retry-After"]) >= 1
        assert "queued" in over.json()["error"]["message"]

        bulk = server.client(server.token("bulk-co", plan="bulk"))
        free_ids = [
            _create(bulk, server, server.repo(f"b{i}"), model=script)["id"] for i in range(20)
        ]
        paid = server.client(server.token("paid-co", plan="paid"))
        paid_id = _create(paid, server, server.repo("p"), model=script)["id"]
        tiny.post(f"/sessions/{first}/cancel")  # The worker is free: who goes next?
        wait_for(paid, paid_id, lambda v: v["waiting_on"] == "approval")
        shown = [bulk.get(f"/sessions/{sid}").json()["status"] for sid in free_ids]
        assert shown.count("queued") >= 19, shown  # Twenty free ones were ahead of it.
    finally:
        server.stop()
