"""What this machine's sandbox can do, found by actually starting one (`kestrel doctor`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.limits import detect_cgroups

LSM_LIST = Path("/sys/kernel/security/lsm")

INSTALL_HINT = "install bubblewrap: apt-get install bubblewrap (dnf/pacman: bubblewrap)"
USERNS_HINT = (
    "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
    "(Debian), sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 23.10 and "
    "later), and make sure user.max_user_namespaces is above 0"
)

_TRIAL = 'while read -r key value; do [ "$key" = Seccomp: ] && echo "seccomp=$value"; done' + (
    " < /proc/self/status; echo sandbox-ok"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReport:
    """The sandbox's capabilities on this machine, and what to do where it falls short."""

    bwrap_path: str | None
    bwrap_version: str | None
    userns: bool
    sandbox_starts: bool
    seccomp: bool
    cgroup_version: Literal[1, 2] | None
    cgroup_controllers: tuple[str, ...]
    landlock: bool
    as_root: bool = False
    trial_output: str = ""

    @property
    def ok(self) -> bool:
        """Whether sandboxed commands can run here, with the seccomp filter in force."""
        return self.sandbox_starts and self.seccomp

    def fixes(self) -> list[str]:
        """What to change on this machine so that the sandbox starts."""
        if self.bwrap_path is None:
            return [INSTALL_HINT]
        if not self.userns:
            return [USERNS_HINT]
        if not self.sandbox_starts:
            return ["the sandbox did not start; its output above says why"]
        if not self.seccomp:
            return ["the kernel did not apply the seccomp filter (CONFIG_SECCOMP_FILTER)"]
        return []

    def notes(self) -> list[str]:
        """Limits of the sandbox here that do not stop it from running."""
        notes = [
            'network: none by default; the host\'s with network = "host"; only listed hosts, '
            'through a proxy, with network = "allowlist"'
        ]
        if not self.cgroup_controllers:
            notes.append(
                "no writable cgroup: memory and process counts are capped with rlimits "
                "(RLIMIT_AS per process, RLIMIT_NPROC, which does not bind a host root user)"
            )
        elif "pids" not in self.cgroup_controllers:
            notes.append("no writable pids cgroup: process counts rely on RLIMIT_NPROC")
        if "cpu" not in self.cgroup_controllers:
            notes.append(
                "no writable cpu cgroup: commands get no CPU quota (sandbox_limits.cpus is not "
                "enforced); a timeout still stops a command that spins"
            )
        if self.as_root:
            notes.append(
                "Kestrel runs as root: the sandbox's user is root on the host; files of /etc "
                "only root may read are masked, but such files in the workspace, a toolchain or "
                "a path the settings add stay readable; run Kestrel as an ordinary user"
            )
        notes.append(
            "Landlock is available but not used yet"
            if self.landlock
            else "Landlock is not available (and not used yet)"
        )
        return notes


async def probe(bwrap: str | None = None) -> ProbeReport:
    """Inspect bubblewrap, namespaces, seccomp, cgroups and Landlock by trying them."""
    path = bwrap or shutil.which("bwrap")
    if path is not None and not os.access(path, os.X_OK):
        path = None
    cgroups = detect_cgroups()
    starts, seccomp, output = await _trial(path) if path else (False, False, "")
    version = _run([path, "--version"])[1].strip().removeprefix("bubblewrap ") if path else ""
    return ProbeReport(
        bwrap_path=path,
        bwrap_version=version or None,
        userns=path is not None and (starts or _userns_usable(path)),
        sandbox_starts=starts,
        seccomp=seccomp,
        cgroup_version=cgroups.version,
        cgroup_controllers=cgroups.writable,
        landlock="landlock" in _read(LSM_LIST).split(","),
        as_root=os.geteuid() == 0,
        trial_output=output,
    )


def _userns_usable(bwrap: str) -> bool:
    """Whether bubblewrap can make a user namespace at all (the usual reason it cannot start)."""
    return _run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"])[0] == 0


async def _trial(bwrap: str) -> tuple[bool, bool, str]:
    """Run a trivial command in a full sandbox: did it start, and was seccomp in force?"""
    with tempfile.TemporaryDirectory(prefix="kestrel-probe-") as folder:
        workspace = Path(folder)
        executor = BwrapExecutor(workspace, config=SandboxConfig(bwrap_path=bwrap))
        try:
            result = await executor.run(_TRIAL, cwd=workspace, timeout_s=20)
        except OSError as exc:
            return False, False, str(exc)
    starts = result.exit_code == 0 and "sandbox-ok" in result.output
    # Mode 2 is "filter": a BPF program is attached to the process.
    return starts, "seccomp=2" in result.output, result.output


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, str(exc)
    return done.returncode, done.stdout + done.stderr


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
