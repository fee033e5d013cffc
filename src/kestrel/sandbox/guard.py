"""What stops one sandboxed command, all of it, on time: its PID 1, its cgroups, its disk quota."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from kestrel.sandbox.base import ExecResult, OutputSink
from kestrel.sandbox.limits import CommandCgroup
from kestrel.sandbox.pidone import SandboxInit
from kestrel.sandbox.quota import WorkspaceQuota
from kestrel.sandbox.watchdog import Guards


class CommandGuard:
    """Kills a sandboxed command's whole tree at once and keeps its workspace quota."""

    def __init__(self, cgroup: CommandCgroup | None, quota: WorkspaceQuota | None) -> None:
        self._init = SandboxInit()
        self._cgroup = cgroup
        self._quota = quota

    def bwrap_args(self) -> list[str]:
        """Options bubblewrap needs so that its PID 1 can be found."""
        return self._init.args()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """Descriptors bubblewrap must inherit."""
        return (self._init.write_fd,)

    async def start(self) -> None:
        """Measure the workspace before the command (off the event loop: it may be big)."""
        if self._quota is not None:
            await asyncio.to_thread(self._quota.start)

    def guards(self) -> Guards:
        """The runner's guards: the tree kill, and the quota check while the command runs."""
        check = self._quota.check if self._quota is not None else None
        return Guards(kill_tree=self.kill, check=check)

    def kill(self, bwrap_pid: int) -> None:
        """SIGKILL the sandbox's PID 1 (its namespace goes with it), then all its cgroups hold."""
        self._init.kill(bwrap_pid)
        if self._cgroup is not None:
            self._cgroup.kill()

    async def report(self, result: ExecResult, on_output: OutputSink | None) -> ExecResult:
        """`result`, saying in its output why Kestrel stopped the command, if it did, or which
        limit it broke when it ended before a sample could catch it."""
        quota = self._quota
        if result.stopped_by is None and quota is not None:
            over = await asyncio.to_thread(quota.check, force=True)
            result = replace(result, stopped_by=over)
        if result.stopped_by is None:
            return result
        note = f"\n[kestrel] The command was stopped: {result.stopped_by}.\n"
        if on_output is not None:
            on_output("stderr", note)
        return replace(result, output=result.output + note)

    async def close(self) -> None:
        """Release the pipe and remove the cgroups."""
        self._init.close()
        if self._cgroup is not None:
            await self._cgroup.remove()
