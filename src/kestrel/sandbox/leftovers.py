"""The background processes a finished command left running, read from /proc before they are
ended, so the model is told which of its servers and watchers are gone."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_NAMED = 5
"""Processes named in the note; the rest are counted."""

MAX_COMMAND_CHARS = 80
"""Longest command line shown for one process."""


@dataclass(frozen=True, slots=True)
class Leftover:
    """One live process of the command's group: its pid and command line."""

    pid: int
    command: str


def group_processes(pgid: int, proc_root: Path = Path("/proc")) -> tuple[Leftover, ...]:
    """The live (not zombie) processes of process group `pgid`, by pid; none without /proc."""
    found: list[Leftover] = []
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return ()
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            found.append(Leftover(int(entry.name), _command(raw, stat)))
    return tuple(sorted(found, key=lambda p: p.pid))


def ended_note(ended: tuple[Leftover, ...]) -> str:
    """One line naming the background processes ended at the command's end; empty for none."""
    if not ended:
        return ""
    count = len(ended)
    noun = "process" if count == 1 else "processes"
    named = ", ".join(f"{p.pid} `{_shown(p.command)}`" for p in ended[:MAX_NAMED])
    more = f" and {count - MAX_NAMED} more" if count > MAX_NAMED else ""
    return (
        f"[kestrel: ended {count} background {noun} the command left running: {named}{more}; "
        "to use a server, start it and what talks to it in the same command]"
    )


def _command(raw: bytes, stat: str) -> str:
    words = raw.decode("utf-8", errors="replace").split("\0")
    text = " ".join(w for w in words if w)
    if not text:  # a kernel thread or a process that cleared its argv: its name
        text = f"[{stat[stat.find('(') + 1 : stat.rfind(')')]}]"
    return text


def _shown(command: str) -> str:
    text = command.replace("`", "'")
    if len(text) > MAX_COMMAND_CHARS:
        text = text[: MAX_COMMAND_CHARS - 1] + "…"
    return text


def listing_script(fd: int) -> str:
    """Shell that runs the command (`$1`) where `exec bash -c "$1"` did, then writes the
    processes still running in the sandbox's PID namespace to descriptor `fd`, one
    `pid<TAB>command line` per line, and exits with the command's status.

    Run in place of the exec because the sandbox's PID 1 ends every process of the namespace the
    moment the command's shell exits, leaving nothing to read from outside. Skipped: PID 1, this
    shell, and the network relay (`$2 -I -S -c $3 ...`) when there is one.
    """
    return (
        f'bash -c "$1" {fd}>&-; __k=$?; '
        "for __d in /proc/[0-9]*; do __p=${__d#/proc/}; "
        '{ [ "$__p" = 1 ] || [ "$__p" = $$ ]; } && continue; '
        'read -r __s < "$__d/stat" 2>/dev/null || continue; __n=${__s#*\\(}; __n=${__n%\\)*}; '
        "__s=${__s##*) }; "
        "case ${__s%% *} in Z|X) continue;; esac; "
        'mapfile -d "" -t __a < "$__d/cmdline" 2>/dev/null || continue; '
        '[ -n "$2" ] && [ "${__a[0]}" = "$2" ] && [ "${__a[4]}" = "$3" ] && continue; '
        '[ ${#__a[@]} -gt 0 ] || __a=("[$__n]"); '
        f'printf "%s\\t%s\\n" "$__p" "${{__a[*]}}" >&{fd}; done; exit $__k'
    )


def parse_listing(text: str) -> tuple[Leftover, ...]:
    """The processes a `listing_script` wrote; lines that are not `pid<TAB>command` are skipped."""
    found: list[Leftover] = []
    for line in text.splitlines():
        pid, tab, command = line.partition("\t")
        if tab and pid.isdigit():
            found.append(Leftover(int(pid), command.strip() or "?"))
    return tuple(sorted(found, key=lambda p: p.pid))


class LeftoverPipe:
    """The pipe a sandboxed `listing_script` writes to; read it once the sandbox has ended."""

    def __init__(self) -> None:
        self._read, self.fd = os.pipe()
        os.set_blocking(self._read, False)

    def read(self) -> tuple[Leftover, ...]:
        """Close this side's write end and read what the sandbox wrote."""
        self._close_write()
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(self._read, 65536)
            except BlockingIOError:
                break  # a writer still holds the pipe: take what came
            if not data:
                break
            chunks.append(data)
        return parse_listing(b"".join(chunks).decode("utf-8", errors="replace"))

    def close(self) -> None:
        """Close both ends (again is harmless)."""
        self._close_write()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _close_write(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
