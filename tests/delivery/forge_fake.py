"""A local stand-in for the few GitHub REST endpoints a pull request needs.

Repositories are the bare ones a `GitHttpServer` serves (`GIT_ROOT/owner/name.git`), so a pull
request's head commit is whatever was last pushed to its branch. Every request body is checked
against the operation's model and every answer against its response model, both generated from
GitHub's published OpenAPI description; anything that does not fit is kept in `problems`, and
`assert_valid()` (also called by `stop()`) fails the test with them.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import re
import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict
from urllib.parse import parse_qs, unquote, urlsplit

import githubkit.versions.v2022_11_28.models as gh
from forge_answers import Answer, Query, arg, error, invalid, misfits, page
from forge_shapes import (
    Check,
    Comment,
    Pull,
    Site,
    check_run,
    diff_hunk,
    pull_request,
    review_comment,
)
from pydantic import BaseModel


class ForgeRequest(TypedDict):
    """One request as the fake saw it; never the credential itself."""

    method: str
    path: str
    query: str
    authorized: bool
    status: int


class FakeGitHub:
    """GitHub's pull-request, review-comment and check-run endpoints for bare repositories."""

    def __init__(self, *, token: str, git_root: Path, login: str = "kestrel-bot") -> None:
        self.git_root = git_root
        self.login = login
        self.requests: list[ForgeRequest] = []
        self.replies: list[tuple[int, str]] = []
        self.problems: list[str] = []
        self._token = token
        self._lock = threading.RLock()
        self._pulls: dict[tuple[str, int], Pull] = {}
        self._comments: list[Comment] = []
        self._checks: list[Check] = []
        self._last_id = 1_000
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeGitHub:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Listen on a free loopback port in a background thread."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening, then fail if any request or answer did not fit GitHub's API."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self.assert_valid()

    @property
    def api_url(self) -> str:
        """`http://127.0.0.1:PORT`, the API's root (what `--api-url` takes)."""
        if self._server is None:
            raise RuntimeError("the fake GitHub is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def pulls(self) -> list[dict[str, Any]]:
        """The pull requests opened so far, oldest first, as `Pull` fields (`repo`, `number`,
        `title`, `head`, `base`, `body`, `draft`, `author`, `sha`, ...)."""
        with self._lock:
            return [dataclasses.asdict(p) for p in self._pulls.values()]

    def assert_valid(self) -> None:
        """Fail with every request body or answer that did not fit its model."""
        with self._lock:
            if self.problems:
                raise AssertionError("GitHub's API refuses:\n" + "\n\n".join(self.problems))

    def take_problems(self) -> list[str]:
        """The problems recorded so far, forgotten (for a test that provokes one on purpose)."""
        with self._lock:
            taken, self.problems = self.problems, []
            return taken

    def add_review_comment(
        self, repo: str, number: int, path: str, line: int, body: str, author: str = "reviewer"
    ) -> int:
        """A reviewer's comment on `line` of `path` at the pull request's head commit; its id."""
        with self._lock:
            sha = self._head_sha(self._pulls[(repo, number)])
            hunk = diff_hunk(self._git(repo, "show", f"{sha}:{path}"), line)
            comment = Comment(
                id=self._new_id(),
                review=self._new_id(),
                repo=repo,
                pull=number,
                path=path,
                line=line,
                body=body,
                author=author,
                sha=sha,
                hunk=hunk,
                when=_now(),
            )
            self._fit(gh.PullRequestReviewComment, review_comment(self._site(repo), comment))
            self._comments.append(comment)
            return comment.id

    def add_check_run(
        self, repo: str, sha: str, name: str, conclusion: str | None, summary: str
    ) -> int:
        """A check of commit `sha`, completed with `conclusion` (None: still in progress)."""
        with self._lock:
            pulls = tuple(
                self._pull_json(p)
                for p in self._pulls.values()
                if p.repo == repo and self._head_sha(p) == sha
            )
            check = Check(
                id=self._new_id(),
                repo=repo,
                sha=sha,
                name=name,
                conclusion=conclusion,
                summary=summary,
                when=_now(),
                pulls=pulls,
            )
            self._fit(gh.CheckRun, check_run(self._site(repo), check))
            self._checks.append(check)
            return check.id

    def handle(self, method: str, target: str, authorization: str | None, raw: bytes) -> Answer:
        """Answer one request and log it (the HTTP layer only moves bytes)."""
        url = urlsplit(target)
        expected = f"Bearer {self._token}".encode()
        authorized = authorization is not None and hmac.compare_digest(
            authorization.encode(), expected
        )
        with self._lock:
            if authorized:
                answer = self._route(method, unquote(url.path), parse_qs(url.query), raw)
            else:
                answer = error(401, "Bad credentials")
            answer = self._checked(f"{method} {url.path}", answer)
            self.requests.append(
                ForgeRequest(
                    method=method,
                    path=url.path,
                    query=url.query,
                    authorized=authorized,
                    status=answer.status,
                )
            )
            return answer

    def _route(self, method: str, path: str, query: Query, raw: bytes) -> Answer:
        for verb, pattern, body_model, operation in _ROUTES:
            found = pattern.fullmatch(path)
            if verb != method or found is None:
                continue
            params = found.groupdict()
            if not (self.git_root / f"{params['repo']}.git").is_dir():
                return error(404, "Not Found")
            body: Any = None
            if body_model is not None:
                try:
                    body = self._fit(body_model, json.loads(raw), f"the body of {method} {path}")
                except ValueError:
                    self.problems.append(f"the body of {method} {path} is not JSON: {raw[:200]!r}")
                    return error(400, "Problems parsing JSON")
                except AssertionError as exc:
                    return error(422, f"Invalid request.\n\n{exc}")
            return operation(self, params, query, body)
        return error(404, "Not Found")

    def _checked(self, what: str, answer: Answer) -> Answer:
        """The answer if it fits its response model, else a 500 (the problem is recorded)."""
        items = answer.payload if isinstance(answer.payload, list) else [answer.payload]
        try:
            for item in items:
                self._fit(answer.model, item, f"the answer to {what}")
        except AssertionError:
            return Answer(500, {"message": "the fake built an invalid answer"}, gh.BasicError)
        return answer

    def _fit(self, model: type[BaseModel], data: Any, what: str = "the fake built") -> Any:
        """`data` if `model` accepts it strictly with no keys it lacks; else record and raise."""
        wrong = misfits(model, data)
        if wrong:
            problem = f"{what}: {model.__name__} refuses {json.dumps(data)[:300]}\n"
            self.problems.append(problem + "\n".join(wrong))
            raise AssertionError(self.problems[-1])
        return data

    def _open_pull(self, params: dict[str, str], _q: Query, body: dict[str, Any]) -> Answer:
        repo, head, base = params["repo"], str(body["head"]).split(":")[-1], str(body["base"])
        if not body.get("title") and body.get("issue") is None:
            return invalid("title", "missing_field")
        for field, branch in (("head", head), ("base", base)):
            if not self._git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}"):
                return invalid(field, "invalid")
        if any(p.repo == repo and p.head == head for p in self._pulls.values()):
            owner = repo.split("/")[0]
            return invalid(None, "custom", f"A pull request already exists for {owner}:{head}.")
        number = 1 + max((n for r, n in self._pulls if r == repo), default=0)
        pull = Pull(
            id=self._new_id(),
            repo=repo,
            number=number,
            title=body.get("title") or "",
            head=head,
            base=base,
            body=body.get("body"),
            draft=bool(body.get("draft")),
            author=self.login,
            when=_now(),
        )
        self._pulls[(repo, number)] = pull
        return Answer(201, self._pull_json(pull), gh.PullRequest)

    def _get_pull(self, params: dict[str, str], _q: Query, _b: None) -> Answer:
        pull = self._pulls.get((params["repo"], int(params["number"])))
        if pull is None:
            return error(404, "Not Found")
        return Answer(200, self._pull_json(pull), gh.PullRequest)

    def _list_comments(self, params: dict[str, str], query: Query, _b: None) -> Answer:
        repo, number = params["repo"], int(params["number"])
        if (repo, number) not in self._pulls:
            return error(404, "Not Found")
        found = [c for c in self._comments if c.repo == repo and c.pull == number]
        found.sort(key=lambda c: (c.when, c.id), reverse=arg(query, "direction") == "desc")
        shaped = [review_comment(self._site(repo), c) for c in page(found, query)]
        return Answer(200, shaped, gh.PullRequestReviewComment)

    def _reply(self, params: dict[str, str], _q: Query, body: dict[str, Any]) -> Answer:
        key = (params["repo"], int(params["number"]), int(params["comment"]))
        parent = next((c for c in self._comments if (c.repo, c.pull, c.id) == key), None)
        if parent is None:
            return error(404, "Not Found")
        reply = dataclasses.replace(
            parent,
            id=self._new_id(),
            review=self._new_id(),
            body=str(body["body"]),
            author=self.login,
            when=_now(),
            reply_to=parent.reply_to or parent.id,
        )
        self._comments.append(reply)
        self.replies.append((parent.id, reply.body))
        return Answer(
            201, review_comment(self._site(parent.repo), reply), gh.PullRequestReviewComment
        )

    def _check_runs(self, params: dict[str, str], query: Query, _b: None) -> Answer:
        repo, ref = params["repo"], params["ref"]
        sha = self._git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if not sha:
            return error(422, f"No commit found for SHA: {ref}")
        runs = [
            check_run(self._site(repo), c) for c in self._checks if (c.repo, c.sha) == (repo, sha)
        ]
        payload = {"total_count": len(runs), "check_runs": page(runs, query)}
        return Answer(200, payload, gh.ReposOwnerRepoCommitsRefCheckRunsGetResponse200)

    def _pull_json(self, pull: Pull) -> dict[str, Any]:
        pull.sha = self._head_sha(pull)
        base = self._git(pull.repo, "rev-parse", "--verify", "-q", f"refs/heads/{pull.base}")
        stats = self._git(pull.repo, "diff", "--numstat", f"{base}...{pull.sha}").splitlines()
        counts = [line.split("\t")[:2] for line in stats]
        facts = {
            "base_sha": base,
            "commits": int(self._git(pull.repo, "rev-list", "--count", f"{base}..{pull.sha}") or 0),
            "additions": sum(int(a) for a, _ in counts if a.isdigit()),
            "deletions": sum(int(d) for _, d in counts if d.isdigit()),
            "changed_files": len(counts),
            "review_comments": sum(
                1 for c in self._comments if (c.repo, c.pull) == (pull.repo, pull.number)
            ),
        }
        return pull_request(self._site(pull.repo), pull, facts)

    def _head_sha(self, pull: Pull) -> str:
        """The head branch's commit now; the last one seen if the branch is gone."""
        now = self._git(pull.repo, "rev-parse", "--verify", "-q", f"refs/heads/{pull.head}")
        return now or pull.sha

    def _git(self, repo: str, *args: str) -> str:
        bare = self.git_root / f"{repo}.git"
        command = ["git", "--git-dir", str(bare), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    def _site(self, repo: str) -> Site:
        return Site(self.api_url, repo, self._git(repo, "symbolic-ref", "--short", "HEAD"))

    def _new_id(self) -> int:
        self._last_id += 1
        return self._last_id


_Operation = Callable[[FakeGitHub, dict[str, str], Query, Any], Answer]
_REPO = r"/repos/(?P<repo>[\w.-]+/[\w.-]+)"
_PULL = rf"{_REPO}/pulls/(?P<number>\d+)"
_ROUTES: list[tuple[str, re.Pattern[str], type[BaseModel] | None, _Operation]] = [
    ("POST", re.compile(rf"{_REPO}/pulls"), gh.ReposOwnerRepoPullsPostBody, FakeGitHub._open_pull),
    ("GET", re.compile(_PULL), None, FakeGitHub._get_pull),
    ("GET", re.compile(rf"{_PULL}/comments"), None, FakeGitHub._list_comments),
    (
        "POST",
        re.compile(rf"{_PULL}/comments/(?P<comment>\d+)/replies"),
        gh.ReposOwnerRepoPullsPullNumberCommentsCommentIdRepliesPostBody,
        FakeGitHub._reply,
    ),
    ("GET", re.compile(rf"{_REPO}/commits/(?P<ref>.+)/check-runs"), None, FakeGitHub._check_runs),
]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            """Stay quiet; the request log is `FakeGitHub.requests`."""

        def _answer(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = fake.handle(self.command, self.path, self.headers.get("Authorization"), raw)
            data = json.dumps(answer.payload, indent=2).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
            self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
            if answer.status == 201:
                self.send_header("Location", str(answer.payload.get("url", "")))
            self.end_headers()
            self.wfile.write(data)

    return Handler
