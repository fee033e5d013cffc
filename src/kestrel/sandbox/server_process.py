"""A long-running program (an MCP server on stdio) confined the way commands are.

A command runs once through `BwrapExecutor.run`; a server is started by whoever speaks to it over
its stdin and stdout, so it gets a command line instead: bubblewrap with the session's view of the
host, no capabilities, the seccomp filter and rlimits, and the network only when asked for. The
program itself (and the virtual environment it lives in) is shown read-only, since a server is
usually installed outside the toolchain folders every command sees.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from kestrel.sandbox.bwrap import (
    BwrapExecutor,
    Network,
    SandboxUnavailable,
    _bash,
    _has_disable_userns,
    mount_args,
    namespace_args,
)
from kestrel.sandbox.limits import ulimit_script
from kestrel.sandbox.orphans import MARKER
from kestrel.sandbox.seccomp import filter_bytes
from kestrel.sandbox.usability import clear_mount_points

_SECCOMP_FD = "3"
_OPEN_FILTER = f'exec {_SECCOMP_FD}<"$0" || exit 125; exec "$@"'
"""Opens the seccomp filter on the descriptor bubblewrap reads it from, then becomes bwrap."""


def server_command(
    executor: BwrapExecutor,
    argv: Sequence[str],
    *,
    cwd: Path,
    share_network: bool,
    filter_dir: Path,
) -> list[str]:
    """The command line that starts `argv` in the sandbox, in `cwd` inside the workspace.

    The seccomp filter is written to `filter_dir` (Kestrel's own, not the workspace's).
    Raises `SandboxUnavailable` without bubblewrap, `OSError` where no filter fits this machine.
    """
    bwrap = executor.config.bwrap_path or shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
    filter_dir.mkdir(parents=True, exist_ok=True)
    filter_path = filter_dir / "seccomp.bpf"
    filter_path.write_bytes(filter_bytes())
    network: Network = "host" if share_network else "none"
    config = executor.config
    args = [bwrap, *namespace_args(network, disable_userns=_has_disable_userns(bwrap))]
    args += mount_args(executor.workspace, config.masked_paths, config.view, config.state)
    for place in program_places(argv):
        args += ["--ro-bind", str(place), str(place)]
    inside = cwd.resolve()
    if not inside.is_relative_to(executor.workspace):
        inside = executor.workspace
    args += ["--remount-ro", "/", "--seccomp", _SECCOMP_FD, "--chdir", str(inside), "--"]
    clear_mount_points(config.state, args)
    # No address-space cap: runtimes such as Node reserve far more than they use.
    script = ulimit_script(config.limits, address_space=False).replace(
        'exec bash -c "$1"', 'exec "$@"'
    )
    return [
        "/bin/sh",
        "-c",
        _OPEN_FILTER,
        str(filter_path),
        *args,
        _bash(),
        "-c",
        script,
        MARKER,
        *argv,
    ]


def program_places(argv: Sequence[str]) -> list[Path]:
    """Host paths to show read-only so `argv` can run: the program's virtual environment (or
    its folder) and files named by absolute path on its command line."""
    places: list[Path] = []
    first = shutil.which(argv[0]) if argv else None
    if first is not None:
        program = Path(os.path.abspath(first))
        folder = program.parent
        root = folder.parent
        places.append(root if (root / "pyvenv.cfg").is_file() else folder)
        real = Path(os.path.realpath(program))
        if real.parent != folder:
            places.append(real.parent)
    for arg in argv[1:]:
        if arg.startswith("/") and os.path.exists(arg):
            places.append(Path(os.path.abspath(arg)))
    shown = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/")
    unique = dict.fromkeys(p for p in places if not (str(p) + "/").startswith(shown))
    return [p for p in unique if str(p) != "/"]
