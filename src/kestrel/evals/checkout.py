"""Git work for a task: a checkout at the task's commit, the agent's change, and patches.

Git runs here, outside the sandbox, on folders the evaluation owns; hooks and fsmonitor are
switched off because the agent may have written to the checkout's `.git`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kestrel.protocol.errors import KestrelError

_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
_LEFT_OUT = (
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
    ":(exclude).pytest_cache",
)
"""Byte-code and caches the agent's commands leave behind are not part of its change."""


class CheckoutError(KestrelError):
    """A git step failed: the commit is not in the repository, or a patch does not apply."""


def git(repo: Path, *args: str, stdin: str | None = None, timeout_s: float = 600) -> str:
    """Run git in `repo`; its output, or `CheckoutError` with what git said."""
    try:
        done = subprocess.run(
            ["git", *_SAFE, *args],
            cwd=repo,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError as exc:
        raise CheckoutError("git is not installed; the evaluation needs it") from exc
    except subprocess.TimeoutExpired as exc:
        raise CheckoutError(f"git {args[0]} took longer than {timeout_s:g} s") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise CheckoutError(f"git {args[0]} failed: {said[-1] if said else done.returncode}")
    return done.stdout


def materialise(source: Path, commit: str, dest: Path) -> None:
    """A fresh repository in `dest` holding `commit` checked out, and no history after it.

    Only the commit and its ancestors are fetched, so the fix that came later is not there to
    be found.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(dest, "init", "-q")
    try:
        git(dest, "fetch", "-q", "--no-tags", str(source.resolve()), commit, timeout_s=3600)
    except CheckoutError as exc:
        raise CheckoutError(f"commit {commit} is not in {source} ({exc})") from exc
    git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit)


def change_since(repo: Path, commit: str) -> str:
    """Everything in the work tree that differs from `commit`, new files included, as a patch."""
    git(repo, "add", "-A", "--", ".", *_LEFT_OUT)
    return git(repo, "diff", "--cached", "--binary", commit)


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
