"""The two local servers the pull-request tests stand on: real git over smart HTTP with a token,
and the GitHub fake whose requests and answers must fit GitHub's published API description."""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import githubkit.versions.v2022_11_28.models as gh
import httpx
import pytest
from forge_fake import FakeGitHub
from git_server import GitHttpServer

pytestmark = pytest.mark.system

TOKEN = "ghp_" + "fakeT0kenForLocalTests" * 2
REPO = "acme/shop"
ZERO = "0" * 40


class Checkout:
    """A work tree with one commit on `main`, and git run in it with an isolated home."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "checkout"
        self.root.mkdir()
        home = tmp / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env |= {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
        self.git("init", "-q", "-b", "main")
        self.commit("calc.py", "def add(a, b):\n    return a - b\n")

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        done = subprocess.run(
            ["git", *ident, *args], cwd=self.root, env=self.env, capture_output=True, text=True
        )
        assert not check or done.returncode == 0, done.stderr
        return done

    def commit(self, path: str, text: str) -> str:
        (self.root / path).write_text(text)
        self.git("add", path)
        self.git("commit", "-qm", f"change {path}")
        return self.git("rev-parse", "HEAD").stdout.strip()

    def push_over_http(self, url: str, *options: str) -> subprocess.CompletedProcess[str]:
        return self.git(*options, "push", url, "HEAD:refs/heads/feature", check=False)


def _with_token(token: str) -> tuple[str, str]:
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return ("-c", f"http.extraHeader=Authorization: Basic {basic}")


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path)


@pytest.fixture
def git(tmp_path: Path, checkout: Checkout) -> Iterator[GitHttpServer]:
    with GitHttpServer(tmp_path / "remote", token=TOKEN) as server:
        server.create_repository(REPO, checkout.root)
        yield server


@pytest.fixture
def forge(git: GitHttpServer) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, git_root=git.root) as fake:
        yield fake


@pytest.fixture
def api(forge: FakeGitHub) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-GitHub-Api-Version": "2022-11-28"}
    with httpx.Client(base_url=forge.api_url, headers=headers) as client:
        yield client


def test_a_push_with_the_token_lands_and_one_without_is_refused(
    checkout: Checkout, git: GitHttpServer
) -> None:
    head = checkout.commit("calc.py", "def add(a, b):\n    return a + b\n")
    refused = checkout.push_over_http(git.url_for(REPO))
    assert refused.returncode != 0
    assert git.requests[0]["authorized"] is False and git.requests[0]["status"] == 401
    assert git.requests[0]["query"] == "service=git-receive-pack"
    assert not any(r["method"] == "POST" for r in git.requests)
    assert git.rev_parse(REPO, "main") != head

    wrong = checkout.push_over_http(git.url_for(REPO), *_with_token("not-the-token"))
    assert wrong.returncode != 0 and git.requests[-1]["status"] == 401

    git.requests.clear()
    pushed = checkout.push_over_http(git.url_for(REPO), *_with_token(TOKEN))
    assert pushed.returncode == 0, pushed.stderr
    assert git.rev_parse(REPO, "feature") == head
    assert "a + b" in git.show_file(REPO, head, "calc.py")
    assert git.is_ancestor(REPO, git.rev_parse(REPO, "main"), head)
    assert git.commit_message(REPO, head) == "change calc.py"
    assert [r["method"] for r in git.requests] == ["GET", "POST"]
    assert all(r["authorized"] and r["status"] == 200 for r in git.requests)
    assert TOKEN not in repr(git.requests) and not git.backend_errors


def test_a_push_bigger_than_the_post_buffer_is_streamed_in_chunks(
    checkout: Checkout, git: GitHttpServer
) -> None:
    big = os.urandom(100_000).hex()
    head = checkout.commit("data.txt", big)
    pushed = checkout.push_over_http(
        git.url_for(REPO), *_with_token(TOKEN), "-c", "http.postBuffer=1024"
    )
    assert pushed.returncode == 0, pushed.stderr
    assert any(r["chunked"] for r in git.requests if r["path"].endswith("/git-receive-pack"))
    assert git.show_file(REPO, head, "data.txt") == big


def test_a_gzip_compressed_push_is_inflated(checkout: Checkout, git: GitHttpServer) -> None:
    """git compresses fetch requests but not pushes, so this push is written by hand: one
    receive-pack command (deleting a branch needs no pack), gzip-compressed."""
    doomed = checkout.commit("calc.py", "x = 1\n")
    assert checkout.push_over_http(git.url_for(REPO), *_with_token(TOKEN)).returncode == 0
    command = f"{doomed} {ZERO} refs/heads/feature\0report-status\n"
    body = f"{len(command) + 4:04x}{command}0000".encode()
    headers = {
        "Authorization": "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode(),
        "Content-Type": "application/x-git-receive-pack-request",
        "Content-Encoding": "gzip",
    }
    url = f"{git.url_for(REPO)}/git-receive-pack"
    answer = httpx.post(url, content=gzip.compress(body), headers=headers)
    assert answer.status_code == 200, answer.text
    assert b"unpack ok" in answer.content and b"ok refs/heads/feature" in answer.content
    assert git.requests[-1]["content_encoding"] == "gzip"
    gone = subprocess.run(
        ["git", "--git-dir", str(git.path_of(REPO)), "rev-parse", "--verify", "-q", "feature"],
        capture_output=True,
        check=False,
    )
    assert gone.returncode != 0


def test_a_fetch_request_git_compresses_is_served(
    tmp_path: Path, checkout: Checkout, git: GitHttpServer
) -> None:
    for n in range(40):
        checkout.commit("calc.py", f"n = {n}\n")
        checkout.git("branch", f"b{n}")
    checkout.git("push", "-q", str(git.path_of(REPO)), "refs/heads/*:refs/heads/*")
    clone = tmp_path / "clone"
    cloned = checkout.git(*_with_token(TOKEN), "clone", "-q", git.url_for(REPO), str(clone))
    assert cloned.returncode == 0
    assert any(r["content_encoding"] == "gzip" for r in git.requests)
    branches = checkout.git("-C", str(clone), "branch", "-r").stdout
    assert "origin/b39" in branches

    git.requests.clear()
    denied = checkout.git("clone", "-q", git.url_for(REPO), str(tmp_path / "no"), check=False)
    assert denied.returncode != 0 and [r["status"] for r in git.requests] == [401]


def _push_branch(checkout: Checkout, git: GitHttpServer, branch: str, text: str) -> str:
    sha = checkout.commit("calc.py", text)
    checkout.git("push", "-q", "-f", str(git.path_of(REPO)), f"HEAD:refs/heads/{branch}")
    return sha


def test_each_endpoint_answers_what_its_model_accepts(
    checkout: Checkout, git: GitHttpServer, forge: FakeGitHub, api: httpx.Client
) -> None:
    first = _push_branch(checkout, git, "fix", "def add(a, b):\n    return a + b\n\n\nx = 2\n")
    payload = {"title": "Fix add", "head": "fix", "base": "main", "body": "Why.", "draft": True}
    opened = api.post(f"/repos/{REPO}/pulls", json=payload)
    assert opened.status_code == 201
    pull = gh.PullRequest.model_validate(opened.json())
    assert (pull.number, pull.head.sha, pull.head.ref, pull.base.ref) == (1, first, "fix", "main")
    assert pull.draft is True and pull.body == "Why." and pull.user.login == "kestrel-bot"
    assert pull.html_url == f"{forge.api_url}/{REPO}/pull/1" and pull.changed_files == 1
    assert opened.headers["Location"] == pull.url
    assert forge.pulls == [forge.pulls[0]] and forge.pulls[0]["body"] == "Why."

    second = _push_branch(checkout, git, "fix", "def add(a, b):\n    return b + a\n")
    again = gh.PullRequest.model_validate(api.get(f"/repos/{REPO}/pulls/1").json())
    assert again.head.sha == second != first

    ids = [forge.add_review_comment(REPO, 1, "calc.py", 2, f"note {n}") for n in range(3)]
    query: dict[str, str | int] = {"per_page": 2, "sort": "created", "direction": "asc"}
    pages = [api.get(f"/repos/{REPO}/pulls/1/comments", params=query | {"page": n}) for n in (1, 2)]
    listed = [gh.PullRequestReviewComment.model_validate(c) for p in pages for c in p.json()]
    assert [c.id for c in listed] == ids and [len(p.json()) for p in pages] == [2, 1]
    assert (
        listed[0].commit_id == second and listed[0].line == 2 and listed[0].user.login == "reviewer"
    )
    assert listed[0].diff_hunk.startswith("@@ -1,2 +1,2 @@")

    path = f"/repos/{REPO}/pulls/1/comments/{ids[1]}/replies"
    replied = api.post(path, json={"body": "Done."})
    assert replied.status_code == 201
    reply = gh.PullRequestReviewComment.model_validate(replied.json())
    assert reply.in_reply_to_id == ids[1] and reply.body == "Done."
    assert forge.replies == [(ids[1], "Done.")]

    forge.add_check_run(REPO, second, "tests", "failure", "2 failed")
    forge.add_check_run(REPO, first, "tests", "success", "old")
    for ref in (second, "fix"):
        checks = api.get(f"/repos/{REPO}/commits/{ref}/check-runs", params={"per_page": 100})
        runs = gh.ReposOwnerRepoCommitsRefCheckRunsGetResponse200.model_validate(checks.json())
        assert runs.total_count == 1 and runs.check_runs[0].conclusion == "failure"
        assert runs.check_runs[0].output.summary == "2 failed"
        assert [p.number for p in runs.check_runs[0].pull_requests] == [1]
    assert all(r["authorized"] for r in forge.requests) and TOKEN not in repr(forge.requests)


def test_a_bad_or_missing_token_is_refused(forge: FakeGitHub) -> None:
    for headers in ({"Authorization": "Bearer nope"}, {}, {"Authorization": f"token {TOKEN}"}):
        answer = httpx.get(f"{forge.api_url}/repos/{REPO}/pulls/1", headers=headers)
        assert answer.status_code == 401
        assert gh.BasicError.model_validate(answer.json()).message == "Bad credentials"
    assert [r["authorized"] for r in forge.requests] == [False] * 3


def test_unknown_paths_and_numbers_are_not_found(api: httpx.Client) -> None:
    for path in ("/user", f"/repos/{REPO}/pulls/7", "/repos/acme/nothing/pulls/1"):
        answer = api.get(path)
        assert answer.status_code == 404
        assert gh.BasicError.model_validate(answer.json()).message == "Not Found"


def test_a_pull_from_a_missing_branch_is_a_validation_failure(
    checkout: Checkout, git: GitHttpServer, forge: FakeGitHub, api: httpx.Client
) -> None:
    answer = api.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "gone", "base": "main"})
    assert answer.status_code == 422
    refused = gh.ValidationError.model_validate(answer.json())
    assert refused.message == "Validation Failed" and refused.errors
    wrong = refused.errors[0]
    assert (wrong.resource, wrong.field, wrong.code) == ("PullRequest", "head", "invalid")

    _push_branch(checkout, git, "fix", "y = 1\n")
    body = {"title": "x", "head": "acme:fix", "base": "main"}
    assert api.post(f"/repos/{REPO}/pulls", json=body).status_code == 201
    twice = api.post(f"/repos/{REPO}/pulls", json=body)
    assert twice.status_code == 422 and "already exists" in twice.text
    assert forge.pulls[0]["head"] == "fix"


@pytest.mark.parametrize(
    "body",
    [
        {"title": "no head", "base": "main"},
        {"title": "x", "head": "fix", "base": "main", "draft": "yes"},
        {"title": "x", "head": "fix", "base": "main", "labels": ["bug"]},
    ],
)
def test_a_request_body_that_does_not_fit_fails_loudly(
    body: dict[str, object], forge: FakeGitHub, api: httpx.Client
) -> None:
    answer = api.post(f"/repos/{REPO}/pulls", json=body)
    assert answer.status_code == 422 and "ReposOwnerRepoPullsPostBody" in answer.text
    with pytest.raises(AssertionError, match="ReposOwnerRepoPullsPostBody"):
        forge.assert_valid()
    assert len(forge.take_problems()) == 1 and not forge.pulls


def test_a_reply_body_that_does_not_fit_fails_loudly(
    checkout: Checkout, git: GitHttpServer, forge: FakeGitHub, api: httpx.Client
) -> None:
    _push_branch(checkout, git, "fix", "y = 1\n")
    api.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "fix", "base": "main"})
    comment = forge.add_review_comment(REPO, 1, "calc.py", 1, "why?")
    path = f"/repos/{REPO}/pulls/1/comments/{comment}/replies"
    assert api.post(path, json={"text": "wrong key"}).status_code == 422
    assert api.post(path, content=b"{not json").status_code == 400
    assert len(forge.take_problems()) == 2 and forge.replies == []


def test_an_object_the_fake_builds_wrong_fails_loudly(forge: FakeGitHub) -> None:
    with pytest.raises(AssertionError, match="conclusion"):
        forge.add_check_run(REPO, ZERO, "tests", "great", "")
    with pytest.raises(AssertionError, match="CheckRun"):
        forge.stop()
    assert forge.take_problems()
