"""What a sandboxed command needs beyond the bare view to do ordinary work.

- Package installs: the host's interpreters are read-only, so `pip install` falls back to a user
  installation into `PACKAGES_DIR`, a directory Kestrel owns (the session's, when there is one),
  and its `bin` is on PATH. Build isolation is off without a network, so a project whose build
  backend is installed on the host builds offline.
- /tmp: within a session, one private directory that keeps its files from one command to the
  next; without one, a fresh tmpfs per command.
- Git alternates outside the workspace (see `kestrel.sandbox.alternates`), bound read-only.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.oserrors import os_error_text
from kestrel.sandbox.alternates import alternate_stores

PRIVATE_TMP = "/tmp"  # noqa: S108 - the sandbox's own /tmp, shared with no other session
"""Where each command finds its temporary directory."""
PACKAGES_DIR = "/tmp/.kestrel-packages"  # noqa: S108 - inside the sandbox's private /tmp
"""The user base (`PYTHONUSERBASE`) that package installs land in, inside the sandbox. In a
session it is a mount point in every command, so no command can replace it with a symlink."""

_TWO_OPERANDS = frozenset(
    {
        *("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try"),
        *("--symlink", "--file", "--bind-data", "--ro-bind-data", "--chmod"),
    }
)
"""bubblewrap options whose second operand is a path inside the sandbox that it creates."""
_ONE_OPERAND = frozenset({"--tmpfs", "--dir", "--dev", "--proc", "--mqueue", "--remount-ro"})


class StateUnusable(RuntimeError):
    """The sandbox's state directory exists but is not a plain directory Kestrel can use."""


@dataclass(frozen=True, slots=True)
class SandboxState:
    """A directory Kestrel owns for one session's sandbox: what outlives a single command.

    `root/packages` holds installed packages; `root/tmp` is the session's /tmp when `keep_tmp`.
    """

    root: Path
    keep_tmp: bool = True
    """The sandbox's temporary folder keeps its files across commands; False: a fresh one each."""

    @property
    def tmp(self) -> Path:
        """The host directory behind the sandbox's /tmp (when `keep_tmp`)."""
        return self.root / "tmp"

    @property
    def packages(self) -> Path:
        """The host directory behind `PACKAGES_DIR`."""
        return self.root / "packages"


def prepare_state(state: SandboxState) -> None:
    """Create the state's directories, readable by their owner only."""
    for folder in (state.root, *([state.tmp] if state.keep_tmp else []), state.packages):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = folder.lstat()
        except OSError as exc:
            raise StateUnusable(
                f"cannot create the sandbox state {folder}: {os_error_text(exc)}"
            ) from None
        if not stat.S_ISDIR(info.st_mode):
            raise StateUnusable(f"the sandbox state {folder} is not a directory")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(folder, 0o700)


def discard_state(state: SandboxState) -> None:
    """Delete the state, also what a command left unreadable (a `chmod 000` folder)."""
    if not state.root.is_dir() or state.root.is_symlink():
        return
    for here, dirs, _ in os.walk(state.root):
        for name in dirs:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    shutil.rmtree(state.root, ignore_errors=True)


def session_tmp_args(state: SandboxState | None) -> list[str]:
    """The session's directory bound over the sandbox's fresh /tmp, so /tmp keeps its files
    from one command to the next; nothing without a session. Goes before anything mounted
    under /tmp (a workspace there must stay visible on top of it)."""
    if state is None:
        return []
    prepare_state(state)
    return ["--bind", str(state.tmp), PRIVATE_TMP] if state.keep_tmp else []


def usability_mount_args(
    workspace: Path, state: SandboxState | None = None, refused: Sequence[Path] = ()
) -> list[str]:
    """Extra bubblewrap arguments for `workspace`: the package directory, read-only binds of
    its git alternates (none of them inside `refused`, nor a secret or system place)."""
    args = ["--bind", str(state.packages), PACKAGES_DIR] if state else []
    refused = [*refused, *([state.root] if state is not None else [])]
    for store in alternate_stores(workspace, refused):
        args += ["--ro-bind", str(store), str(store)]
    return args


def clear_mount_points(state: SandboxState | None, argv: Sequence[str]) -> None:
    """Make sure bubblewrap can only create the mount points of `argv` that lie under the
    session's /tmp inside that folder: drop symlinks (and other non-folders) on their way.

    An earlier command could have left `/tmp/a -> ../../oldroot/etc` where a later mount point
    (a workspace or object store under /tmp) needs `/tmp/a/b`: bubblewrap would follow it and
    create folders or files on the host."""
    if state is None or not state.keep_tmp:
        return
    tmp = Path(PRIVATE_TMP)
    for target in mount_targets(argv):
        place = Path(target)
        if place == tmp or not place.is_relative_to(tmp):
            continue
        parts = place.relative_to(tmp).parts
        here = state.tmp
        for depth, part in enumerate(parts, start=1):
            here = here / part
            try:
                mode = here.lstat().st_mode
            except FileNotFoundError:
                break
            if stat.S_ISLNK(mode) or (depth < len(parts) and not stat.S_ISDIR(mode)):
                here.unlink()
                break


def mount_targets(argv: Sequence[str]) -> list[str]:
    """Where the mounts of a bubblewrap command line land inside the sandbox."""
    targets: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in _TWO_OPERANDS and i + 2 < len(argv):
            targets.append(argv[i + 2])
        elif arg in _ONE_OPERAND and i + 1 < len(argv):
            targets.append(argv[i + 1])
    return targets


def usability_environment(workspace: Path, *, offline: bool = True) -> dict[str, str]:
    """Variables that make package installs land in `PACKAGES_DIR` (pip's automatic user
    installation when the interpreter is read-only) and its programs runnable; `offline`
    when the command has no network."""
    del workspace  # The same for every workspace: the state is mounted at a fixed place.
    path = os.environ.get("PATH") or os.defpath
    env = {
        "PYTHONUSERBASE": PACKAGES_DIR,
        "PATH": f"{PACKAGES_DIR}/bin:{path}",
        # The user base is private to the sandbox: Debian's externally-managed marker guards
        # the system's packages, which stay read-only whatever pip is told.
        "PIP_BREAK_SYSTEM_PACKAGES": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # `npm install -g` too: the prefix's lib/node_modules and bin, beside pip's.
        "NPM_CONFIG_PREFIX": PACKAGES_DIR,
        "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    }
    if offline:
        # pip reads a `no-` option from the environment as the value of its destination, so
        # "0" means `--no-build-isolation`: build with the backend installed on the host,
        # since no isolated environment can be downloaded without a network.
        env["PIP_NO_BUILD_ISOLATION"] = "0"
    return env
