"""Resource limits for sandboxed commands: rlimits set by the shell, cgroups where writable."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

MiB = 1024 * 1024
GiB = 1024 * MiB

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
"""The controllers a command's cgroups use, when this process may write them."""
CPU_PERIOD_US = 100_000
"""The scheduling period of a CPU quota: the command gets `cpus` times this in each."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one sandboxed command (with all its children) may use."""

    memory_bytes: int = 2 * GiB
    max_processes: int = 512
    file_size_bytes: int = 1 * GiB
    open_files: int = 1024
    cpus: float | None = None
    """CPU time per wall-clock second, in CPUs (0.5: half of one core); None: no quota."""
    disk_bytes: int | None = None
    """How much the workspace may grow while one command runs; None: no quota."""


def ulimit_script(limits: Limits, *, address_space: bool) -> str:
    """Shell that sets hard and soft rlimits, then runs `$1` with `bash -c`.

    `address_space` caps virtual memory per process, the fallback where no memory cgroup can be
    made: it is coarse (runtimes that reserve address space up front may fail) but bounded.
    """
    file_size = limits.file_size_bytes
    if limits.disk_bytes is not None:
        # One file cannot outgrow the workspace quota by more than a little: the kernel stops it.
        file_size = min(file_size, limits.disk_bytes + MiB)
    parts = [
        "-c 0",
        f"-f {max(file_size // 1024, 1)}",
        f"-n {limits.open_files}",
        f"-u {limits.max_processes}",
    ]
    if address_space:
        parts.append(f"-v {max(limits.memory_bytes // 1024, 1)}")
    # Without -S or -H both limits are set, so the command cannot raise them again.
    return f'ulimit {" ".join(parts)} || exit 125; exec bash -c "$1"'


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupSupport:
    """Which cgroup hierarchy this machine has and which controllers Kestrel may write."""

    version: Literal[1, 2] | None
    writable: tuple[str, ...] = ()
    bases: dict[str, Path] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """Whether memory, CPU or process counts can be capped per command."""
        return bool(self.writable)


def detect_cgroups(root: Path = CGROUP_ROOT) -> CgroupSupport:
    """Find the cgroup version and the controllers whose subtree this process may write."""
    own = _own_cgroups()
    if (root / "cgroup.controllers").is_file():
        base = _under(root, own.get("", "/"))
        enabled = _read(base / "cgroup.subtree_control").split()
        names = tuple(c for c in CONTROLLERS if c in enabled and os.access(base, os.W_OK))
        return CgroupSupport(version=2, writable=names, bases=dict.fromkeys(names, base))
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS:
        mount = root / controller
        if not mount.is_dir():
            continue
        base = _under(mount, own.get(controller, "/"))
        if os.access(base, os.W_OK):
            bases[controller] = base
    version: Literal[1] | None = 1 if (root / "memory").is_dir() or bases else None
    return CgroupSupport(version=version, writable=tuple(bases), bases=bases)


class CommandCgroup:
    """Cgroups made for one command; the command joins them before starting bubblewrap."""

    def __init__(self, support: CgroupSupport, limits: Limits) -> None:
        self._support = support
        self._limits = limits
        self.dirs: dict[str, Path] = {}
        """The cgroup made for each controller."""

    def create(self) -> list[Path]:
        """Make one cgroup per hierarchy (one for all controllers on v2), with limits set;
        return the procs file of each."""
        name = f"kestrel-{secrets.token_hex(6)}"
        made: dict[Path, bool] = {}
        for controller in self._support.writable:
            if controller == "cpu" and self._limits.cpus is None:
                continue
            path = self._support.bases[controller] / name
            if path not in made:
                try:
                    path.mkdir()
                except OSError:
                    continue
                made[path] = False
            if self._configure(controller, path):
                self.dirs[controller] = path
                made[path] = True
        for path, used in made.items():
            if not used:
                path.rmdir()
        return [d / "cgroup.procs" for d in dict.fromkeys(self.dirs.values())]

    def _configure(self, controller: str, path: Path) -> bool:
        """Write the limits; False when the controller's main limit could not be set."""
        required, optional = self._settings(controller)
        try:
            for filename, value in required:
                (path / filename).write_text(value)
        except OSError:
            return False
        for filename, value in optional:
            # Swap accounting is often compiled out or switched off; the memory limit still holds.
            with contextlib.suppress(OSError):
                (path / filename).write_text(value)
        return True

    def _settings(self, controller: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The files to write for `controller`: those that must take, and those that may fail."""
        v2 = self._support.version == 2
        limits = self._limits
        if controller == "memory":
            memory = str(limits.memory_bytes)
            if v2:
                return [("memory.max", memory)], [("memory.swap.max", "0")]
            return [("memory.limit_in_bytes", memory)], [("memory.memsw.limit_in_bytes", memory)]
        if controller == "pids":
            return [("pids.max", str(limits.max_processes))], []
        quota = str(max(int((limits.cpus or 1.0) * CPU_PERIOD_US), 1000))
        if v2:
            return [("cpu.max", f"{quota} {CPU_PERIOD_US}")], []
        return [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)], []

    def kill(self) -> None:
        """SIGKILL every process in the command's cgroups; a few passes catch late forks."""
        for path in dict.fromkeys(self.dirs.values()):
            kill_file = path / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
                    continue
            for _ in range(20):
                pids = [int(p) for p in _read(path / "cgroup.procs").split()]
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)

    async def remove(self, attempts: int = 50) -> None:
        """Remove the cgroups once their processes are gone (a killed tree may take a moment)."""
        for path in dict.fromkeys(self.dirs.values()):
            for _ in range(attempts):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await asyncio.sleep(0.02)
        self.dirs = {}


def join_cgroups_argv(procs_files: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """`argv` started by a shell that first moves itself into each cgroup (no race with forks)."""
    if not procs_files:
        return list(argv)
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; '
        'n=$((n-1)); done; exec "$@"'
    )
    count = str(len(procs_files))
    return ["/bin/sh", "-c", script, "kestrel-cgroup", count, *map(str, procs_files), *argv]


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for the v2 unified hierarchy)."""
    paths: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            paths[controller.removeprefix("name=")] = path
    return paths


def _under(mount: Path, path: str) -> Path:
    # In a cgroup namespace the own path may not exist under the mount: fall back to its root.
    candidate = mount / path.lstrip("/")
    return candidate if candidate.is_dir() else mount


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
