"""Learned conventions: `kestrel memory`, the context every new session starts with, and no
tenant of a hosted server ever given another's (or the server's own) entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kestrel.memory_store import proposals

DONE = [{"text": "Done."}]


def _kestrel(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kestrel", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "app.py").write_text("print(1)\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=root, check=True
        )
    return root


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    return env | {
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
        "KESTREL_DATA_DIR": str(tmp / "data"),
        "KESTREL_SANDBOX": "none",
    }


def test_an_entry_reaches_the_next_session_and_can_be_forgotten(tmp_path: Path) -> None:
    repo, env = _repo(tmp_path / "repo"), _env(tmp_path)
    script = tmp_path / "done.json"
    script.write_text(json.dumps(DONE))
    added = _kestrel(repo, env, "memory", "add", "Use httpx, not requests.")
    assert added.returncode == 0 and "remembered" in added.stdout
    _kestrel(repo, env, "memory", "add", "--scope", "user", "Write dates as ISO 8601.")
    listed = _kestrel(repo, env, "memory", "list").stdout
    assert "[project]  Use httpx, not requests." in listed and "[user]" in listed
    run = _kestrel(
        repo, env, "-p", "hi", "--model", f"scripted:{script}", "--output-format", "stream-json"
    )
    events = [json.loads(line)["event"] for line in run.stdout.splitlines() if line.strip()]
    learned = [e for e in events if e["type"] == "context_added" and e["source"] == "memory"]
    assert len(learned) == 1
    assert "- Write dates as ISO 8601.\n- Use httpx, not requests." in learned[0]["text"]
    entry_id = listed.split()[listed.split().index("Use") - 2]
    assert _kestrel(repo, env, "memory", "rm", entry_id).returncode == 0
    assert "httpx" not in (repo / ".kestrel" / "memory.md").read_text()
    bad = _kestrel(repo, env, "memory", "add", "  ")
    assert bad.returncode == 2 and bad.stderr.startswith("kestrel: ")


def test_review_comments_that_state_a_rule_are_proposed() -> None:
    found = proposals(
        [
            "we use httpx, not requests",
            "typo here",
            "Please use pathlib instead of os.path.",
            "nit: blank line",
        ]
    )
    assert found == ["We use httpx, not requests", "Please use pathlib instead of os.path."]


def test_a_hosted_session_gets_its_own_repository_entries_only(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
    from server_kit import Server, wait_for

    server = Server(tmp_path)
    server.start()
    try:
        home_memory = Path(server.env["HOME"]) / ".config" / "kestrel" / "memory.md"
        home_memory.parent.mkdir(parents=True)
        home_memory.write_text("- The server operator's private note.\n")
        seen: dict[str, str] = {}
        for tenant in ("acme", "globex"):
            repo = server.repo(tenant)
            (repo / ".kestrel").mkdir()
            (repo / ".kestrel" / "memory.md").write_text(f"- {tenant} convention only.\n")
            for args in (["add", "."], ["commit", "-qm", "memory"]):
                git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args]
                subprocess.run(git, cwd=repo, check=True)
            client = server.client(server.token(tenant))
            body = {
                "task": "hi",
                "source": {"path": str(repo)},
                "model": server.script(DONE, f"{tenant}.json"),
            }
            created = client.post("/sessions", json=body)
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            wait_for(client, sid, lambda v: v["status"] != "running")
            records = client.get(f"/sessions/{sid}/events").json()
            seen[tenant] = json.dumps(records)
    finally:
        server.stop()
    assert "acme convention only" in seen["acme"] and "globex" not in seen["acme"]
    assert "globex convention only" in seen["globex"] and "acme convention" not in seen["globex"]
    assert all("operator's private note" not in text for text in seen.values())
