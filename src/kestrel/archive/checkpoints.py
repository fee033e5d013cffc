"""A session's checkpoints: bundled out of the shadow repositories, and put back into them.

Checkpoints live in shadow repositories under `<data>/checkpoints/<key>`, one per workspace
path and shared by the sessions on it (`kestrel.workspace.checkpoints`); a session owns one ref,
`refs/kestrel/checkpoints/<session>`, and one private index file, in each repository it wrote
to. Archiving keeps, per repository, a git bundle of that ref (every object its checkpoints
need), the index, and the repository's exclude file; removing deletes the ref and the index,
and the whole repository once no session has a ref there. Objects shared with sessions still in
the repository stay in it (the shadow repositories are never garbage collected).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kestrel.archive.errors import ArchiveDamaged
from kestrel.workspace.shadow_git import CheckpointError, ShadowGit, init_shadow, shadow_env

CHECKPOINTS = "checkpoints"
"""The folder of the shadow repositories in the data directory."""
_REFS = "refs/kestrel/checkpoints"


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoPart:
    """What an archive holds of one shadow repository: its folder name, the session's newest
    checkpoint there, whether its index was kept, and the repository's exclude lines."""

    repo: str
    head: str
    index: bool
    exclude: str = ""


def repos_of(data_dir: Path, session_id: str) -> list[Path]:
    """The shadow repositories where the session has checkpoints."""
    root = data_dir / CHECKPOINTS
    if not root.is_dir():
        return []
    ref = f"{_REFS}/{session_id}"
    found = []
    for repo in sorted(p for p in root.iterdir() if p.is_dir()):
        packed = repo / "packed-refs"
        if (repo / ref).is_file() or (
            packed.is_file() and f" {ref}\n" in packed.read_text("utf-8", errors="replace")
        ):
            found.append(repo)
    return found


def bundle(data_dir: Path, session_id: str, out: Path) -> list[RepoPart]:
    """Write `<repo>.bundle` (and `<repo>.index`) into `out` for each repository of the session."""
    parts = []
    ref = f"{_REFS}/{session_id}"
    for repo in repos_of(data_dir, session_id):
        git = shadow_git(repo)
        head = git.text("rev-parse", "--verify", f"{ref}^{{commit}}")
        git.run("bundle", "create", "--quiet", str(out / f"{repo.name}.bundle"), ref)
        index = _index(repo, session_id)
        if index.is_file():
            shutil.copyfile(index, out / f"{repo.name}.index")
        exclude = repo / "info" / "exclude"
        kept = exclude.read_text("utf-8", errors="replace") if exclude.is_file() else ""
        parts.append(RepoPart(repo=repo.name, head=head, index=index.is_file(), exclude=kept))
    return parts


def remove(data_dir: Path, session_id: str) -> None:
    """Delete the session's refs and indexes, and every repository left without a ref."""
    for repo in repos_of(data_dir, session_id):
        git = shadow_git(repo)
        git.run("update-ref", "-d", f"{_REFS}/{session_id}")
        _index(repo, session_id).unlink(missing_ok=True)
        if not git.text("for-each-ref", "--count=1", "--format=%(refname)"):
            shutil.rmtree(repo, ignore_errors=True)


def put_back(data_dir: Path, session_id: str, parts: list[RepoPart], source: Path) -> None:
    """Fetch each bundle in `source` into its repository (made again if it is gone) and put
    the session's index back; `ArchiveDamaged` when a bundle does not hold what it says."""
    ref = f"{_REFS}/{session_id}"
    for part in parts:
        repo = data_dir / CHECKPOINTS / part.repo
        init_shadow("git", repo, os.environ)
        (repo / "kestrel-index").mkdir(exist_ok=True)
        _merge_exclude(repo / "info" / "exclude", part.exclude)
        git = shadow_git(repo)
        try:
            # Not `git fetch`: the fixed environment allows no transport, the file one included.
            listed = git.text("bundle", "unbundle", str(source / f"{part.repo}.bundle"))
            if f"{part.head} {ref}" not in listed.splitlines():
                raise ArchiveDamaged(f"session {session_id}: its checkpoints lack {part.head}")
            git.run("update-ref", ref, part.head)
        except CheckpointError as exc:
            raise ArchiveDamaged(
                f"session {session_id}: its checkpoints cannot be restored: {exc}"
            ) from None
        if part.index:
            _put_index(repo, session_id, source / f"{part.repo}.index")


def _put_index(repo: Path, session_id: str, saved: Path) -> None:
    """Put the session's index back, unless it names an object the repository lacks (one a
    crash left unrecorded): then the next checkpoint builds a fresh one from the files."""
    index = _index(repo, session_id)
    shutil.copyfile(saved, index)
    if shadow_git(repo, index).run("write-tree", check=False).returncode != 0:
        index.unlink(missing_ok=True)


def _merge_exclude(path: Path, kept: str) -> None:
    """Add the archived exclude lines the repository's exclude file lacks."""
    have = path.read_text("utf-8", errors="replace") if path.is_file() else ""
    missing = [line for line in kept.splitlines() if line and line not in have.splitlines()]
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        start = "" if not have or have.endswith("\n") else "\n"
        with path.open("a", encoding="utf-8") as file:
            file.write(start + "\n".join(missing) + "\n")


def _index(repo: Path, session_id: str) -> Path:
    return repo / "kestrel-index" / session_id


def shadow_git(repo: Path, index: Path | None = None) -> ShadowGit:
    """Git on one shadow repository, with the checkpoints' fixed environment."""
    env = shadow_env(
        git_dir=repo,
        worktree=repo,
        index_file=index or repo / "kestrel-index" / ".unused",
        excludes_file=None,
        base=os.environ,
    )
    return ShadowGit("git", repo, env)
