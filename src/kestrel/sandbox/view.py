"""The filesystem a sandboxed command sees, built from an allow-list of host paths.

The sandbox's root starts empty and read-only. Into it go the system's toolchains (`/usr` and
the `/bin`, `/sbin`, `/lib*` beside it), `/etc` without the files only root may read, the
interpreters people install in their home, paths the settings add, and the workspace. Nothing
else of the host appears: not `/run` (where services keep their sockets), `/var/lib`, `/srv`,
`/mnt`, `/media`, `/opt`, other homes, or Kestrel's data directory.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kestrel.sandbox.gitguard import git_mount_args
from kestrel.sandbox.hostpaths import (
    HOME_ROOTS,
    HOME_SECRETS,
    USR_LINKS,
    ViewError,
    check_view_path,
    etc_masks,
)
from kestrel.sandbox.usability import SandboxState, session_tmp_args, usability_mount_args

HOME_TOOLCHAINS: tuple[str, ...] = (
    ".pyenv",
    ".local/bin",
    ".local/lib",
    ".local/share/uv",
    ".nvm",
    ".volta",
    ".bun/bin",
    ".deno/bin",
    ".rustup",
    ".cargo/bin",
    ".sdkman",
    "go/bin",
)
"""Interpreters and compilers people install in their home, mounted read-only by default."""

SYSTEM_TOOLCHAINS: tuple[str, ...] = ("/usr",)
"""System directories every command gets read-only."""

ETC_FOLLOWED: tuple[str, ...] = ("/etc/resolv.conf",)
"""Files in /etc that are often symlinks out of it (into /run): their target is mounted too."""

PRIVATE_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs inside the sandbox, shared with no one
"""Where each command gets an empty, private temporary directory."""

PRIVATE_DIRS: tuple[str, ...] = (PRIVATE_TMP, "/var/tmp")  # noqa: S108 - private tmpfs
"""Empty, private, writable directories every command gets."""

PROC_READ_ONLY: tuple[str, ...] = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
"""Kernel settings under /proc that no command may change."""

SYS_VISIBLE: tuple[str, ...] = ("/sys/devices/system/cpu",)
"""The one part of /sys shown (read-only): how many CPUs there are, for build tools."""

MountKind = Literal["ro", "rw", "tmpfs", "masked", "symlink", "dev", "proc"]


@dataclass(frozen=True, slots=True)
class Mount:
    """One entry of the view: what appears at `target`, from where (`source`), and why."""

    kind: MountKind
    target: str
    source: str = ""
    why: str = ""

    def args(self) -> list[str]:
        """The bubblewrap arguments that make this entry."""
        if self.kind in ("ro", "rw"):
            flag = "--ro-bind" if self.kind == "ro" else "--bind"
            return [flag, self.source or self.target, self.target]
        if self.kind == "symlink":
            return ["--symlink", self.source, self.target]
        if self.kind == "masked" and self.source != "dir":
            return ["--ro-bind", "/dev/null", self.target]
        flag = {"dev": "--dev", "proc": "--proc"}.get(self.kind, "--tmpfs")
        return [flag, self.target]


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewOptions:
    """What the settings add to the default view (see `SandboxViewSettings`)."""

    toolchains: tuple[str, ...] = HOME_TOOLCHAINS
    """Folders under the home, mounted read-only where they exist."""
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    path_dirs: bool = True
    """Mount the directories on `PATH` that would otherwise be hidden (read-only)."""


def build_view(
    workspace: Path,
    masked: Sequence[Path] = (),
    options: ViewOptions | None = None,
    state: SandboxState | None = None,
) -> list[Mount]:
    """Every mount of the sandbox, in the order bubblewrap must make them."""
    opts = options or ViewOptions()
    home = home_dir()
    view = system_mounts()
    view += from_args(session_tmp_args(state), "the session's /tmp")
    if home is not None:
        view.append(Mount("tmpfs", str(home), why="your home: empty, private"))
        view += toolchain_mounts(home, opts.toolchains)
    # A missing path would stop bubblewrap; `kestrel doctor` shows what is mounted.
    ro, rw = _allowed(opts.read_only, home, False), _allowed(opts.writable, home, True)
    view += [Mount("ro", str(p), why="settings: read_only") for p in ro]
    view += [Mount("rw", str(p), why="settings: writable") for p in rw]
    if opts.path_dirs:
        view += path_mounts(view, home, opts.toolchains)
    view.append(Mount("rw", str(workspace), why="workspace"))
    view += from_args(git_mount_args(workspace), "git metadata run on the host")
    view += from_args(usability_mount_args(workspace, state, masked), "usability")
    # After the workspace bind, so a workspace that is (or holds) a home still hides its secrets.
    view += secret_masks(view, home, masked)
    return view


def system_mounts() -> list[Mount]:
    """Toolchains, /etc minus its secrets, /dev, /proc, and the private temporary folders."""
    view = [Mount("ro", path, why="system toolchains") for path in SYSTEM_TOOLCHAINS]
    for link in USR_LINKS:
        if os.path.islink(link):
            view.append(Mount("symlink", link, os.readlink(link), "merged /usr"))
        elif os.path.isdir(link):
            view.append(Mount("ro", link, why="system toolchains"))
    view.append(Mount("ro", "/etc", why="system settings"))
    view += [Mount("masked", path, kind, "not readable by others") for path, kind in etc_masks()]
    view += _followed_links()
    view += [Mount("dev", "/dev", why="minimal devices"), Mount("proc", "/proc", why="own pids")]
    # A fresh /proc leaves sysctls and sysrq writable to a user that maps to the host's root
    # (Kestrel run as root), and those settings are global: cover them with read-only copies.
    view += [Mount("ro", p, why="kernel settings") for p in PROC_READ_ONLY if os.path.exists(p)]
    view += [Mount("ro", p, why="CPU count") for p in SYS_VISIBLE if os.path.isdir(p)]
    view += [Mount("tmpfs", path, why="private, empty") for path in PRIVATE_DIRS]
    return view


def toolchain_mounts(home: Path, names: Iterable[str]) -> list[Mount]:
    """The listed folders of the home that exist, read-only (symlinks are not followed)."""
    found = []
    for name in names:
        tool = home / name
        if tool.is_dir() and not tool.is_symlink():
            found.append(Mount("ro", str(tool), why="toolchain in your home"))
    return found


def path_mounts(
    view: Sequence[Mount], home: Path | None, toolchains: Sequence[str] = HOME_TOOLCHAINS
) -> list[Mount]:
    """Directories on PATH the view does not show yet, read-only, where a settings path could
    name them too (never a home, a secret, /run...). One inside a listed toolchain of a home
    (`~/.pyenv/shims`) brings the whole toolchain, which its programs need."""
    found: list[Mount] = []
    for place in _path_places(os.environ.get("PATH", ""), home, tuple(toolchains)):
        if not covered(place, [*view, *found]):
            found.append(Mount("ro", str(place), why="on PATH"))
    return found


@functools.lru_cache(maxsize=16)
def _path_places(path: str, home: Path | None, toolchains: tuple[str, ...]) -> tuple[Path, ...]:
    # Cached: resolving and checking each entry for every command costs more than the rest.
    places: list[Path] = []
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        place = _toolchain_of(_real(Path(entry)), toolchains)
        try:
            check_view_path(place, home=home, writable=False)
        except ViewError:
            continue
        places.append(place)
    return tuple(dict.fromkeys(places))


def _toolchain_of(place: Path, toolchains: Sequence[str]) -> Path:
    parts = place.parts
    if len(parts) < 3 or f"/{parts[1]}" not in HOME_ROOTS:
        return place
    owner = Path(*parts[:2]) if parts[1] == "root" else Path(*parts[:3])
    for name in toolchains:
        tool = owner / name
        if place.is_relative_to(tool) and tool.is_dir() and not tool.is_symlink():
            return tool
    return place


def secret_masks(view: Sequence[Mount], home: Path | None, masked: Sequence[Path]) -> list[Mount]:
    """Masks for secrets and `masked` paths that the view would otherwise show."""
    hidden = [home / name for name in HOME_SECRETS] if home is not None else []
    done = {m.target for m in view if m.kind == "masked"}
    out = []
    for path in [*hidden, *masked]:
        target = _real(path)
        if str(target) not in done and covered(target, view) and target.exists():
            done.add(str(target))
            kind = "dir" if target.is_dir() else "file"
            out.append(Mount("masked", str(target), kind, "secret or Kestrel's data"))
    return out


def covered(path: Path, view: Sequence[Mount]) -> bool:
    """Whether a bind of the host in `view` shows `path`."""
    # String prefixes: this runs for every command, and pathlib's comparison is slow.
    text = str(path)
    return any(
        m.kind in ("ro", "rw") and (text == m.target or text.startswith(m.target.rstrip("/") + "/"))
        for m in view
    )


def from_args(args: Sequence[str], why: str) -> list[Mount]:
    """Mount entries from bubblewrap arguments made elsewhere (binds, tmpfs, symlinks)."""
    out: list[Mount] = []
    pairs: dict[str, MountKind] = {"--bind": "rw", "--ro-bind": "ro", "--symlink": "symlink"}
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in pairs:
            out.append(Mount(pairs[flag], args[i + 2], args[i + 1], why))
            i += 3
        elif flag == "--tmpfs":
            out.append(Mount("tmpfs", args[i + 1], why=why))
            i += 2
        else:
            raise ValueError(f"unexpected sandbox argument {flag!r} from {why}")
    return out


def home_dir() -> Path | None:
    """The user's home, or None where it is missing or the filesystem's root."""
    home = Path(os.path.expanduser("~")).resolve()
    return home if home != Path("/") and home.is_dir() else None


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def _allowed(paths: Iterable[Path], home: Path | None, writable: bool) -> list[Path]:
    """Settings paths that exist and still pass the check: a symlink on the way may have been
    changed (by a command, if it lies in a writable place) since the settings were read."""
    allowed = []
    for path in paths:
        try:
            real = check_view_path(path, home=home, writable=writable)
        except ViewError:
            continue
        if real.exists():
            allowed.append(real)
    return allowed


def _followed_links() -> list[Mount]:
    out = []
    for link in ETC_FOLLOWED:
        if not os.path.islink(link):
            continue
        target = Path(os.path.realpath(link))
        if target.is_relative_to("/etc") or target.is_relative_to("/usr"):
            continue
        try:
            mode = target.stat().st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and mode & stat.S_IROTH:
            out.append(Mount("ro", str(target), why=f"target of {link}"))
    return out
