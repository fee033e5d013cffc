"""A session's patch, bundle, checkpoints and cost, and the tenant's usage, over the HTTP API of a
real `kestrel serve`, with real git on both ends."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from server_kit import Server, wait_for

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@e"]
EDIT = "printf 'hello\\nworld\\n' > README.md && echo hi > made.txt"
SPENT = {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.25}
EDIT_THEN_DONE = [
    {
        "text": "Editing.",
        "tool_calls": [{"name": "bash", "arguments": {"command": EDIT}}],
        "usage": SPENT,
    },
    {"text": "All done.", "usage": SPENT},
]


@dataclass
class Finished:
    """A session that changed two files and waits for its change to be reviewed."""

    client: httpx.Client
    session_id: str
    repo: Path
    usage_before: dict


@pytest.fixture(scope="module")
def finished(server: Server) -> Finished:
    client = server.client(server.token("change-co"))
    before = client.get("/usage").json()
    repo = server.repo("change")
    sid = _start(client, repo, server.script(EDIT_THEN_DONE, "edit.json"))
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    (question,) = client.get(f"/sessions/{sid}/approvals").json()
    client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    done = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert done["finished"] == "done" and done["waiting_on"] == "review", done
    return Finished(client, sid, repo, before)


def _start(client: httpx.Client, repo: Path, model: str) -> str:
    body = {"task": "say hello to the world\n\nand make a file", "source": {"path": str(repo)}}
    answer = client.post("/sessions", json={**body, "model": model})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _clone(repo: Path, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(repo), str(into)], check=True)
    return into


def test_patch_and_bundle_while_waiting_for_review_and_once_applied(
    finished: Finished, server: Server, tmp_path: Path
) -> None:
    client, sid = finished.client, finished.session_id
    pending = client.get(f"/sessions/{sid}/patch")
    assert pending.status_code == 200, pending.text
    assert pending.headers["content-type"].startswith("text/x-diff")
    assert pending.headers["kestrel-change"] == "pending"
    assert "+world" in pending.text and "b/made.txt" in pending.text
    patched = _clone(finished.repo, tmp_path / "patched")
    subprocess.run(["git", "apply"], cwd=patched, input=pending.content, check=True)
    assert (patched / "README.md").read_text() == "hello\nworld\n"
    assert (patched / "made.txt").read_text() == "hi\n"

    bundle = client.get(f"/sessions/{sid}/bundle")
    assert bundle.status_code == 200, bundle.text
    assert bundle.headers["content-type"] == "application/octet-stream"
    assert bundle.content.startswith(b"# v2 git bundle\n")
    fresh = _clone(finished.repo, tmp_path / "fresh")
    base = _git(fresh, "rev-parse", "HEAD").strip()
    (tmp_path / "session.bundle").write_bytes(bundle.content)
    _git(fresh, "fetch", "-q", str(tmp_path / "session.bundle"))
    _git(fresh, "merge", "-q", "--ff-only", "FETCH_HEAD")
    assert (fresh / "README.md").read_text() == "hello\nworld\n"
    assert (fresh / "made.txt").read_text() == "hi\n"
    assert _git(fresh, "log", "-1", "--format=%P").strip() == base  # One commit on the base.
    assert _git(fresh, "log", "-1", "--format=%s").strip() == "say hello to the world"
    assert _git(fresh, "status", "--porcelain") == ""

    applied = client.post(f"/sessions/{sid}/review", json={"action": "apply"})
    assert applied.json()["ok"], applied.text
    after = client.get(f"/sessions/{sid}/patch")
    assert after.headers["kestrel-change"] == "applied"
    assert after.content == pending.content  # The same change, now in the checkout.
    full = client.get(f"/sessions/{sid}/bundle", params={"full": "true"})
    assert full.status_code == 200 and full.headers["kestrel-change"] == "applied"
    empty = tmp_path / "empty"
    _git(tmp_path, "init", "-q", str(empty))  # No base commit here: the full bundle has it.
    (tmp_path / "full.bundle").write_bytes(full.content)
    _git(empty, "fetch", "-q", str(tmp_path / "full.bundle"), f"kestrel/{sid}:work")
    _git(empty, "checkout", "-q", "work")
    assert (empty / "made.txt").read_text() == "hi\n"
    assert _git(empty, "rev-parse", "HEAD~1").strip() == base
    assert not (finished.repo / "made.txt").exists()  # The source repository never changes.


def test_a_session_that_changed_nothing_has_an_empty_patch_and_no_bundle(server: Server) -> None:
    client = server.client(server.token("idle-co"))
    sid = _start(client, server.repo("idle"), server.script([{"text": "Nothing."}], "no.json"))
    wait_for(client, sid, lambda v: v["finished"] == "done")
    patch = client.get(f"/sessions/{sid}/patch")
    assert patch.status_code == 200 and patch.content == b""
    assert patch.headers["kestrel-change"] == "none"
    bundle = client.get(f"/sessions/{sid}/bundle")
    assert bundle.status_code == 409
    assert "changed no file" in bundle.json()["error"]["message"]
    assert client.get(f"/sessions/{sid}/checkpoints").json() == []


def test_checkpoints_are_listed_in_order(finished: Finished) -> None:
    listed = finished.client.get(f"/sessions/{finished.session_id}/checkpoints")
    assert listed.status_code == 200, listed.text
    shown = listed.json()
    assert [c["number"] for c in shown] == list(range(1, len(shown) + 1))
    assert len(shown) >= 2 and shown[0]["label"] == "before the first change"
    assert shown[0]["turn"] == 1 and not shown[0]["rewound"]
    assert sorted(c["event"] for c in shown) == [c["event"] for c in shown]
    assert len({c["id"] for c in shown}) == len(shown)
    changed = {f["path"]: f["status"] for c in shown for f in c["files"]}
    assert changed == {"README.md": "M", "made.txt": "A"}
    events = finished.client.get(f"/sessions/{finished.session_id}/events").json()
    at = {r["seq"]: r for r in events}
    for checkpoint in shown:
        record = at[checkpoint["event"]]
        assert record["event"]["type"] == "checkpoint_created"
        assert record["event"]["checkpoint_id"] == checkpoint["id"]


def test_cost_per_model_and_the_tenants_usage(finished: Finished) -> None:
    client, sid = finished.client, finished.session_id
    cost = client.get(f"/sessions/{sid}/cost").json()
    view = client.get(f"/sessions/{sid}").json()
    assert cost["tokens"] == view["tokens"] == 2 * 1200
    assert cost["cost_usd"] == pytest.approx(view["cost_usd"]) and cost["cost_usd"] == 0.5
    assert (cost["input_tokens"], cost["output_tokens"], cost["turns"]) == (2000, 400, 2)
    (model,) = cost["models"]
    assert model["model"] == "scripted" and model["calls"] == 2
    assert model["tokens"] == cost["tokens"] and model["cost_usd"] == pytest.approx(0.5)

    before = finished.usage_before
    assert (before["running"], before["queued"], before["tokens_today"]) == (0, 0, 0)
    usage = client.get("/usage")
    assert usage.status_code == 200, usage.text
    now = usage.json()
    assert now["tokens_today"] >= cost["tokens"] and now["usd_today"] >= 0.5
    assert now["running"] + now["queued"] <= 1
    assert 0 < now["seconds_until_day_resets"] <= 86_400
    assert now["plan"] == {
        "name": "pro",
        "tier": 1,
        "max_concurrent_sessions": 4,
        "max_queued_sessions": 20,
        "tokens_per_day": 50_000_000,
        "usd_per_day": 50.0,
        "allowed_models": [],
        "max_wall_s": 7200.0,
    }


def test_another_tenant_gets_404_and_no_token_gets_401(finished: Finished, server: Server) -> None:
    sid = finished.session_id
    other = server.client(server.token("snoop", plan="free"))
    for path in ("patch", "bundle", "checkpoints", "cost"):
        theirs = other.get(f"/sessions/{sid}/{path}")
        missing = other.get(f"/sessions/{'0' * len(sid)}/{path}")
        assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
        said = theirs.json()["error"]
        assert said == {"code": "not_found", "message": f"no session {sid}"}
        assert missing.json()["error"]["message"] == f"no session {'0' * len(sid)}"
        assert "world" not in theirs.text
    usage = other.get("/usage").json()
    assert usage["tokens_today"] == 0 and usage["plan"]["name"] == "free"
    for path in (f"/sessions/{sid}/patch", f"/sessions/{sid}/bundle", "/usage"):
        for headers in ({}, {"Authorization": "Bearer ks_not-a-token"}):
            bare = httpx.get(f"{server.url}/v1{path}", headers=headers)
            assert bare.status_code == 401, (path, bare.text)
            assert bare.json()["error"]["code"] == "unauthorized"
    for path in ("checkpoints", "cost"):
        assert httpx.get(f"{server.url}/v1/sessions/{sid}/{path}").status_code == 401
