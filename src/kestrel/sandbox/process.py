"""Running one program with streamed output, a timeout, and a kill of its whole process group.

Shared by every executor: they differ only in the argument vector they start.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from kestrel.sandbox.base import ExecResult, OutputSink
from kestrel.sandbox.leftovers import Leftover, ended_note, group_processes
from kestrel.sandbox.output import MAX_OUTPUT_CHARS, OutputBuffer
from kestrel.sandbox.watchdog import Guards, Watchdog, signal_group

Stream = Literal["stdout", "stderr"]


class ProcessRunner:
    """Starts a program in a new session with no stdin and reads both output pipes to the end.

    The deadline is kept by a `Watchdog` thread, so a stalled event loop cannot delay the kill;
    `kill_grace_s` is the SIGTERM grace on cancellation only (a timeout allows much less).
    """

    def __init__(
        self,
        *,
        kill_grace_s: float = 2.0,
        drain_grace_s: float = 0.5,
        max_output_chars: int = MAX_OUTPUT_CHARS,
    ) -> None:
        self._kill_grace_s = kill_grace_s
        self._drain_grace_s = drain_grace_s
        self._max_output_chars = max_output_chars

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout_s: float,
        on_output: OutputSink | None = None,
        pass_fds: Sequence[int] = (),
        guards: Guards | None = None,
    ) -> ExecResult:
        """Run `argv`; at the deadline, when a guard trips, or on cancellation kill its whole
        process group (and what `guards.kill_tree` reaches)."""
        started = time.monotonic()
        guards = guards or Guards()
        ended: tuple[Leftover, ...] = ()
        output = OutputBuffer(self._max_output_chars)
        loop = asyncio.get_running_loop()
        proc, pipes = await _spawn(argv, cwd, env, pass_fds)
        watchdog = Watchdog(proc.pid, started + timeout_s, guards)
        watchdog.start()
        readers = [
            loop.create_task(_pump(loop, pipe, stream, output, on_output))
            for stream, pipe in pipes.items()
        ]
        try:
            await proc.wait()
            watchdog.stop()
            ended = await self._drain(proc, readers, guards)
        except BaseException:
            # Cancelled (or failing): nothing of the command may outlive the call.
            watchdog.stop()
            await self._kill_group(proc, guards)
            raise
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            for pipe in pipes.values():
                pipe.close()
        stopped = watchdog.reason if watchdog.reason != "timeout" else None
        return ExecResult(
            exit_code=_exit_code(proc.returncode),
            output=output.text(),
            timed_out=watchdog.reason == "timeout",
            duration_ms=(time.monotonic() - started) * 1000,
            stopped_by=stopped,
            ended_background=ended_note(ended),
        )

    async def _drain(
        self,
        proc: asyncio.subprocess.Process,
        readers: list[asyncio.Task[None]],
        guards: Guards,
    ) -> tuple[Leftover, ...]:
        """Read the pipes to their end; return the background processes ended to get there."""
        # A background child may hold the pipes open after the command ends: give it a moment
        # to finish writing, then kill the group and stop listening.
        _, pending = await asyncio.wait(readers, timeout=self._drain_grace_s)
        ended: tuple[Leftover, ...] = ()
        if pending:
            ended = await asyncio.to_thread(group_processes, proc.pid)
            await self._kill_group(proc, guards)
            await asyncio.wait(pending, timeout=self._drain_grace_s)
        for reader in readers:
            if reader.done() and not reader.cancelled():
                reader.result()  # re-raises what went wrong while reading, if anything did
        return ended

    async def _kill_group(self, proc: asyncio.subprocess.Process, guards: Guards) -> None:
        """Kill what `guards.kill_tree` reaches, SIGTERM the command's process group, then
        SIGKILL whatever outlives the grace."""
        if guards.kill_tree is not None:
            guards.kill_tree(proc.pid)
        for signum, grace_s in ((signal.SIGTERM, self._kill_grace_s), (signal.SIGKILL, 1.0)):
            if not signal_group(proc.pid, signum) or await _group_ends(proc, grace_s):
                break
        await _reap(proc)


async def _spawn(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], pass_fds: Sequence[int]
) -> tuple[asyncio.subprocess.Process, dict[Stream, BinaryIO]]:
    """Start `argv` in a new session, its output going to two fresh pipes."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        for fd in (out_read, err_read):
            os.close(fd)
        raise
    finally:
        # The child holds its own copies; ours would keep the pipes open forever.
        for fd in (out_write, err_write):
            os.close(fd)
    # Our own pipes rather than asyncio's, so they can be closed on a child that never exits.
    return proc, {
        "stdout": os.fdopen(out_read, "rb", 0),
        "stderr": os.fdopen(err_read, "rb", 0),
    }


async def _pump(
    loop: asyncio.AbstractEventLoop,
    pipe: BinaryIO,
    stream: Stream,
    output: OutputBuffer,
    on_output: OutputSink | None,
) -> None:
    """Read one pipe to its end, passing each decoded piece on as it arrives."""
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    # Incremental, so a character split across two reads is not mangled.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        while data := await reader.read(65536):
            _emit(decoder.decode(data), stream, output, on_output)
        _emit(decoder.decode(b"", final=True), stream, output, on_output)
    finally:
        transport.close()


def _emit(text: str, stream: Stream, output: OutputBuffer, on_output: OutputSink | None) -> None:
    if not text:
        return
    output.add(text)
    if on_output is not None:
        on_output(stream, text)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies, merely unreaped, do not count)."""
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # Orphans are reparented to PID 1, which in a container may be slow to reap them, so a
    # group of zombies would look alive to `killpg(pgid, 0)`.
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


async def _group_ends(proc: asyncio.subprocess.Process, within_s: float) -> bool:
    """Wait up to `within_s` for the command and every process of its group to be gone."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc.returncode is not None and not _group_alive(proc.pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def _reap(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        if proc.returncode is None:
            proc.kill()
    await proc.wait()


def _exit_code(returncode: int | None) -> int:
    # A negative return code means "killed by signal N"; shells report that as 128 + N.
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode
