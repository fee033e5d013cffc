"""GitLab's REST API (v4) behind the same `Forge` interface as GitHub: a pull request is a merge
request, a review comment the first note of a discussion, a reply a note in that discussion, and
the checks of a commit the jobs of its newest pipeline.

Calls carry the token in the `PRIVATE-TOKEN` header only; errors say what failed with GitLab's
own message, never the token.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from kestrel.delivery.forge import CheckRun, ForgeError, PullRequestInfo, ReviewComment

_TIMEOUT_S = 30.0
_PAGES = 50
_CONCLUSIONS = {
    "failed": "failure",
    "canceled": "cancelled",
    "success": "success",
    "skipped": "skipped",
}
_FINISHED = frozenset(_CONCLUSIONS)
"""Job states that are over; a `manual` job waits for a person, which is no failure."""


class GitLab:
    """GitLab's REST API at `api_url` (`https://HOST/api/v4`) for project `repository` (its
    path, `group/name`)."""

    def __init__(self, api_url: str, token: str, repository: str) -> None:
        self.repository = repository
        headers = {"User-Agent": "kestrel"}
        if token:
            headers["PRIVATE-TOKEN"] = token
        self._http = httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=_TIMEOUT_S)
        self._project = f"/projects/{quote(repository, safe='')}"
        self._discussions: dict[int, str] = {}

    def close(self) -> None:
        """Release the connection."""
        self._http.close()

    def open_pull(
        self, *, title: str, body: str, head: str, base: str, draft: bool
    ) -> PullRequestInfo:
        """Open a merge request from branch `head` into `base` (a draft: "Draft: " title)."""
        payload = {
            "source_branch": head,
            "target_branch": base,
            "title": f"Draft: {title}" if draft else title,
            "description": body,
            "remove_source_branch": False,
        }
        return _merge_request(self._call("POST", f"{self._project}/merge_requests", json=payload))

    def pull(self, number: int) -> PullRequestInfo:
        """A merge request's number (iid), page, head commit and whether it is open, now."""
        return _merge_request(self._call("GET", f"{self._project}/merge_requests/{number}"))

    def review_comments(self, number: int) -> list[ReviewComment]:
        """Every note of the merge request's discussions, oldest first; system notes (pushes,
        label changes) left out. The first note of a discussion starts a thread; the rest are
        replies to it."""
        found: list[ReviewComment] = []
        path = f"{self._project}/merge_requests/{number}/discussions"
        for discussion in self._all(path):
            notes = [n for n in discussion.get("notes") or [] if not n.get("system")]
            if not notes:
                continue
            first = int(notes[0]["id"])
            for note in notes:
                self._discussions[int(note["id"])] = str(discussion["id"])
                found.append(_comment(note, None if int(note["id"]) == first else first))
        return found

    def reply(self, number: int, comment_id: int, body: str) -> int:
        """Answer a note in its discussion; the reply's id."""
        discussion = self._discussions.get(comment_id)
        if discussion is None:
            self.review_comments(number)
            discussion = self._discussions.get(comment_id)
        if discussion is None:
            raise ForgeError(f"merge request !{number} has no note {comment_id} to answer")
        path = f"{self._project}/merge_requests/{number}/discussions/{discussion}/notes"
        return int(self._call("POST", path, json={"body": body})["id"])

    def check_runs(self, sha: str) -> list[CheckRun]:
        """The jobs of the newest pipeline of commit `sha` (none without a pipeline)."""
        pipelines = self._call(
            "GET",
            f"{self._project}/pipelines",
            params={"sha": sha, "order_by": "id", "sort": "desc", "per_page": 1},
        )
        if not pipelines:
            return []
        jobs = self._all(f"{self._project}/pipelines/{int(pipelines[0]['id'])}/jobs")
        return [_check(job) for job in jobs]

    def _all(self, path: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, _PAGES + 1):
            batch = self._call("GET", path, params={"per_page": 100, "page": page})
            found += batch
            if len(batch) < 100:
                break
        return found

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ForgeError(f"cannot reach {self._http.base_url}: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise ForgeError(f"{method} {path}: {response.status_code} {_said(response)}")
        try:
            return response.json()
        except ValueError:
            raise ForgeError(f"{method} {path}: the forge's answer is not JSON") from None


def _merge_request(data: dict[str, Any]) -> PullRequestInfo:
    return PullRequestInfo(
        number=int(data["iid"]),
        url=str(data["web_url"]),
        head_sha=str(data.get("sha") or ""),
        open=data.get("state", "opened") == "opened",
    )


def _comment(note: dict[str, Any], reply_to: int | None) -> ReviewComment:
    position = note.get("position") or {}
    line = position.get("new_line") or position.get("old_line")
    return ReviewComment(
        id=int(note["id"]),
        author=str((note.get("author") or {}).get("username", "")),
        body=str(note.get("body", "")),
        path=str(position.get("new_path") or position.get("old_path") or ""),
        line=int(line) if isinstance(line, int) else None,
        in_reply_to=reply_to,
    )


def _check(job: dict[str, Any]) -> CheckRun:
    status = str(job.get("status", ""))
    conclusion = _CONCLUSIONS.get(status) if status in _FINISHED else None
    if conclusion == "failure" and job.get("allow_failure"):
        conclusion = "neutral"  # A job allowed to fail does not fail the pipeline.
    reason = str(job.get("failure_reason") or "")
    return CheckRun(
        name=str(job.get("name", "")),
        status="completed" if status in _FINISHED else status,
        conclusion=conclusion,
        summary=f"{job.get('stage', '')} job {status}" + (f" ({reason})" if reason else ""),
    )


def _said(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase
    if not isinstance(data, dict):
        return response.reason_phrase
    message = data.get("message") or data.get("error") or ""
    if isinstance(message, dict):  # Validation errors: {"field": ["problem", ...]}
        message = "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in message.items())
    elif isinstance(message, list):
        message = "; ".join(map(str, message))
    return str(message) or response.reason_phrase
