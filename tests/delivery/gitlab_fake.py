"""A local stand-in for the GitLab REST API (v4) endpoints a merge request needs: open and read
a merge request, its discussions and their notes, and the pipelines and jobs of a commit.

Projects are the bare repositories a `GitHttpServer` serves (`GIT_ROOT/group/name.git`), so a
merge request's head commit is whatever was last pushed to its source branch. Answers have the
fields GitLab's API documentation lists for each object; a request with a parameter the endpoint
does not take, or without one it needs, is kept in `problems`, and `stop()` fails the test with
them. The token must come in `PRIVATE-TOKEN`.
"""

from __future__ import annotations

import hmac
import json
import re
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_OPEN_FIELDS = frozenset(
    {"source_branch", "target_branch", "title", "description", "remove_source_branch",
     "assignee_id", "assignee_ids", "reviewer_ids", "labels", "milestone_id", "squash",
     "allow_collaboration", "target_project_id", "merge_after"}
)  # fmt: skip
_PROJECT = r"/api/v4/projects/(?P<project>[^/]+)"
_MR = _PROJECT + r"/merge_requests/(?P<iid>\d+)"


@dataclass
class MergeRequest:
    """A merge request the fake holds."""

    id: int
    project: str
    iid: int
    title: str
    description: str
    source: str
    target: str
    when: str
    discussions: list[dict[str, Any]] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class FakeGitLab:
    """GitLab's merge-request, discussion and pipeline endpoints for bare repositories."""

    def __init__(self, *, token: str, git_root: Path, login: str = "kestrel-bot") -> None:
        self.git_root = git_root
        self.login = login
        self.problems: list[str] = []
        self.requests: list[tuple[str, str, bool, int]] = []
        self.replies: list[tuple[int, str]] = []
        self._token = token
        self._lock = threading.RLock()
        self._mrs: dict[tuple[str, int], MergeRequest] = {}
        self._pipelines: list[dict[str, Any]] = []
        self._jobs: dict[int, list[dict[str, Any]]] = {}
        self._last_id = 5_000
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen on a free loopback port in a background thread."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening, then fail if any request did not fit the API."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.problems:
            raise AssertionError("GitLab's API refuses:\n" + "\n".join(self.problems))

    @property
    def api_url(self) -> str:
        """`http://127.0.0.1:PORT/api/v4`."""
        assert self._server is not None, "the fake GitLab is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/v4"

    @property
    def merge_requests(self) -> list[MergeRequest]:
        """The merge requests opened so far, oldest first."""
        with self._lock:
            return list(self._mrs.values())

    def add_discussion(
        self, project: str, iid: int, body: str, *, path: str = "", line: int = 0
    ) -> int:
        """A reviewer's thread: on `line` of `path` (a diff note) or on the whole merge
        request; the id of its first note."""
        with self._lock:
            mr = self._mrs[(project, iid)]
            note = self._note(mr, body, "reviewer")
            if path:
                head = self._git(project, "rev-parse", f"refs/heads/{mr.source}")
                base = self._git(project, "rev-parse", f"refs/heads/{mr.target}")
                note["type"] = "DiffNote"
                note["position"] = {
                    "base_sha": base, "start_sha": base, "head_sha": head,
                    "old_path": path, "new_path": path, "position_type": "text",
                    "old_line": None, "new_line": line,
                }  # fmt: skip
            digest = f"{self._new_id():040x}"
            mr.discussions.append({"id": digest, "individual_note": not path, "notes": [note]})
            return int(note["id"])

    def add_pipeline(self, project: str, sha: str, jobs: list[tuple[str, str]]) -> int:
        """A finished pipeline of commit `sha` with jobs `(name, status)`; its id."""
        with self._lock:
            pipeline_id = self._new_id()
            failed = any(status == "failed" for _, status in jobs)
            self._pipelines.append(
                {
                    "id": pipeline_id, "iid": len(self._pipelines) + 1, "project_id": 1,
                    "status": "failed" if failed else "success", "source": "push",
                    "ref": "main", "sha": sha, "web_url": f"{self._site(project)}/-/pipelines/1",
                    "created_at": _now(), "updated_at": _now(), "_project": project,
                }
            )  # fmt: skip
            self._jobs[pipeline_id] = [
                {
                    "id": self._new_id(), "status": status, "stage": "test", "name": name,
                    "ref": "main", "allow_failure": False, "created_at": _now(),
                    "failure_reason": "script_failure" if status == "failed" else None,
                    "web_url": f"{self._site(project)}/-/jobs/1",
                }
                for name, status in jobs
            ]  # fmt: skip
            return pipeline_id

    def handle(self, method: str, target: str, token: str | None, raw: bytes) -> tuple[int, Any]:
        """Answer one request (the HTTP layer only moves bytes)."""
        url = urlsplit(target)
        ok = token is not None and hmac.compare_digest(token.encode(), self._token.encode())
        with self._lock:
            status, payload = (
                self._route(method, url.path, parse_qs(url.query), raw)
                if ok
                else (401, {"message": "401 Unauthorized"})
            )
            self.requests.append((method, url.path, ok, status))
            return status, payload

    def _route(self, method: str, path: str, query: dict[str, list[str]], raw: bytes) -> Any:
        for verb, pattern, operation in _ROUTES:
            found = re.fullmatch(pattern, path)
            if verb == method and found:
                params = {k: unquote(v) for k, v in found.groupdict().items()}
                if not (self.git_root / f"{params['project']}.git").is_dir():
                    return 404, {"message": "404 Project Not Found"}
                body = json.loads(raw) if raw else {}
                return operation(self, params, query, body)
        return 404, {"error": "404 Not Found"}

    def _open(self, params: dict[str, str], _q: Any, body: dict[str, Any]) -> Any:
        project = params["project"]
        unknown = set(body) - _OPEN_FIELDS
        missing = {"source_branch", "target_branch", "title"} - set(body)
        if unknown or missing:
            self.problems.append(f"POST merge_requests: unknown {unknown}, missing {missing}")
            return 400, {"message": f"{sorted(missing)} is missing"}
        for name in ("source_branch", "target_branch"):
            if not self._git(project, "rev-parse", "--verify", "-q", f"refs/heads/{body[name]}"):
                return 400, {"message": {name: ["is invalid"]}}
        if any(m.source == body["source_branch"] for m in self._mrs.values()):
            said = "Another open merge request already exists for this source branch: !1"
            return 409, {"message": [said]}
        iid = 1 + max((i for p, i in self._mrs if p == project), default=0)
        mr = MergeRequest(
            self._new_id(), project, iid, str(body["title"]), str(body.get("description", "")),
            str(body["source_branch"]), str(body["target_branch"]), _now(),
        )  # fmt: skip
        self._mrs[(project, iid)] = mr
        return 201, self._mr_json(mr)

    def _get(self, params: dict[str, str], _q: Any, _b: Any) -> Any:
        mr = self._mrs.get((params["project"], int(params["iid"])))
        return (200, self._mr_json(mr)) if mr else (404, {"message": "404 Not found"})

    def _discussions(self, params: dict[str, str], query: dict[str, list[str]], _b: Any) -> Any:
        mr = self._mrs.get((params["project"], int(params["iid"])))
        if mr is None:
            return 404, {"message": "404 Not found"}
        size = int(query.get("per_page", ["20"])[0])
        first = (int(query.get("page", ["1"])[0]) - 1) * size
        return 200, mr.discussions[first : first + size]

    def _reply(self, params: dict[str, str], _q: Any, body: dict[str, Any]) -> Any:
        mr = self._mrs.get((params["project"], int(params["iid"])))
        found = [d for d in (mr.discussions if mr else []) if d["id"] == params["discussion"]]
        if mr is None or not found:
            return 404, {"message": "404 Not found"}
        if set(body) != {"body"}:
            self.problems.append(f"POST notes takes only a body, not {sorted(body)}")
            return 400, {"message": "body is missing"}
        note = self._note(mr, str(body["body"]), self.login)
        found[0]["notes"].append(note)
        self.replies.append((int(found[0]["notes"][0]["id"]), note["body"]))
        return 201, note

    def _pipelines_of(self, params: dict[str, str], query: dict[str, list[str]], _b: Any) -> Any:
        sha = query.get("sha", [""])[0]
        found = [p for p in self._pipelines if p["_project"] == params["project"]]
        found = [p for p in found if not sha or p["sha"] == sha]
        found.sort(key=lambda p: p["id"], reverse=query.get("sort", ["desc"])[0] == "desc")
        size = int(query.get("per_page", ["20"])[0])
        return 200, [{k: v for k, v in p.items() if k != "_project"} for p in found[:size]]

    def _jobs_of(self, params: dict[str, str], _q: Any, _b: Any) -> Any:
        jobs = self._jobs.get(int(params["pipeline"]))
        return (200, jobs) if jobs is not None else (404, {"message": "404 Not found"})

    def _mr_json(self, mr: MergeRequest) -> dict[str, Any]:
        head = self._git(mr.project, "rev-parse", f"refs/heads/{mr.source}")
        base = self._git(mr.project, "rev-parse", f"refs/heads/{mr.target}")
        return {
            "id": mr.id, "iid": mr.iid, "project_id": 1, "title": mr.title,
            "description": mr.description, "state": "opened", "created_at": mr.when,
            "updated_at": mr.when, "target_branch": mr.target, "source_branch": mr.source,
            "author": self._user(self.login), "draft": mr.title.startswith("Draft:"),
            "work_in_progress": mr.title.startswith("Draft:"), "merge_status": "can_be_merged",
            "sha": head, "web_url": f"{self._site(mr.project)}/-/merge_requests/{mr.iid}",
            "references": {"short": f"!{mr.iid}", "full": f"{mr.project}!{mr.iid}"},
            "diff_refs": {"base_sha": base, "head_sha": head, "start_sha": base},
        }  # fmt: skip

    def _note(self, mr: MergeRequest, body: str, author: str) -> dict[str, Any]:
        return {
            "id": self._new_id(), "type": "DiscussionNote", "body": body, "attachment": None,
            "author": self._user(author), "created_at": _now(), "updated_at": _now(),
            "system": False, "noteable_id": mr.id, "noteable_type": "MergeRequest",
            "noteable_iid": mr.iid, "resolvable": True, "resolved": False,
        }  # fmt: skip

    def _user(self, name: str) -> dict[str, Any]:
        return {"id": len(name), "username": name, "name": name, "state": "active"}

    def _site(self, project: str) -> str:
        return self.api_url.removesuffix("/api/v4") + f"/{project}"

    def _git(self, project: str, *args: str) -> str:
        bare = self.git_root / f"{project}.git"
        command = ["git", "--git-dir", str(bare), *args]
        done = subprocess.run(command, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    def _new_id(self) -> int:
        self._last_id += 1
        return self._last_id


_ROUTES = [
    ("POST", _PROJECT + r"/merge_requests", FakeGitLab._open),
    ("GET", _MR, FakeGitLab._get),
    ("GET", _MR + r"/discussions", FakeGitLab._discussions),
    ("POST", _MR + r"/discussions/(?P<discussion>[0-9a-f]+)/notes", FakeGitLab._reply),
    ("GET", _PROJECT + r"/pipelines", FakeGitLab._pipelines_of),
    ("GET", _PROJECT + r"/pipelines/(?P<pipeline>\d+)/jobs", FakeGitLab._jobs_of),
]


def _handler_for(fake: FakeGitLab) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            """Stay quiet; the request log is `FakeGitLab.requests`."""

        def _answer(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, payload = fake.handle(
                self.command, self.path, self.headers.get("PRIVATE-TOKEN"), raw
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
