"""The git side of a replay: check out the base commit, build the expected tree (base + the
recorded patch), snapshot the tree the replay left, and list where they differ."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Files the original environment generated or had lying untracked: never compared.
GENERATED = re.compile(
    r"(^|/)(build/|dist/|[^/]*\.egg-info/|__pycache__/|\.pytest_cache/|\.eggs/|\.tox/"
    r"|\.kestrel/|\.hypothesis/)|\.py[co]$|\.so$|(^|/)\.coverage$"
)
_HEADER = re.compile(r"diff --git a/(\S+) b/(\S+)")
_INDEX = re.compile(r"(?m)^index ([0-9a-f]+)\.\.([0-9a-f]+)")


class GitError(RuntimeError):
    """A git command the harness needs failed; the message names it."""


def git(args: list[str], cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> str:
    """Run git in `cwd`; its output, or GitError with the first line of its complaint."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        errors="replace",  # a diff of a file that is not UTF-8 is still a diff
    )
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
        raise GitError(f"git {' '.join(args[:3])}: {first}")
    return done.stdout


@dataclass(frozen=True, slots=True)
class FilePatch:
    """One file's section of a patch; a binary one carries the abbreviated blob ids instead."""

    path: str
    text: str
    binary: bool
    new_blob: str  # abbreviated id of the file after the patch; all zeros when deleted


def split_patch(patch: str) -> list[FilePatch]:
    """The `diff --git` sections of a patch, one per file."""
    out = []
    for chunk in re.split(r"(?m)^(?=diff --git )", patch):
        header = _HEADER.match(chunk)
        if header is None:
            continue
        index = _INDEX.search(chunk)
        binary = "GIT binary patch" in chunk or re.search(r"(?m)^Binary files ", chunk) is not None
        out.append(FilePatch(header.group(2), chunk, binary, index.group(2) if index else ""))
    return out


def prepare_checkout(git_dir: Path, base: str, workdir: Path) -> None:
    """A fresh checkout of `base` in `workdir` (shared objects, no network)."""
    if workdir.is_symlink():
        raise GitError(f"{workdir} is a symbolic link; give the work dir itself")
    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / ".git").exists():
            raise GitError(f"{workdir} is not empty and not a git checkout; refusing to delete it")
        shutil.rmtree(workdir)
    workdir.parent.mkdir(parents=True, exist_ok=True)
    git(
        ["clone", "-q", "--shared", "--no-checkout", str(git_dir), str(workdir)], cwd=workdir.parent
    )
    git(["-c", "advice.detachedHead=false", "checkout", "-q", base], cwd=workdir)
    git(["config", "user.email", "replay@example.invalid"], cwd=workdir)
    git(["config", "user.name", "replay"], cwd=workdir)


def has_commit(git_dir: Path, sha: str) -> bool:
    """Whether the mirror holds the commit."""
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True
    )
    return done.returncode == 0


def base_mismatches(workdir: Path, base: str, patches: list[FilePatch]) -> list[str]:
    """Paths whose pre-image blob id in the patch is not the base commit's: a wrong base."""
    bad = []
    for fp in patches:
        index = _INDEX.search(fp.text)
        if index is None or set(index.group(1)) == {"0"}:
            continue
        try:
            blob = git(["rev-parse", f"{base}:{fp.path}"], cwd=workdir).strip()
        except GitError:
            blob = ""
        if not blob.startswith(index.group(1)):
            bad.append(fp.path)
    return bad


def _scratch_tree(workdir: Path, base: str, patch: str | None) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(scratch, "index"))
        git(["read-tree", base], cwd=workdir, env=env)
        if patch is None:
            git(["add", "-A", "."], cwd=workdir, env=env)
        elif patch.strip():
            git(
                ["apply", "--cached", "--whitespace=nowarn", "-"], cwd=workdir, env=env, stdin=patch
            )
        return git(["write-tree"], cwd=workdir, env=env).strip()


def expected_tree(workdir: Path, base: str, patches: list[FilePatch]) -> str:
    """Base + the text sections of the patch (binary ones are checked by blob id instead)."""
    text = "".join(fp.text for fp in patches if not fp.binary)
    return _scratch_tree(workdir, base, text)


def worktree_tree(workdir: Path, base: str) -> str:
    """The tree the replay left, as `git add -A` (the original submission's way) sees it."""
    return _scratch_tree(workdir, base, None)


def blob_at(workdir: Path, tree: str, path: str) -> str:
    """The blob id of `path` in `tree`, or '' where it is absent."""
    try:
        return git(["rev-parse", "-q", "--verify", f"{tree}:{path}"], cwd=workdir).strip()
    except GitError:
        return ""


def changed_paths(workdir: Path, old: str, new: str) -> list[tuple[str, str]]:
    """(status letter, path) of every file that differs between two trees."""
    out = git(["diff-tree", "-r", "--no-renames", "--name-status", old, new], cwd=workdir)
    rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return [(status, path) for status, path in rows]


def binary_mismatches(workdir: Path, actual: str, patches: list[FilePatch]) -> list[str]:
    """Binary files of the patch whose blob in the replay's tree is not the recorded one."""
    bad = []
    for fp in patches:
        if not fp.binary:
            continue
        blob = blob_at(workdir, actual, fp.path)
        deleted = fp.new_blob == "" or set(fp.new_blob) == {"0"}
        if (deleted and blob) or (not deleted and not blob.startswith(fp.new_blob)):
            bad.append(fp.path)
    return bad


def missing_blob_paths(workdir: Path) -> list[str]:
    """Tracked files the checkout could not write (a partial mirror lacks their blobs)."""
    return git(["ls-files", "-d"], cwd=workdir).split("\n")[:-1]


def diff(workdir: Path, old: str, new: str, paths: list[str] | None = None) -> str:
    """`git diff` between two trees, optionally limited to some paths. Where a blob cannot be
    read (a partial mirror lacks it), the files that differ are listed by name instead."""
    try:
        return git(["diff", old, new, "--", *(paths or [])], cwd=workdir)
    except GitError as e:
        names = git(
            ["diff-tree", "-r", "--no-renames", "--name-status", old, new, "--", *(paths or [])],
            cwd=workdir,
        )
        return f"# no full diff ({str(e).splitlines()[-1]}); the files that differ:\n{names}"
