"""The background processes a finished command left running, read from /proc before they are
ended, so the model is told which of its servers and watchers are gone."""

from __future__ import annotations

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
