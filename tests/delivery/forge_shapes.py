"""GitHub's REST objects (users, repositories, pull requests, review comments, check runs) as
the API answers them, with every URL under the fake's own root, built from the fake's records."""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from typing import Any

_Json = dict[str, Any]
# `NAME_url=PATH` for a repository's API links, as GitHub spells them (RFC 6570 templates).
_REPO_LINKS = """
archive_url={archive_format}{/ref} assignees_url=assignees{/user} blobs_url=git/blobs{/sha}
branches_url=branches{/branch} collaborators_url=collaborators{/collaborator}
comments_url=comments{/number} commits_url=commits{/sha} compare_url=compare/{base}...{head}
contents_url=contents/{+path} contributors_url=contributors deployments_url=deployments
downloads_url=downloads events_url=events forks_url=forks git_commits_url=git/commits{/sha}
git_refs_url=git/refs{/sha} git_tags_url=git/tags{/sha} hooks_url=hooks
issue_comment_url=issues/comments{/number} issue_events_url=issues/events{/number}
issues_url=issues{/number} keys_url=keys{/key_id} labels_url=labels{/name}
languages_url=languages merges_url=merges milestones_url=milestones{/number}
notifications_url=notifications{?since,all,participating} pulls_url=pulls{/number}
releases_url=releases{/id} stargazers_url=stargazers statuses_url=statuses/{sha}
subscribers_url=subscribers subscription_url=subscription tags_url=tags teams_url=teams
trees_url=git/trees{/sha}
"""
_CREATED = "2024-01-02T03:04:05Z"


@dataclass(slots=True, kw_only=True)
class Pull:
    """A pull request the fake holds; `sha` is its head commit when last looked at."""

    id: int
    repo: str
    number: int
    title: str
    head: str
    base: str
    body: str | None
    draft: bool
    author: str
    when: str
    sha: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Comment:
    """A review comment on a line of a pull request's head commit (`reply_to`: its thread)."""

    id: int
    review: int
    repo: str
    pull: int
    path: str
    line: int
    body: str
    author: str
    sha: str
    hunk: str
    when: str
    reply_to: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """A check run of commit `sha`; `pulls`: the open pull requests whose head it was."""

    id: int
    repo: str
    sha: str
    name: str
    conclusion: str | None
    summary: str
    when: str
    pulls: tuple[_Json, ...]


@dataclass(frozen=True, slots=True)
class Site:
    """Where the fake answers (`api`: its root) and for which repository (`owner/name`)."""

    api: str
    repo: str
    default_branch: str

    @property
    def repo_api(self) -> str:
        """The repository's API URL."""
        return f"{self.api}/repos/{self.repo}"

    @property
    def repo_html(self) -> str:
        """The repository's web page."""
        return f"{self.api}/{self.repo}"


def node_id(kind: str, number: int) -> str:
    """A global node id in GitHub's classic form: base64 of `LEN:KindID`."""
    return base64.b64encode(f"{len(kind):03d}:{kind}{number}".encode()).decode()


def _stable_id(name: str) -> int:
    return 10_000 + zlib.crc32(name.encode()) % 90_000_000


def user(site: Site, login: str, kind: str = "User") -> _Json:
    """A `SimpleUser`: `kind` is `User`, `Bot` or `Organization`."""
    number = _stable_id(login)
    api = f"{site.api}/users/{login}"
    return {
        "login": login,
        "id": number,
        "node_id": node_id(kind, number),
        "avatar_url": f"{site.api}/avatars/u/{number}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": f"{site.api}/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": kind,
        "site_admin": False,
    }


def repository(site: Site) -> _Json:
    """A full `Repository` object for `site.repo`, owned by an organization."""
    owner, name = site.repo.split("/")
    host = site.api.split("://", 1)[-1]
    links = dict(pair.split("=", 1) for pair in _REPO_LINKS.split())
    number = _stable_id(site.repo)
    return {
        "id": number,
        "node_id": node_id("Repository", number),
        "name": name,
        "full_name": site.repo,
        "private": False,
        "owner": user(site, owner, "Organization"),
        "html_url": site.repo_html,
        "description": None,
        "fork": False,
        "url": site.repo_api,
        **{key: f"{site.repo_api}/{path}" for key, path in links.items()},
        "git_url": f"git://{host}/{site.repo}.git",
        "ssh_url": f"git@{host}:{site.repo}.git",
        "clone_url": f"{site.repo_html}.git",
        "svn_url": site.repo_html,
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "license": None,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 12,
        "default_branch": site.default_branch or "main",
        "open_issues_count": 1,
        "open_issues": 1,
        "is_template": False,
        "topics": [],
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "visibility": "public",
        "pushed_at": _CREATED,
        "created_at": _CREATED,
        "updated_at": _CREATED,
    }


def _pull_links(site: Site, pull: Pull) -> dict[str, str]:
    api, number = site.repo_api, pull.number
    return {
        "self": f"{api}/pulls/{number}",
        "html": f"{site.repo_html}/pull/{number}",
        "issue": f"{api}/issues/{number}",
        "comments": f"{api}/issues/{number}/comments",
        "review_comments": f"{api}/pulls/{number}/comments",
        "review_comment": f"{api}/pulls/comments{{/number}}",
        "commits": f"{api}/pulls/{number}/commits",
        "statuses": f"{api}/statuses/{pull.sha}",
    }


def _branch_ends(site: Site, pull: Pull, base_sha: str) -> _Json:
    owner, repo = site.repo.split("/")[0], repository(site)
    return {
        side: {"label": f"{owner}:{ref}", "ref": ref, "sha": sha, "user": user(site, owner)}
        | {"repo": repo}
        for side, ref, sha in (("head", pull.head, pull.sha), ("base", pull.base, base_sha))
    }


def pull_request(site: Site, pull: Pull, facts: _Json) -> _Json:
    """A `PullRequest` from a record (see `FakeGitHub`) and what git says of its branches."""
    links, page = _pull_links(site, pull), f"{site.repo_html}/pull/{pull.number}"
    ends = _branch_ends(site, pull, facts["base_sha"])
    return {
        "url": links["self"],
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "html_url": page,
        "diff_url": f"{page}.diff",
        "patch_url": f"{page}.patch",
        "issue_url": links["issue"],
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "comments_url": links["comments"],
        "statuses_url": links["statuses"],
        "number": pull.number,
        "state": "open",
        "locked": False,
        "title": pull.title,
        "user": user(site, pull.author),
        "body": pull.body,
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": pull.when,
        "updated_at": pull.when,
        "closed_at": None,
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        **ends,
        "_links": {k: {"href": v} for k, v in links.items()},
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "draft": pull.draft,
        "merged": False,
        "mergeable": None,
        "rebaseable": None,
        "mergeable_state": "unknown",
        "merged_by": None,
        "comments": 0,
        "review_comments": facts["review_comments"],
        "maintainer_can_modify": False,
        "commits": facts["commits"],
        "additions": facts["additions"],
        "deletions": facts["deletions"],
        "changed_files": facts["changed_files"],
    }


def review_comment(site: Site, item: Comment) -> _Json:
    """A `PullRequestReviewComment` from a record (see `FakeGitHub.add_review_comment`)."""
    api, number = f"{site.repo_api}/pulls/comments/{item.id}", item.pull
    page = f"{site.repo_html}/pull/{number}#discussion_r{item.id}"
    pull_api = f"{site.repo_api}/pulls/{number}"
    shaped = {
        "url": api,
        "pull_request_review_id": item.review,
        "id": item.id,
        "node_id": node_id("PullRequestReviewComment", item.id),
        "diff_hunk": item.hunk,
        "path": item.path,
        "position": item.line,
        "original_position": item.line,
        "commit_id": item.sha,
        "original_commit_id": item.sha,
        "user": user(site, item.author),
        "body": item.body,
        "created_at": item.when,
        "updated_at": item.when,
        "html_url": page,
        "pull_request_url": pull_api,
        "author_association": "MEMBER",
        "_links": {
            "self": {"href": api},
            "html": {"href": page},
            "pull_request": {"href": pull_api},
        },
        "start_line": None,
        "original_start_line": None,
        "start_side": None,
        "line": item.line,
        "original_line": item.line,
        "side": "RIGHT",
        "subject_type": "line",
        "reactions": _reactions(f"{api}/reactions"),
    }
    if item.reply_to is not None:
        shaped["in_reply_to_id"] = item.reply_to
    return shaped


def check_run(site: Site, item: Check) -> _Json:
    """A `CheckRun` from a record (see `FakeGitHub.add_check_run`) and its open pull requests."""
    api, page = f"{site.repo_api}/check-runs/{item.id}", f"{site.repo_html}/runs/{item.id}"
    done = item.conclusion is not None
    pulls = [
        {
            "id": p["id"],
            "number": p["number"],
            "url": p["url"],
            **{
                side: {
                    "ref": p[side]["ref"],
                    "sha": p[side]["sha"],
                    "repo": {
                        "id": p[side]["repo"]["id"],
                        "url": p[side]["repo"]["url"],
                        "name": p[side]["repo"]["name"],
                    },
                }
                for side in ("head", "base")
            },
        }
        for p in item.pulls
    ]
    return {
        "id": item.id,
        "head_sha": item.sha,
        "node_id": node_id("CheckRun", item.id),
        "external_id": "",
        "url": api,
        "html_url": page,
        "details_url": page,
        "status": "completed" if done else "in_progress",
        "conclusion": item.conclusion,
        "started_at": item.when,
        "completed_at": item.when if done else None,
        "output": {
            "title": item.name,
            "summary": item.summary,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{api}/annotations",
        },
        "name": item.name,
        "check_suite": {"id": item.id + 500_000},
        "app": _actions_app(site),
        "pull_requests": pulls,
    }


def _actions_app(site: Site) -> _Json:
    return {
        "id": 15368,
        "slug": "github-actions",
        "node_id": node_id("App", 15368),
        "owner": user(site, "github", "Organization"),
        "name": "GitHub Actions",
        "description": "Automate your workflow from idea to production",
        "external_url": f"{site.api}/features/actions",
        "html_url": f"{site.api}/apps/github-actions",
        "created_at": "2018-07-30T09:30:17Z",
        "updated_at": "2024-04-10T20:33:16Z",
        "permissions": {"checks": "write", "contents": "write", "metadata": "read"},
        "events": ["check_run", "check_suite", "pull_request", "push"],
    }


def _reactions(url: str) -> _Json:
    counts = dict.fromkeys(("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes"), 0)
    return {"url": url, "total_count": 0, **counts, "rocket": 0}


def diff_hunk(text: str, line: int) -> str:
    """A unified-diff hunk ending at `line` of the new file `text`, as review comments carry."""
    lines = text.splitlines()
    first = max(1, line - 3)
    shown = lines[first - 1 : line] or [""]
    header = f"@@ -{first},{len(shown)} +{first},{len(shown)} @@"
    return "\n".join([header, *(" " + s for s in shown)])
