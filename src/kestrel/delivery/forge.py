"""A forge's REST API, as far as pull requests need it: the `Forge` interface, and GitHub (and
GitHub Enterprise) behind it.

Calls carry the token in the `Authorization` header only; errors say what failed with the
forge's own message, never the token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from kestrel.protocol.errors import KestrelError

GITHUB_API = "https://api.github.com"
_TIMEOUT_S = 30.0


class ForgeError(KestrelError):
    """The forge refused or failed a call; the message says which and why."""


@dataclass(frozen=True, slots=True)
class PullRequestInfo:
    """A pull request as the forge answers for it."""

    number: int
    url: str
    head_sha: str
    open: bool = True
    """False once it was closed or merged: nothing more to sync."""


@dataclass(frozen=True, slots=True)
class ReviewComment:
    """One review comment anchored to a line of the change."""

    id: int
    author: str
    body: str
    path: str
    line: int | None
    in_reply_to: int | None


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One CI check of a commit."""

    name: str
    status: str
    conclusion: str | None
    summary: str


class Forge(Protocol):
    """What delivery asks of a forge, whichever it is (GitHub, GitLab)."""

    repository: str

    def close(self) -> None:
        """Release the connection."""

    def open_pull(
        self, *, title: str, body: str, head: str, base: str, draft: bool
    ) -> PullRequestInfo:
        """Open a pull request from branch `head` into `base`."""
        ...

    def pull(self, number: int) -> PullRequestInfo:
        """A pull request's number, page, head commit and whether it is open, now."""
        ...

    def review_comments(self, number: int) -> list[ReviewComment]:
        """Every review comment of the pull request, oldest first."""
        ...

    def reply(self, number: int, comment_id: int, body: str) -> int:
        """Answer a review comment in its thread; the reply's id."""
        ...

    def check_runs(self, sha: str) -> list[CheckRun]:
        """The CI checks of commit `sha`."""
        ...


class GitHub:
    """GitHub's REST API at `api_url` (`https://HOST/api/v3` for GitHub Enterprise)."""

    def __init__(self, api_url: str, token: str, repository: str) -> None:
        self.repository = repository
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "kestrel",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=_TIMEOUT_S)

    def close(self) -> None:
        """Release the connection."""
        self._http.close()

    def open_pull(
        self, *, title: str, body: str, head: str, base: str, draft: bool
    ) -> PullRequestInfo:
        """Open a pull request from branch `head` into `base`."""
        payload = {"title": title, "body": body, "head": head, "base": base, "draft": draft}
        return _pull(self._call("POST", f"/repos/{self.repository}/pulls", json=payload))

    def pull(self, number: int) -> PullRequestInfo:
        """A pull request's number, page, head commit and whether it is open, now."""
        return _pull(self._call("GET", f"/repos/{self.repository}/pulls/{number}"))

    def review_comments(self, number: int) -> list[ReviewComment]:
        """Every review comment of the pull request, oldest first (all pages)."""
        found: list[ReviewComment] = []
        page = 1
        while True:
            params = {"per_page": 100, "page": page, "sort": "created", "direction": "asc"}
            batch = self._call(
                "GET", f"/repos/{self.repository}/pulls/{number}/comments", params=params
            )
            found += [_comment(item) for item in batch]
            if len(batch) < 100 or page >= 50:
                return found
            page += 1

    def reply(self, number: int, comment_id: int, body: str) -> int:
        """Answer a review comment in its thread; the reply's id."""
        path = f"/repos/{self.repository}/pulls/{number}/comments/{comment_id}/replies"
        return int(self._call("POST", path, json={"body": body})["id"])

    def check_runs(self, sha: str) -> list[CheckRun]:
        """The checks of commit `sha`."""
        data = self._call(
            "GET", f"/repos/{self.repository}/commits/{sha}/check-runs", params={"per_page": 100}
        )
        return [
            CheckRun(
                name=str(run.get("name", "")),
                status=str(run.get("status", "")),
                conclusion=run.get("conclusion"),
                summary=str((run.get("output") or {}).get("summary") or ""),
            )
            for run in data.get("check_runs", [])
        ]

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


def _pull(data: dict[str, Any]) -> PullRequestInfo:
    return PullRequestInfo(
        number=int(data["number"]),
        url=str(data["html_url"]),
        head_sha=str(data["head"]["sha"]),
        open=data.get("state", "open") == "open",
    )


def _comment(item: dict[str, Any]) -> ReviewComment:
    line = item.get("line") or item.get("original_line")
    return ReviewComment(
        id=int(item["id"]),
        author=str((item.get("user") or {}).get("login", "")),
        body=str(item.get("body", "")),
        path=str(item.get("path", "")),
        line=int(line) if isinstance(line, int) else None,
        in_reply_to=item.get("in_reply_to_id"),
    )


def _said(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase
    message = data.get("message", "") if isinstance(data, dict) else ""
    errors = data.get("errors") if isinstance(data, dict) else None
    if isinstance(errors, list) and errors:
        first = errors[0]
        detail = first.get("message") if isinstance(first, dict) else str(first)
        message = f"{message}: {detail}" if detail else message
    return message or response.reason_phrase
