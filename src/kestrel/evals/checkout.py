"""Git work for a task: a checkout at the task's commit, the agent's change, and patches.

Git runs here, outside the sandbox, on folders the evaluation owns, through the hardened
invocation: the agent may have written to the checkout, so nothing there may make git run a
program.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kestrel.gitsafe import GitUnavailable, NotARepository, UnsafeRepository, run_git
from kestrel.protocol.errors import KestrelError

_LEFT_OUT = (
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
    ":(exclude).pytest_cache",
)
"""Byte-code and caches the agent's commands leave behind are not part of its change."""


class CheckoutError(KestrelError):
    """A git step failed: the commit is not in the repository, or a patch does not apply."""


def git(
    repo: Path,
    *args: str,
    stdin: str | None = None,
    timeout_s: float = 600,
    repository: bool = True,
    file_protocol: bool = False,
) -> str:
    """Run git in `repo`; its output, or `CheckoutError` with what git said.

    `repository=False` is for `init`, which runs before there is one to check.
    """
    data = None if stdin is None else stdin.encode("utf-8", errors="surrogateescape")
    try:
        done = run_git(
            repo,
            args,
            stdin=data,
            timeout_s=timeout_s,
            repository=repository,
            file_protocol=file_protocol,
        )
    except GitUnavailable as exc:
        raise CheckoutError(f"git {args[0]} did not run: {exc}") from exc
    except UnsafeRepository as exc:
        raise CheckoutError(f"git {args[0]} refused: {exc}") from exc
    except NotARepository as exc:
        raise CheckoutError(f"git {args[0]} needs a repository: {exc}") from exc
    if not done.ok:
        raise CheckoutError(f"git {args[0]} failed: {done.said()}")
    return done.text()


def materialise(source: Path, commit: str, dest: Path) -> None:
    """A fresh repository in `dest` holding `commit` checked out, and no history after it.

    Only the commit and its ancestors are fetched, so the fix that came later is not there to
    be found.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "--template=", repository=False)
    try:
        where = str(source.resolve())
        git(dest, "fetch", "-q", "--no-tags", where, commit, timeout_s=3600, file_protocol=True)
    except CheckoutError as exc:
        raise CheckoutError(f"commit {commit} is not in {source} ({exc})") from exc
    git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit)


def change_since(repo: Path, commit: str) -> str:
    """Everything in the work tree that differs from `commit`, new files included, as a patch."""
    git(repo, "add", "-A", "--", ".", *_LEFT_OUT)
    return git(repo, "diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", commit)


def apply(repo: Path, patch: str, what: str) -> None:
    """Apply a patch to the work tree; `CheckoutError` naming `what` when it does not apply."""
    if not patch.strip():
        return
    if not patch.endswith("\n"):
        patch += "\n"
    try:
        git(repo, "apply", "--whitespace=nowarn", "-", stdin=patch)
    except CheckoutError as exc:
        raise CheckoutError(f"the {what} does not apply: {exc}") from exc
