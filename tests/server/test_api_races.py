"""Requests that race each other, and a server killed between a follow-up and its answer."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from server_kit import BASH_THEN_DONE, Server, wait_for

PLANS = """
[one_at_a_time]
tier = 0
max_concurrent_sessions = 1
max_queued_sessions = 1
allowed_models = ["scripted:*"]
max_wall_s = 600

[short]
tier = 0
max_concurrent_sessions = 2
max_queued_sessions = 2
tokens_per_day = 50_000
usd_per_day = 3.0
allowed_models = ["scripted:*"]
max_wall_s = 2

[sonnet_only]
tier = 0
max_concurrent_sessions = 1
max_queued_sessions = 1
allowed_models = ["*claude-sonnet-*"]
max_wall_s = 600
"""


SERVER_OPTIONS = {"workers": 3, "plans": PLANS}
"""How this module's server runs (see conftest.py)."""


def _create(client: httpx.Client, repo: Path, model: str) -> httpx.Response:
    return client.post(
        "/sessions", json={"task": "make a file", "source": {"path": str(repo)}, "model": model}
    )


def _user_messages(client: httpx.Client, sid: str, text: str) -> int:
    events = client.get(f"/sessions/{sid}/events").json()
    return sum(
        1 for r in events if r["event"]["type"] == "user_message" and r["event"]["text"] == text
    )


def test_follow_ups_sent_at_once_run_the_session_once(server: Server) -> None:
    client = server.client(server.token("eager"))
    script = server.script([{"text": "First."}, {"text": "Second."}], "twice.json")
    created = _create(client, server.repo("eager"), script)
    sid = created.json()["id"]
    wait_for(client, sid, lambda v: v["status"] == "idle")
    texts = [f"follow-up {i}" for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda t: client.post(f"/sessions/{sid}/messages", json={"text": t}), texts)
        )
    codes = sorted(a.status_code for a in answers)
    assert codes == [202] + [409] * 7, [a.text for a in answers]
    wait_for(client, sid, lambda v: v["status"] == "idle")
    sent = [t for t in texts if _user_messages(client, sid, t)]
    assert len(sent) == 1 and _user_messages(client, sid, sent[0]) == 1


def test_sessions_created_at_once_take_no_more_than_the_plan_allows(server: Server) -> None:
    client = server.client(server.token("rushed", plan="one_at_a_time"))
    script = server.script(BASH_THEN_DONE, "rushed.json")
    repos = [server.repo(f"rush{i}") for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda repo: _create(client, repo, script), repos))
    codes = sorted(a.status_code for a in answers)
    assert codes == [201, 201, 429, 429, 429, 429], [a.text for a in answers]
    clones = list((server.data / "checkouts").iterdir())
    owned = {a.json()["id"] for a in answers if a.status_code == 201}
    assert len(owned) == 2 and len(clones) >= 2  # The refused ones left no checkout behind:
    listed = {s["id"] for s in client.get("/sessions").json()}
    assert listed == owned
    for sid in owned:
        client.post(f"/sessions/{sid}/cancel")


def test_a_repository_cannot_choose_a_model_its_plan_refuses(server: Server) -> None:
    # The server's default model is allowed; the one the repository asks for is not.
    client = server.client(server.token("sly", plan="sonnet_only"))
    repo = server.repo("sly")
    (repo / ".kestrel").mkdir()
    (repo / ".kestrel" / "settings.toml").write_text('model = "openai:gpt-4.1"\n')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "settings"], cwd=repo, check=True)
    answer = client.post("/sessions", json={"task": "x", "source": {"path": str(repo)}})
    assert answer.status_code == 403, answer.text
    assert "openai:gpt-4.1" in answer.json()["error"]["message"]
    assert client.get("/sessions").json() == []


def test_a_follow_up_cut_by_a_killed_server_is_sent_once(tmp_path: Path) -> None:
    server = Server(tmp_path, workers=1)
    server.start()
    token = server.token("cut", plan="team")
    client = server.client(token)
    script = server.script([{"text": "Looked."}, *BASH_THEN_DONE], "cut.json")
    sid = _create(client, server.repo("cut"), script).json()["id"]
    wait_for(client, sid, lambda v: v["status"] == "idle")
    sent = client.post(f"/sessions/{sid}/messages", json={"text": "now make the file"})
    assert sent.status_code == 202, sent.text
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    assert server.proc is not None
    server.proc.kill()
    server.proc.communicate(timeout=60)

    server.start()
    client = server.client(token)
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    (question,) = client.get(f"/sessions/{sid}/approvals").json()
    client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    done = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert done["finished"] == "done", done
    assert _user_messages(client, sid, "now make the file") == 1
    assert "+hi" in client.get(f"/sessions/{sid}/diff").text
    server.stop()


def test_a_session_runs_under_its_plans_wall_time_and_daily_budget(server: Server) -> None:
    client = server.client(server.token("hasty", plan="short"))
    slow = [
        {"text": "Waiting.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 4"}}]},
        {"text": "Should not get here."},
    ]
    body = {
        "task": "wait",
        "source": {"path": str(server.repo("hasty"))},
        "model": server.script(slow, "slow.json"),
        "permission_mode": "bypass",
    }
    answer = client.post("/sessions", json=body)
    assert answer.status_code == 201, answer.text
    sid = answer.json()["id"]
    done = wait_for(client, sid, lambda v: v["status"] == "idle" and v["finished"])
    assert done["finished"] == "budget", done
    (started, *_) = client.get(f"/sessions/{sid}/events").json()
    limits = started["event"]["limits"]
    assert limits["max_wall_s"] == 2 and limits["max_tokens"] <= 50_000
    assert 0 < limits["max_cost_usd"] <= 3.0


def test_a_follow_up_that_looks_like_an_option_is_only_a_message(server: Server) -> None:
    client = server.client(server.token("tricky"))
    script = server.script([{"text": "First."}, {"text": "Second."}], "tricky.json")
    sid = _create(client, server.repo("tricky"), script).json()["id"]
    wait_for(client, sid, lambda v: v["status"] == "idle")
    text = "--model=scripted:/etc/hostname"
    assert client.post(f"/sessions/{sid}/messages", json={"text": text}).status_code == 202
    done = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert done["finished"] == "done" and done["model"] == f"{script}"
    assert _user_messages(client, sid, text) == 1


def test_a_question_open_when_the_server_is_stopped_gently_is_asked_again(tmp_path: Path) -> None:
    server = Server(tmp_path, workers=1)
    server.start()
    token = server.token("deploys", plan="team")
    client = server.client(token)
    sid = _create(client, server.repo("deploy"), server.script(BASH_THEN_DONE, "d.json"))
    sid = sid.json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    server.stop()  # SIGTERM: a deploy, say.

    server.start()
    client = server.client(token)
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    (question,) = client.get(f"/sessions/{sid}/approvals").json()
    assert "echo hi" in question["arguments"]
    client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    done = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert done["finished"] == "done", done
    assert "+hi" in client.get(f"/sessions/{sid}/diff").text  # The command ran after all.
    server.stop()
