"""The change as a commit on a branch of the user's repository, and that branch pushed.

The commit is made with an index of its own, so the checkout's files, index and current branch
stay as they are: the branch is only a ref (`git switch BRANCH` shows it). A later commit (the
fix for review comments) has the previous one as parent, so each push is a fast-forward.

The forge's token goes to the remote only when the remote is on the forge's own host, and only
through git's environment (`http.extraHeader`), never on a command line or in a file.
"""

from __future__ import annotations

import base64
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kestrel.gitsafe import GitRun, GitUnavailable, NotARepository, run_git
from kestrel.gitsafe.layout import UnsafeRepository
from kestrel.protocol.errors import KestrelError

_TIMEOUT_S = 300.0
_PUSH_PROTOCOLS = (
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("protocol.ssh.allow", "always"),
    ("core.sshCommand", "ssh"),
)
_SLUG = re.compile(r"[^a-z0-9]+")


class DeliveryError(KestrelError):
    """The change cannot be committed or pushed; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Remote:
    """Where the branch goes: a remote's name and URL."""

    name: str
    url: str

    @property
    def host(self) -> str:
        """The remote's host name (for `git@host:path` too)."""
        if "://" in self.url:
            return urlsplit(self.url).hostname or ""
        return self.url.split("@")[-1].split(":")[0]

    def repository(self) -> str:
        """`owner/name` from the URL's last two path parts, without `.git`."""
        path = urlsplit(self.url).path if "://" in self.url else self.url.split(":", 1)[-1]
        parts = [p for p in path.removesuffix(".git").split("/") if p]
        if len(parts) < 2:
            raise DeliveryError(f"cannot tell owner/name from the remote URL {self.url!r}")
        return "/".join(parts[-2:])


def branch_name(task: str, session_id: str) -> str:
    """`kestrel/<words of the task>-<id>`: readable, unique, safe as a ref."""
    words = _SLUG.sub("-", task.lower()).strip("-")[:40].strip("-") or "change"
    return f"kestrel/{words}-{session_id[:8]}"


def remote(checkout: Path, name: str) -> Remote:
    """The remote `name` of the repository at `checkout`, with the URL a push goes to (its
    `pushurl` and any `insteadOf` rewriting applied: the token's host is checked on that)."""
    done = _git(checkout, "remote", "get-url", "--push", "--", name)
    urls = done.stdout.decode().split()
    if not done.ok or not urls:
        raise DeliveryError(f"the repository has no remote {name!r}; add one with `git remote add`")
    if len(urls) > 1:
        raise DeliveryError(f"remote {name!r} pushes to {len(urls)} URLs; push to one at a time")
    return Remote(name, urls[0])


def head(checkout: Path) -> tuple[str, str]:
    """The checkout's HEAD commit and its branch name ('' when detached)."""
    commit = _checked(_git(checkout, "rev-parse", "--verify", "HEAD^{commit}")).strip()
    branch = _git(checkout, "symbolic-ref", "--short", "-q", "HEAD").stdout.decode().strip()
    return commit, branch


def commit_change(
    checkout: Path, *, base: str, parent: str, patch: bytes, message: str, branch: str
) -> str:
    """Commit `patch` applied on `base` (with `parent` as parent) to `branch`; the commit."""
    with tempfile.TemporaryDirectory(prefix="kestrel-pr-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _checked(_git(checkout, "read-tree", base, env=index))
        if patch:
            applied = _git(checkout, "apply", "--cached", "--binary", stdin=patch, env=index)
            if not applied.ok:
                raise DeliveryError(
                    "the change does not apply to the checkout's HEAD "
                    f"({applied.said()}); update the checkout or apply the change by hand"
                )
        tree = _checked(_git(checkout, "write-tree", env=index)).strip()
    identity = ("-c", "user.name=Kestrel", "-c", "user.email=kestrel@localhost")
    commit = _checked(
        _git(checkout, *identity, "commit-tree", tree, "-p", parent, stdin=message.encode())
    ).strip()
    _checked(_git(checkout, "update-ref", f"refs/heads/{branch}", commit))
    return commit


def numstat(checkout: Path, patch: bytes) -> str:
    """`git apply --numstat` of the patch: added, removed and path per file."""
    if not patch:
        return ""
    return _checked(_git(checkout, "apply", "--numstat", stdin=patch))


def changed_files(checkout: Path, base: str, commit: str) -> list[str]:
    """The paths `commit` changes over `base` (renames as their new path)."""
    listed = _checked(_git(checkout, "diff", "--name-only", "-z", "--no-renames", base, commit))
    return [path for path in listed.split("\0") if path]


def file_at(checkout: Path, commit: str, path: str) -> bytes | None:
    """The bytes of `path` in `commit`; None where it does not exist."""
    done = _git(checkout, "cat-file", "blob", f"{commit}:{path}")
    return done.stdout if done.ok else None


def delete_branch(checkout: Path, name: str) -> None:
    """Remove a branch made for a push that did not happen."""
    _git(checkout, "update-ref", "-d", f"refs/heads/{name}")


def parent_of(checkout: Path, commit: str) -> str:
    """The first parent of `commit`."""
    return _checked(_git(checkout, "rev-parse", "--verify", f"{commit}^1^{{commit}}")).strip()


def same_tree(checkout: Path, first: str, second: str) -> bool:
    """Whether two commits hold the same files."""
    trees = [
        _checked(_git(checkout, "rev-parse", "--verify", f"{c}^{{tree}}")).strip()
        for c in (first, second)
    ]
    return trees[0] == trees[1]


def reset_branch(checkout: Path, name: str, commit: str) -> None:
    """Point `name` back at `commit` (a commit that changed nothing is not kept)."""
    _checked(_git(checkout, "update-ref", f"refs/heads/{name}", commit))


def push(checkout: Path, where: Remote, branch: str, *, token: str, forge_host: str) -> None:
    """Push `branch` to the remote (a fast-forward; never forced)."""
    config: list[tuple[str, str]] = list(_PUSH_PROTOCOLS)
    if token and where.url.startswith(("https://", "http://")) and where.host == forge_host:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
    done = _git(
        checkout,
        "push",
        "--porcelain",
        where.name,
        f"refs/heads/{branch}:refs/heads/{branch}",
        config=config,
        user_config=True,
    )
    if not done.ok:
        said = done.said().replace(token, "***") if token else done.said()
        raise DeliveryError(f"git push to {where.name} failed: {said}")


def _git(
    checkout: Path,
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
    user_config: bool = False,
) -> GitRun:
    try:
        return run_git(
            checkout,
            args,
            stdin=stdin,
            env=env,
            config=config,
            user_config=user_config,
            timeout_s=_TIMEOUT_S,
        )
    except (GitUnavailable, NotARepository, UnsafeRepository) as exc:
        raise DeliveryError(str(exc)) from None


def _checked(done: GitRun) -> str:
    if not done.ok:
        raise DeliveryError(f"git failed: {done.said()}")
    return done.stdout.decode()
