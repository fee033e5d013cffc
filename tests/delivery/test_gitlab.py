"""`kestrel pr` with GitLab as the forge: a scripted session's change pushed over HTTP to a real
git server, a merge request opened on a local GitLab fake, a diff note, a general note and a
failed pipeline job sent back as one follow-up by `kestrel pr sync`, the fix pushed and each
thread answered; the token nowhere in the session's events, logs or the merge request."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from git_server import GitHttpServer
from gitlab_fake import FakeGitLab

TOKEN = "glpat-" + "K3str3lGitLabT0ken00"
PROJECT = "acme/shop"
CALC = "def add(a, b):\n    return a - b\n\n\ndef half(x):\n    return x / 2\n"


def _edit(old: str, new: str) -> dict[str, Any]:
    args = {"path": "calc.py", "old_str": old, "new_str": new}
    return {"tool_calls": [{"name": "edit_file", "arguments": args}]}


SCRIPT = [
    _edit("a - b", "a + b"),
    {"text": "Fixed: add now adds."},
    _edit("x / 2", "x // 2"),
    {"text": "half now uses integer division, and the tests pass."},
]


class Checkout:
    """A checkout whose origin is the git server, and Kestrel run in it."""

    def __init__(self, tmp: Path, git: GitHttpServer, forge: FakeGitLab) -> None:
        self.root = tmp / "checkout"
        self.root.mkdir()
        (self.root / "calc.py").write_text(CALC)
        run = ["git", "-C", str(self.root)]
        ident = ["-c", "user.name=t", "-c", "user.email=t@x"]
        for args in (["init", "-q", "-b", "main"], ["add", "."], [*ident, "commit", "-qm", "go"]):
            subprocess.run([*run, *args], check=True)
        git.create_repository(PROJECT, self.root)
        subprocess.run([*run, "remote", "add", "origin", git.url_for(PROJECT)], check=True)
        (tmp / "home").mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        self.env |= {
            "HOME": str(tmp / "home"),
            "XDG_CONFIG_HOME": str(tmp / "home" / ".config"),
            "KESTREL_DATA_DIR": str(tmp / "data"),
            "KESTREL_SANDBOX": "bwrap" if shutil.which("bwrap") else "none",
            "KESTREL_FORGE_TOKEN": TOKEN,
            "KESTREL_FORGE_API": forge.api_url,
        }
        (tmp / "script.json").write_text(json.dumps(SCRIPT))
        self.script = f"scripted:{tmp / 'script.json'}"
        self.data = tmp / "data"

    def kestrel(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kestrel", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Checkout, GitHttpServer, FakeGitLab]]:
    with GitHttpServer(tmp_path / "remote", token=TOKEN) as git:
        forge = FakeGitLab(token=TOKEN, git_root=git.root)
        forge.start()
        try:
            yield Checkout(tmp_path, git, forge), git, forge
        finally:
            forge.stop()


def test_a_session_becomes_a_merge_request_whose_review_comes_back_as_a_fix(
    world: tuple[Checkout, GitHttpServer, FakeGitLab],
) -> None:
    checkout, git, forge = world
    run = checkout.kestrel(
        "-p", "fix add in calc.py", "--model", checkout.script,
        "--output-format", "json", "--permission-mode", "accept-edits",
    )  # fmt: skip
    session_id = json.loads(run.stdout)["session_id"]

    opened = checkout.kestrel("pr", session_id, "--draft")

    assert "opened pull request #1" in opened.stdout and "/-/merge_requests/1" in opened.stdout
    mr = forge.merge_requests[0]
    assert mr.target == "main" and mr.source.startswith("kestrel/fix-add-in-calc-py-")
    assert mr.title == "Draft: fix add in calc.py" and "## Verification" in mr.description
    head = git.rev_parse(PROJECT, mr.source)
    assert "a + b" in git.show_file(PROJECT, head, "calc.py")

    diff_note = forge.add_discussion(PROJECT, 1, "use integer division", path="calc.py", line=6)
    general = forge.add_discussion(PROJECT, 1, "please use integer division everywhere")
    forge.add_pipeline(PROJECT, head, [("lint", "success"), ("tests", "failed")])
    synced = checkout.kestrel("pr", "sync", session_id)

    assert "2 comments and 1 failed checks sent to the session" in synced.stdout
    fixed = git.rev_parse(PROJECT, mr.source)
    assert fixed != head and git.is_ancestor(PROJECT, head, fixed)
    assert "x // 2" in git.show_file(PROJECT, fixed, "calc.py")
    assert sorted(note for note, _ in forge.replies) == sorted([diff_note, general])
    assert all(f"Changed in {fixed[:10]}" in body for _, body in forge.replies)
    assert "a convention to remember? Please use integer division everywhere" in synced.stdout
    again = checkout.kestrel("pr", "sync", session_id)
    assert "no new review comments" in again.stdout

    out = checkout.kestrel("sessions", "export", session_id).stdout
    events = [json.loads(line)["event"] for line in out.splitlines() if line.strip()]
    follow_up = [e["text"] for e in events if e["type"] == "user_message"][-1]
    assert "calc.py:6 (reviewer): use integer division" in follow_up
    assert "- tests: failure. test job failed (script_failure)" in follow_up
    assert all(ok for _, _, ok, _ in forge.requests)
    assert all(entry["authorized"] for entry in git.requests)
    logs = "".join(p.read_text(errors="replace") for p in checkout.data.rglob("*.log"))
    for place in (out, logs, mr.description, opened.stdout, synced.stdout):
        assert TOKEN not in place
