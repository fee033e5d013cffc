"""Where a command line writes: redirect targets and files named by options, with `~`, `$HOME`,
`$PWD` and the like expanded, followed through `cd`, and judged inside or outside the workspace.

A path that depends on something only known when the command runs (`$OLDPWD`, `~-`, `$(..)`,
an unknown `$VAR`, the directory after `cd "$X"`) is reported as unknown: the gate asks.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.policy.command_effects import Effect
from kestrel.policy.shell import Redirect, ShellParse, SimpleCommand

__all__ = ["Places", "expand_word", "is_write", "written_outside"]

_HARMLESS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1"})
_HARMLESS |= {"/dev/fd/2"}
_VAR = re.compile(r"\$(\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_FD = re.compile(r"\d+|-|\d+-")


@dataclass(frozen=True, slots=True)
class Places:
    """What the expansion knows: the workspace, the home folder, and a few variables' values."""

    root: Path
    home: Path
    env: Mapping[str, str]
    private: tuple[Path, ...] = ()
    """Folders a command gets its own copy of (the sandbox's /tmp): a write there stays inside."""

    @classmethod
    def of(cls, root: Path, home: Path, private: Sequence[Path] = ()) -> Places:
        """Places for a command run in `root`, with `$TMPDIR` and `$USER` as this process sees."""
        env = {"HOME": str(home), "TMPDIR": tempfile.gettempdir()}
        user = os.environ.get("USER") or home.name
        return cls(root=root, home=home, env=env | {"USER": user}, private=tuple(private))


def expand_word(word: str, cwd: Path | None, places: Places) -> str | None:
    """`word` with `~`, `~+` and known variables expanded; None when it depends on run time."""
    if word.startswith("~"):
        head, slash, tail = word.partition("/")
        if head == "~":
            word = str(places.home) + slash + tail
        elif head == "~+" and cwd is not None:
            word = str(cwd) + slash + tail
        else:
            return None  # ~- is $OLDPWD, ~user another home: unknown here
    if "`" in word or "$(" in word or "$((" in word or "<(" in word or ">(" in word:
        return None
    values = dict(places.env)
    if cwd is not None:
        values["PWD"] = str(cwd)
    unknown = False

    def one(m: re.Match[str]) -> str:
        nonlocal unknown
        name = m.group(2) or m.group(3)
        if name not in values:
            unknown = True
            return ""
        return values[name]

    out = _VAR.sub(one, word)
    if unknown or "$" in out:
        return None
    return out


def is_write(redirect: Redirect) -> bool:
    """Whether a redirection opens a file for writing (`>`, `>>`, `>|`, `&>`, `<>`, `>& FILE`)."""
    op = redirect.op
    if op in ("<<", "<<-", "<<<") or ">" not in op or op.endswith("&-"):
        return False  # `2>&-` closes a descriptor
    if op.endswith("&"):  # `>&2`, `2>&1`, `>&-` copy or close a descriptor; `>& FILE` writes
        return not _FD.fullmatch(redirect.raw or redirect.target)
    return True


def written_outside(
    parsed: ShellParse, effects: Sequence[Sequence[Effect]], places: Places
) -> list[str]:
    """Sentences for every write outside the workspace, or to a place only known at run time."""
    cwds: list[Path | None] = [places.root]
    found: list[str] = []
    for index, command in enumerate(parsed.commands):
        targets = [(r.raw or r.target, r.op) for r in command.redirects if is_write(r)]
        mine = effects[index] if index < len(effects) else ()
        targets += [(e.path, e.reason) for e in mine if e.kind == "writes-file" and e.path]
        for raw, how in targets:
            problem = _judge(raw, cwds, places)
            if problem is not None:
                found.append(f"it writes {problem} ({how} {raw})")
        cwds = _follow(command, cwds, places)
    return list(dict.fromkeys(found))


def _judge(raw: str, cwds: list[Path | None], places: Places) -> str | None:
    if raw in _HARMLESS:
        return None
    if not raw or "\x00" in raw:
        return "to a file only known when the command runs"
    for cwd in cwds:
        path = expand_word(raw, cwd, places)
        if path is None or (cwd is None and not path.startswith("/")):
            return "to a file only known when the command runs"
        full = os.path.normpath(os.path.join(cwd or "/", path))
        if "\x00" in full:
            return "to a file only known when the command runs"
        if full in _HARMLESS:
            continue
        if any(_private(full, folder, places.root) for folder in places.private):
            # The host's file at this path is not the one written: the command has its own
            # folder here, and what a symlink in it points at is confined like any other write.
            continue
        for form in (full, os.path.realpath(full)):
            if not _inside(form, places.root):
                return "outside the workspace"
    return None


def _private(path: str, folder: Path, root: Path) -> bool:
    """Whether `path` lies in a private `folder` that does not hold the workspace (next to a
    workspace under /tmp, a write is judged as outside, to be safe)."""
    return _inside(path, folder) and not _inside(str(root), folder)


def _inside(path: str, root: Path) -> bool:
    base = os.path.normpath(str(root))
    return path == base or path.startswith(base.rstrip("/") + "/")


def _follow(command: SimpleCommand, cwds: list[Path | None], places: Places) -> list[Path | None]:
    """Every directory the shell may be in after `command` (a `cd` in a subshell or a branch
    may or may not have run, so earlier ones stay possible)."""
    if command.name not in ("cd", "pushd", "popd"):
        return cwds
    operands = [w for w in command.words[1:] if not (w.startswith("-") and len(w) > 1)]
    if command.name == "popd" or command.dynamic or operands[:1] == ["-"]:
        return [*cwds, None]
    target = operands[0] if operands else "~"
    out = list(cwds)
    for cwd in cwds:
        path = expand_word(target, cwd, places)
        if path is None or (cwd is None and not path.startswith("/")):
            out.append(None)
        else:
            out.append(Path(os.path.normpath(os.path.join(cwd or "/", path))))
    return list(dict.fromkeys(out))[:16] + ([None] if len(out) > 16 else [])
