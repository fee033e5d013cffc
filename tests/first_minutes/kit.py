"""A new user's first ten minutes: the real `kestrel` command, a fresh HOME, a fresh project.

Each test runs a command as a person would type it (through a pseudo-terminal where a terminal
matters) and asserts on the exact first line of what it says and on its exit code. `assert_clean`
holds for every output: no traceback, no Python repr.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KESTREL = [sys.executable, "-m", "kestrel"]

_REPRS = re.compile(
    r"Traceback \(most recent call last\)|PosixPath\(|WindowsPath\(|\[Errno \d+\]"
    r"|<[\w.]+ object at 0x|\w+Error\(|KeyboardInterrupt"
)


@dataclass(frozen=True)
class Result:
    """What one command printed and how it exited."""

    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        """Standard output and error together (a terminal shows both)."""
        return self.out + self.err

    def first_line(self, stream: str = "text") -> str:
        """The first non-empty line of `stream` ("out", "err" or "text"), stripped."""
        for line in getattr(self, stream).splitlines():
            if line.strip():
                return line.strip()
        return ""


def assert_clean(result: Result) -> None:
    """No traceback and no Python repr reached the person."""
    found = _REPRS.search(result.text)
    assert found is None, f"{found.group(0)!r} in output:\n{result.text}"


class NewUser:
    """A fresh HOME with no settings, a fresh data directory, and a project under git."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        self.project = tmp / "project"
        self.project.mkdir()
        (self.project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        git = ["git", "-C", str(self.project)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run(
            [*git, "-c", "user.name=n", "-c", "user.email=n@x", "commit", "-qm", "start"],
            check=True,
        )
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "CI", "VIRTUAL_ENV", "PYTHONPATH")
        self.env = {k: v for k, v in os.environ.items() if k in keep}
        self.env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            TERM="xterm-256color",
        )

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: str = "",
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Result:
        """Run `kestrel ARGS` with pipes (as a script would) and wait for it."""
        proc = subprocess.run(
            [*KESTREL, *args],
            cwd=cwd or self.project,
            env={**self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def run_tty(
        self,
        *args: str,
        cwd: Path | None = None,
        keys: list[tuple[str, str]] | None = None,
        interrupt_when: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Result:
        """Run `kestrel ARGS` on a pseudo-terminal, as a person at a terminal would.

        `keys`: (text to wait for, keys to type) pairs, in order. `interrupt_when`: press Ctrl-C
        (SIGINT to the process group, as a terminal does) once this text has appeared; "" means
        at once; if the command is still there 3 s later, Ctrl-C is pressed again, as a person
        would: CPython cannot see a SIGINT that lands between printing an `input()` prompt and
        starting to read, so one press can be lost there. The output is what the terminal showed
        (standard output and error together).
        """
        main_fd, child_fd = pty.openpty()
        proc = subprocess.Popen(
            [*KESTREL, *args],
            cwd=cwd or self.project,
            env={**self.env, **(env or {})},
            stdin=child_fd,
            stdout=child_fd,
            stderr=child_fd,
            start_new_session=True,
        )
        os.close(child_fd)
        pending = list(keys or [])
        seen = b""
        deadline = time.monotonic() + timeout
        interrupted = interrupt_when is None
        pressed_at = 0.0
        try:
            while time.monotonic() < deadline:
                text = seen.decode(errors="replace")
                if not interrupted and interrupt_when is not None and interrupt_when in text:
                    os.killpg(proc.pid, signal.SIGINT)
                    interrupted, pressed_at = True, time.monotonic()
                elif pressed_at and time.monotonic() - pressed_at > 3 and proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGINT)
                    pressed_at = time.monotonic()
                if pending and pending[0][0] in text:
                    os.write(main_fd, pending.pop(0)[1].encode())
                ready, _, _ = select.select([main_fd], [], [], 0.05)
                if ready:
                    try:
                        chunk = os.read(main_fd, 65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        break
                    seen += chunk
                elif proc.poll() is not None:
                    break
            else:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"timed out; the terminal showed:\n{seen.decode()}")
            code = proc.wait(timeout=30)
        finally:
            os.close(main_fd)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        out = seen.decode(errors="replace").replace("\r\n", "\n")
        return Result(code, out, "")
