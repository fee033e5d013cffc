"""The sandbox's PID 1, as bubblewrap reports it: killing it ends every process of the sandbox.

A sandboxed command runs in its own PID namespace. When the namespace's first process dies, the
kernel SIGKILLs every other process in it at once: daemons, double forks, new sessions, processes
that ignore SIGTERM. bubblewrap tells its parent that process's PID on `--info-fd`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal


class SandboxInit:
    """A pipe for bubblewrap's `--info-fd` report, and the means to kill the PID 1 it names."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._data = b""
        self._pid: int | None = None

    def args(self) -> list[str]:
        """What bubblewrap needs on its command line to report here."""
        return ["--info-fd", str(self.write_fd)]

    def pid(self) -> int | None:
        """The sandbox's PID 1 on this machine, once bubblewrap has said it."""
        if self._pid is None:
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(self.read_fd, 4096):
                    self._data += chunk
            with contextlib.suppress(ValueError):
                info = json.loads(self._data.decode())
                if isinstance(info, dict) and isinstance(info.get("child-pid"), int):
                    self._pid = info["child-pid"]
        return self._pid

    def kill(self, bwrap_pid: int) -> None:
        """SIGKILL the sandbox's PID 1 (and with it the whole namespace), if it still runs as
        the child of bubblewrap's process `bwrap_pid`."""
        pid = self.pid()
        if pid is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return
        try:
            # Through a pidfd, and only once it is sure the PID was not reused by someone else.
            if _parent_of(pid) == bwrap_pid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close both ends of the pipe."""
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _parent_of(pid: int) -> int | None:
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 - one short read
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None
