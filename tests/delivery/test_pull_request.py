"""`kestrel pr` end to end: a scripted session's change pushed over HTTP to a real git server,
a pull request opened on a local GitHub fake whose every request and answer is checked against
GitHub's published API description, two review comments, `kestrel pr sync`, the fix pushed and
the comments answered; the token nowhere in the session's events, logs or the pull request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from forge_fake import FakeGitHub
from git_server import GitHttpServer

TOKEN = "ghp_" + "k3str3lT0kenForTests" * 2
CALC = "def add(a, b):\n    return a - b\n\n\ndef half(x):\n    return x / 2\n"
SCRIPT = [
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
    {
        "text": "Handling the review.",
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {"path": "calc.py", "old_str": "x / 2", "new_str": "x // 2"},
            }
        ],
    },
    {"text": "half now uses integer division, as the reviewer asked."},
]


class World:
    """A checkout whose origin is the git server, a home, and Kestrel run in them."""

    def __init__(self, tmp: Path, git: GitHttpServer, forge: FakeGitHub) -> None:
        self.tmp, self.git, self.forge = tmp, git, forge
        self.root = tmp / "checkout"
        self.root.mkdir()
        (self.root / "calc.py").write_text(CALC)
        run = ["git", "-C", str(self.root)]
        subprocess.run([*run, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*run, "add", "."], check=True)
        ident = ["-c", "user.name=t", "-c", "user.email=t@x"]
        subprocess.run([*run, *ident, "commit", "-qm", "start"], check=True)
        git.create_repository("acme/shop", self.root)
        subprocess.run([*run, "remote", "add", "origin", git.url_for("acme/shop")], check=True)
        (tmp / "script.json").write_text(json.dumps(SCRIPT))
        home = tmp / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        for name in ("GITHUB_TOKEN", "GH_TOKEN"):
            self.env.pop(name, None)
        self.env |= {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "KESTREL_DATA_DIR": str(tmp / "data"),
            "KESTREL_SANDBOX": "bwrap" if _has_bwrap() else "none",
            "KESTREL_FORGE_TOKEN": TOKEN,
            "KESTREL_FORGE_API": forge.api_url,
        }

    def kestrel(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kestrel", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def events(self, session_id: str) -> list[dict[str, Any]]:
        out = self.kestrel("sessions", "export", session_id).stdout
        return [json.loads(line)["event"] for line in out.splitlines() if line.strip()]


def _has_bwrap() -> bool:
    import shutil

    return shutil.which("bwrap") is not None


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with GitHttpServer(tmp_path / "remote", token=TOKEN) as git:
        forge = FakeGitHub(token=TOKEN, git_root=git.root)
        forge.start()
        try:
            yield World(tmp_path, git, forge)
        finally:
            forge.stop()
    forge.assert_valid()


def test_a_session_becomes_a_pull_request_whose_review_comes_back_as_a_fix(world: World) -> None:
    script = f"scripted:{world.tmp / 'script.json'}"
    run = world.kestrel(
        "-p",
        "fix add in calc.py",
        "--model",
        script,
        "--output-format",
        "json",
        "--permission-mode",
        "accept-edits",
    )
    session_id = json.loads(run.stdout)["session_id"]

    opened = world.kestrel("pr", session_id)
    assert "opened pull request #1" in opened.stdout
    pull = world.forge.pulls[0]
    assert pull["base"] == "main" and pull["head"].startswith("kestrel/fix-add-in-calc-py-")
    text = pull["body"]
    for part in (
        "## Task",
        "fix add in calc.py",
        "## Change",
        "`calc.py` | 1 | 1",
        "## Verification",
        "## Cost",
        "scripted:",
        "<details>",
        "edit_file",
    ):
        assert part in text, part
    head = world.git.rev_parse("acme/shop", pull["head"])
    message = world.git.commit_message("acme/shop", head)
    assert message.startswith("fix add in calc.py") and "Co-authored-by: Kestrel" in message
    assert "a + b" in world.git.show_file("acme/shop", head, "calc.py")

    first = world.forge.add_review_comment("acme/shop", 1, "calc.py", 6, "use integer division")
    second = world.forge.add_review_comment(
        "acme/shop", 1, "calc.py", 2, "we always use integer division for halves"
    )
    synced = world.kestrel("pr", "sync", session_id)
    assert "2 comments and 0 failed checks sent to the session" in synced.stdout
    fixed = world.git.rev_parse("acme/shop", pull["head"])
    assert fixed != head and world.git.is_ancestor("acme/shop", head, fixed)
    assert "x // 2" in world.git.show_file("acme/shop", fixed, "calc.py")
    assert sorted(c for c, _ in world.forge.replies) == sorted([first, second])
    assert all(f"Changed in {fixed[:10]}" in body for _, body in world.forge.replies)

    assert "a convention to remember? We always use integer division for halves" in synced.stdout
    again = world.kestrel("pr", "sync", session_id)
    assert "no new review comments" in again.stdout
    kept = world.kestrel("memory", "accept", session_id)
    assert "remembered" in kept.stdout
    memory = (world.root / ".kestrel" / "memory.md").read_text()
    assert "- We always use integer division for halves <!-- kestrel: review of pull" in memory
    done = world.tmp / "done.json"
    done.write_text(json.dumps([{"text": "Nothing to do."}]))
    later = world.kestrel("-p", "look", "--model", f"scripted:{done}", "--output-format", "json")
    learned = [
        e["text"]
        for e in world.events(json.loads(later.stdout)["session_id"])
        if e["type"] == "context_added" and e["source"] == "memory"
    ]
    assert learned and "We always use integer division for halves" in learned[0]

    events = world.events(session_id)
    kinds = [e["type"] for e in events]
    assert kinds.count("pull_request_opened") == 1 and kinds.count("pull_request_synced") == 1
    follow_up = [e["text"] for e in events if e["type"] == "user_message"][-1]
    assert "calc.py:6 (reviewer): use integer division" in follow_up
    assert all(entry["authorized"] for entry in world.git.requests)

    exported = json.dumps(events)
    logs = "".join(p.read_text(errors="replace") for p in (world.tmp / "data").rglob("*.log"))
    for place in (exported, logs, text, opened.stdout + opened.stderr, synced.stdout):
        assert TOKEN not in place


def test_bad_input_is_a_clear_error(world: World) -> None:
    missing = world.kestrel("pr", "nosuchsession", check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    usage = world.kestrel("pr", "a", "b", "c", check=False)
    assert usage.returncode == 2 and "kestrel pr sync ID" in usage.stderr
    script = f"scripted:{world.tmp / 'script.json'}"
    run = world.kestrel(
        "-p",
        "fix add",
        "--model",
        script,
        "--output-format",
        "json",
        "--permission-mode",
        "accept-edits",
    )
    session_id = json.loads(run.stdout)["session_id"]
    not_yet = world.kestrel("pr", "sync", session_id, check=False)
    assert not_yet.returncode == 1 and "has no pull request" in not_yet.stderr
    world.env["KESTREL_FORGE_TOKEN"] = "wrong"
    refused = world.kestrel("pr", session_id, check=False)
    assert refused.returncode == 1 and "git push to origin failed" in refused.stderr
    assert "wrong" not in refused.stderr.replace("wrong token", "")


def test_a_change_that_adds_a_secret_is_not_pushed_unless_accepted(world: World) -> None:
    key = "AKIA" + "Z3MNQ7T4XKD2LW5P"
    script = world.tmp / "secret.json"
    edit = {"path": "calc.py", "old_str": "def half", "new_str": f'KEY = "{key}"\n\n\ndef half'}
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "edit_file", "arguments": edit}]}, {"text": "ok"}])
    )
    run = world.kestrel(
        "-p",
        "add the key",
        "--model",
        f"scripted:{script}",
        "--output-format",
        "json",
        "--permission-mode",
        "accept-edits",
        check=False,
    )
    session_id = json.loads(run.stdout)["session_id"]
    refused = world.kestrel("pr", session_id, check=False)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "nothing was pushed" in refused.stderr
    assert "calc.py:5 adds an AWS access key" in refused.stderr
    assert key not in refused.stderr
    assert world.forge.pulls == []
    branches = subprocess.run(
        ["git", "-C", str(world.root), "branch", "--list", "kestrel/*"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert branches.stdout == ""
    accepted = world.kestrel("pr", session_id, "--accept-security-findings")
    assert "opened pull request #1" in accepted.stdout
