"""What of a repository's git metadata a sandboxed command may not change.

Git files that the host's git reads and acts on (hooks, config, the `.git` file of a worktree or
a submodule, `.gitmodules`, `info/attributes`, `commondir`, `objects/info/alternates`, a
submodule's own git directory) make git run code on the host at Kestrel's or the user's next
git command. Those that exist are mounted read-only inside the sandbox; `GitFiles` records them
all, present or absent, before a command and puts back any the command managed to change or
create (`kestrel.sandbox.gitrestore`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kestrel.gitsafe import GitUnavailable, NotARepository, UnsafeRepository, run_git

MAX_NESTED = 256
"""At most this many submodule and worktree `.git` entries are guarded in one workspace."""

_GIT_DIR_FILES = (
    "config",
    "config.worktree",
    "hooks",
    "info",
    "commondir",
    "objects/info/alternates",
)
"""Inside any git directory: what makes git read elsewhere or run something."""

_WORKTREE_FILES = ("commondir", "gitdir", "config.worktree")


def protected_paths(workspace: Path) -> list[Path]:
    """Every guarded path of `workspace`, existing or not, each inside the workspace."""
    root = Path(os.path.realpath(workspace))
    entry = root / ".git"
    found: list[Path] = [root / ".gitmodules"]
    if entry.is_file() and not entry.is_symlink():
        return [*found, entry]
    if not entry.is_dir() or entry.is_symlink():
        return []
    found += git_dir_paths(entry)
    for module in _module_dirs(entry / "modules"):
        found += git_dir_paths(module)
    for worktree in _children(entry / "worktrees"):
        found += [worktree / name for name in _WORKTREE_FILES]
    for nested in nested_entries(root, entry):
        # An embedded repository's own `.git` folder changes with every commit in it: only its
        # configuration, hooks and pointers are guarded.
        is_folder = nested.is_dir() and not nested.is_symlink()
        found += git_dir_paths(nested) if is_folder else [nested]
    return [path for path in dict.fromkeys(found) if _inside(path, root)]


def git_dir_paths(git_dir: Path) -> list[Path]:
    """The guarded files and folders of one git directory."""
    return [git_dir / name for name in _GIT_DIR_FILES]


def nested_entries(root: Path, git_dir: Path) -> list[Path]:
    """`.git` entries of submodules (gitlinks, `.gitmodules` paths) and linked worktrees."""
    found: list[Path] = []
    for rel in [*_gitlinks(root), *_gitmodules_paths(root)]:
        found.append(root / rel / ".git")
    for worktree in _children(git_dir / "worktrees"):
        with contextlib.suppress(OSError, UnsafeRepository):
            back = _first_line(worktree / "gitdir")
            found.append(Path(os.path.realpath(worktree / back)))
    return [p for p in dict.fromkeys(found) if os.path.lexists(p) and _inside(p, root)][:MAX_NESTED]


def git_mount_args(workspace: Path) -> list[str]:
    """bubblewrap arguments that keep the workspace repository's host-run git files read-only."""
    root = Path(os.path.realpath(workspace))
    git = root / ".git"
    args: list[str] = []
    if prepare_git_dir(root):
        # Binding .git onto itself makes it a mount point: it cannot be renamed away and replaced.
        args += ["--bind", str(git), str(git)]
    for path in protected_paths(root):
        if os.path.lexists(path) and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def prepare_git_dir(root: Path) -> bool:
    """Make `hooks/` and `info/` (folders git itself makes at init) so they can be bound
    read-only; whether `root` has a `.git` folder."""
    git = root / ".git"
    if not git.is_dir() or git.is_symlink():
        return False
    for name in ("hooks", "info"):
        with contextlib.suppress(OSError):
            (git / name).mkdir(exist_ok=True)
    return True


def _gitlinks(root: Path) -> list[str]:
    try:
        done = run_git(root, ["ls-files", "--stage", "-z"], timeout_s=60)
    except (UnsafeRepository, NotARepository, GitUnavailable):
        return []
    links = []
    for record in done.text().split("\0") if done.ok else []:
        meta, _, name = record.partition("\t")
        if meta.startswith("160000 "):
            links.append(name)
    return links[:MAX_NESTED]


def _gitmodules_paths(root: Path) -> list[str]:
    listing = root / ".gitmodules"
    if not listing.is_file() or listing.is_symlink():
        return []
    args = ["config", "--file", str(listing), "-z", "--get-regexp", r"^submodule\..*\.path$"]
    try:
        done = run_git(root, args, timeout_s=30, repository=False)
    except GitUnavailable:
        return []
    paths = [entry.partition("\n")[2] for entry in done.text().split("\0") if entry]
    return [p for p in paths if p][:MAX_NESTED]


def _module_dirs(modules: Path, depth: int = 3) -> list[Path]:
    """Submodule git directories under `modules/` (nested submodules too, a few levels deep)."""
    found: list[Path] = []
    for child in _children(modules):
        if (child / "HEAD").is_file():
            found.append(child)
            if depth > 1:
                found += _module_dirs(child / "modules", depth - 1)
        elif depth > 1:
            found += _module_dirs(child, depth - 1)  # a module name with a slash in it
    return found[:MAX_NESTED]


def _children(folder: Path) -> list[Path]:
    if not folder.is_dir() or folder.is_symlink():
        return []
    with contextlib.suppress(OSError):
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())[:MAX_NESTED]
    return []


def _first_line(path: Path) -> str:
    """The first line of a small pointer file (`gitdir`, `commondir`)."""
    with open(path, "rb") as handle:
        return handle.read(4096).decode("utf-8", errors="replace").split("\n", 1)[0].strip()


def _inside(path: Path, root: Path) -> bool:
    """Whether `path` lies in `root` without passing through a symbolic link on the way."""
    parent = Path(os.path.realpath(path.parent))
    return parent == path.parent and path.is_relative_to(root) and path != root
