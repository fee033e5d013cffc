"""Runs commands inside bubblewrap: toolchains read-only, only the workspace writable, no network.

Each command gets fresh user, PID, IPC, UTS, cgroup and (unless allowed) network namespaces, no
capabilities, a seccomp filter, a private /tmp, a view of the host built from an allow-list
(`kestrel.sandbox.view`: no service sockets, homes, secrets or files only root reads), a scrubbed
environment, and rlimits plus cgroup limits where cgroups are writable. The network is off, the
host's, or an allow-list of hosts reached through a proxy (`kestrel.sandbox.proxy`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from kestrel.sandbox.base import ExecResult, OutputSink
from kestrel.sandbox.gitrestore import GitFiles
from kestrel.sandbox.guard import CommandGuard
from kestrel.sandbox.leftovers import LeftoverPipe, ended_note, listing_script
from kestrel.sandbox.limits import (
    CgroupSupport,
    CommandCgroup,
    Limits,
    detect_cgroups,
    join_cgroups_argv,
    ulimit_script,
)
from kestrel.sandbox.local import DEFAULT_ENV_ALLOWLIST, scrubbed_environment
from kestrel.sandbox.orphans import MARKER
from kestrel.sandbox.process import ProcessRunner
from kestrel.sandbox.proxy import RELAY_PORT, RELAY_SCRIPT, SOCKET_NAME, AllowlistProxy
from kestrel.sandbox.quota import WorkspaceQuota
from kestrel.sandbox.seccomp import filter_bytes
from kestrel.sandbox.usability import SandboxState, clear_mount_points, usability_environment
from kestrel.sandbox.view import (
    PRIVATE_TMP,
    SYSTEM_TOOLCHAINS,
    Mount,
    ViewOptions,
    build_view,
    covered,
)

Network = Literal["none", "host", "allowlist"]

PROXY_DIR = "/tmp/.kestrel-proxy"  # noqa: S108 - inside the sandbox's private /tmp
"""Where the proxy's socket appears inside the sandbox."""
PROXY_URL = f"http://127.0.0.1:{RELAY_PORT}"
_PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy")

SANDBOX_UID = 1000
"""The unprivileged user (and group) a command runs as inside the sandbox."""

SYSTEM_SECRETS: tuple[str, ...] = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
"""Host files hidden from every command even where /etc's modes would let others read them."""


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing here; `kestrel doctor` says how to install it."""


class OutsideWorkspace(ValueError):
    """A command was asked to run in a directory outside the sandbox's workspace."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxConfig:
    """How commands are confined, besides the network (see `BwrapExecutor`)."""

    limits: Limits = field(default_factory=Limits)
    env_allowlist: tuple[str, ...] = DEFAULT_ENV_ALLOWLIST
    masked_paths: tuple[Path, ...] = ()
    """Further host paths to hide, e.g. Kestrel's data directory and other sessions' folders."""
    bwrap_path: str | None = None
    use_cgroups: bool = True
    view: ViewOptions = field(default_factory=ViewOptions)
    """What the sandbox shows of the host besides the defaults (see `kestrel.sandbox.view`)."""
    state: SandboxState | None = None
    """A directory Kestrel owns for the session: its /tmp and installed packages, kept across
    commands (see `kestrel.sandbox.usability`). None: each command starts afresh."""
    quota_dir: Path | None = None
    """The folder whose growth counts against `limits.disk_bytes` (a session's overlay upper
    layer); None: the workspace itself."""


class BwrapExecutor:
    """An `Executor` that confines each command to `workspace` with bubblewrap.

    `network="none"` (the default) gives the command an empty network namespace; `"host"`
    shares this machine's network; `"allowlist"` keeps the empty namespace but lets the command
    reach `allowed_hosts` (exact names; `*.x` for names under x) through a proxy, as
    `HTTP(S)_PROXY`.
    """

    def __init__(
        self,
        workspace: Path,
        *,
        network: Network = "none",
        allowed_hosts: Sequence[str] = (),
        config: SandboxConfig | None = None,
        kill_grace_s: float = 2.0,
        drain_grace_s: float = 0.5,
    ) -> None:
        self.workspace = workspace.resolve()
        self.network: Network = network
        self.proxy = AllowlistProxy(tuple(allowed_hosts)) if network == "allowlist" else None
        self.config = config or SandboxConfig()
        self._runner = ProcessRunner(kill_grace_s=kill_grace_s, drain_grace_s=drain_grace_s)
        self._cgroups: CgroupSupport | None = None

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        on_output: OutputSink | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run `command` with `bash -c` in the sandbox; on timeout or cancellation kill it all."""
        inside = self._check_cwd(cwd)
        cgroup = self._cgroup()
        procs = cgroup.create() if cgroup else []
        capped_memory = cgroup is not None and "memory" in cgroup.dirs
        guard = CommandGuard(cgroup, self._quota())
        git_files = await GitFiles.record(self.workspace)
        read_fd, write_fd = os.pipe()
        leftovers = LeftoverPipe()
        mark = len(self.proxy.denied) if self.proxy else 0
        try:
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(filter_bytes())
            argv = self.argv(
                command,
                cwd=inside,
                seccomp_fd=read_fd,
                memory_capped=capped_memory,
                leftovers_fd=leftovers.fd,
            )
            argv[1:1] = guard.bwrap_args()
            await guard.start()
            result = await self._runner.run(
                join_cgroups_argv(procs, argv),
                cwd=self.workspace,
                env=self.environment(env),
                timeout_s=timeout_s,
                on_output=on_output,
                pass_fds=(read_fd, leftovers.fd, *guard.pass_fds),
                guards=guard.guards(),
            )
            if not (result.timed_out or result.ended_background):
                result = replace(result, ended_background=ended_note(leftovers.read()))
            result = await guard.report(result, on_output)
            result = await git_files.check(result, on_output)
            if self.proxy is not None and (refused := self.proxy.denied_since(mark)):
                allowed = ", ".join(self.proxy.allowed) or "no host"
                note = (
                    f"\n[kestrel] The network allow-list refused: {', '.join(refused)}. Only "
                    f"{allowed} may be reached (settings: network_allow).\n"
                )
                if on_output is not None:
                    on_output("stderr", note)
                result = replace(result, output=result.output + note)
            return result
        finally:
            os.close(read_fd)
            leftovers.close()
            git_files.settle()
            await guard.close()

    def environment(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command gets: allow-listed variables, a private /tmp, `overrides`."""
        extra = usability_environment(self.workspace, offline=self.network == "none")
        return scrubbed_environment(
            self.config.env_allowlist, {"TMPDIR": PRIVATE_TMP, **extra, **(overrides or {})}
        )

    def argv(
        self,
        command: str,
        *,
        cwd: Path,
        seccomp_fd: int,
        memory_capped: bool,
        leftovers_fd: int | None = None,
    ) -> list[str]:
        """The bubblewrap command line that runs `command` in `cwd` (inside the workspace);
        with `leftovers_fd`, the processes it leaves running are listed there at its end."""
        bwrap = self.config.bwrap_path or shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
        args = [bwrap, *namespace_args(self.network, disable_userns=_has_disable_userns(bwrap))]
        args += mount_args(
            self.workspace, self.config.masked_paths, self.config.view, self.config.state
        )
        script = ulimit_script(self.config.limits, address_space=not memory_capped)
        relay: list[str] = []
        if self.proxy is not None:
            args += ["--bind", str(self.proxy.socket_dir), PROXY_DIR]
            args += _python_args(self.workspace)
            script = script.replace(_EXEC, _RELAY_START + _EXEC)
            relay = [_python(), RELAY_SCRIPT, f"{PROXY_DIR}/{SOCKET_NAME}"]
        if leftovers_fd is not None:
            script = script.replace(_EXEC, listing_script(leftovers_fd))
        # The root is an empty tmpfs of bubblewrap's: read-only once every mount point exists.
        args += ["--remount-ro", "/", "--seccomp", str(seccomp_fd), "--chdir", str(cwd), "--"]
        clear_mount_points(self.config.state, args)
        return [*args, _bash(), "-c", script, MARKER, command, *relay]

    def _check_cwd(self, cwd: Path) -> Path:
        resolved = cwd.resolve()
        if not resolved.is_relative_to(self.workspace):
            raise OutsideWorkspace(f"{cwd} is outside the sandbox workspace {self.workspace}")
        return resolved

    def _quota(self) -> WorkspaceQuota | None:
        limit = self.config.limits.disk_bytes
        state = (self.config.state.root,) if self.config.state else ()
        folders = (self.config.quota_dir or self.workspace, *state)
        return None if limit is None else WorkspaceQuota(folders, limit)

    def _cgroup(self) -> CommandCgroup | None:
        if not self.config.use_cgroups:
            return None
        if self._cgroups is None:
            self._cgroups = detect_cgroups()
        return CommandCgroup(self._cgroups, self.config.limits) if self._cgroups.usable else None


def namespace_args(network: Network, *, disable_userns: bool) -> list[str]:
    """Fresh namespaces, no capabilities, an unprivileged user, tied to Kestrel's lifetime."""
    args = ["--unshare-all", "--unshare-user"]
    if network == "host":
        args.append("--share-net")
    if disable_userns:
        args.append("--disable-userns")
    uid = str(SANDBOX_UID)
    # --new-session detaches the controlling terminal, which defeats TIOCSTI input injection.
    args += ["--uid", uid, "--gid", uid, "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    return args


def mount_args(
    workspace: Path,
    masked: Sequence[Path] = (),
    view: ViewOptions | None = None,
    state: SandboxState | None = None,
) -> list[str]:
    """The filesystem, from an allow-list: toolchains, /etc, the workspace (see `build_view`)."""
    mounts = build_view(workspace, [*map(Path, SYSTEM_SECRETS), *masked], view, state)
    return [arg for mount in mounts for arg in mount.args()]


_EXEC = 'exec bash -c "$1"'
"""How the sandbox's script hands over to the command."""

_RELAY_START = (
    f'r=$("$2" -I -S -c "$3" "$4" {RELAY_PORT} 2>/dev/null &); '
    '[ "$r" = ready ] || { echo "kestrel: the network relay did not start" >&2; exit 125; }; '
    + "".join(f"export {name}={PROXY_URL}; " for name in _PROXY_VARS)
    + "export NO_PROXY= no_proxy=; "
)
"""Starts the relay to the proxy on the sandbox's loopback and points programs at it."""


def _python() -> str:
    """This Python, which runs the relay inside the sandbox (the host is visible read-only)."""
    return os.path.realpath(sys.executable)


def _python_args(workspace: Path) -> list[str]:
    """Binds that make this Python (which runs the relay) visible where the view does not show
    it already: its executable and its standard library, read-only."""
    shown = [Mount("ro", path) for path in SYSTEM_TOOLCHAINS] + [Mount("rw", str(workspace))]
    places = [Path(_python()).parent, Path(sys.prefix), Path(sys.base_prefix)]
    args: list[str] = []
    for place in dict.fromkeys(p.resolve() for p in places):
        if not covered(place, shown):
            args += ["--ro-bind", str(place), str(place)]
    return args


def _bash() -> str:
    for candidate in ("/bin/bash", "/usr/bin/bash"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("bash") or "bash"


@functools.cache
def _has_disable_userns(bwrap: str) -> bool:
    """Whether this bubblewrap (0.8 and later) can forbid user namespaces inside the sandbox."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in done.stdout
