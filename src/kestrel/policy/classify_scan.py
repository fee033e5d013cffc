"""What the classifier's checks share: the scan of one command line (workspace, current
directory, dirty tree) and small helpers over words and paths."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from kestrel.policy.shell import SimpleCommand

Check = Callable[[SimpleCommand, "Scan"], list[str]]
"""A check of one command: the reasons it is dangerous, none when it is not."""


class Scan:
    """What the scan of one command line knows: the workspace, the current directory as `cd`
    moves it (None once it is not known), and whether the work tree is dirty (asked once)."""

    def __init__(
        self,
        commands: Sequence[SimpleCommand],
        root: PurePosixPath,
        cwd: PurePosixPath,
        dirty: Callable[[], bool],
    ) -> None:
        self.commands = commands
        self.root = root
        self.cwd: PurePosixPath | None = cwd
        self.cwd_word = ""
        self.source = ""
        """The whole command line, for loops whose variable stands for a named folder."""
        """The last `cd` target as written, when it is not known where it leads (`~/.ssh`)."""
        self._probe = dirty
        self._dirty: bool | None = None
        self.holders = {c.parent for c in commands if c.via in ("wrapper", "inline-code")}

    def dirty(self) -> bool:
        """Whether the work tree holds uncommitted work; asked at most once."""
        if self._dirty is None:
            self._dirty = self._probe()
        return self._dirty

    def resolve(self, word: str) -> PurePosixPath | None:
        """Where `word` points, lexically; None when that depends on run time or on $HOME."""
        if dynamic(word) or word.startswith("~") or word == "-":
            return None
        if word.startswith("/"):
            return normal(word)
        return None if self.cwd is None else normal(f"{self.cwd}/{word}")

    def inside(self, path: PurePosixPath) -> bool:
        """Whether `path` lies in the workspace."""
        return path.is_relative_to(self.root)

    def follow(self, command: SimpleCommand) -> None:
        """Move the current directory as `cd DIR` / `pushd DIR` would."""
        if command.name in ("cd", "pushd"):
            operands = [w for w in command.words[1:] if not (w.startswith("-") and len(w) > 1)]
            self.cwd = self.resolve(operands[0]) if operands else None
            self.cwd_word = (operands[0] if operands else "~") if self.cwd is None else ""
        elif command.name == "popd":
            self.cwd, self.cwd_word = None, ""

    def parent_name(self, command: SimpleCommand) -> str:
        """The name of the command that holds `command` ("" at the top)."""
        return "" if command.parent is None else self.commands[command.parent].name

    def found_in(self, command: SimpleCommand, targets: Sequence[str]) -> list[str] | None:
        """The start folders of the `find` that runs `command` on `{}`; None when it does not."""
        if command.parent is None or not any("{}" in t for t in targets):
            return None
        finder = self.commands[command.parent]
        return find_starts(finder.words) if finder.name == "find" else None

    def fed(self, command: SimpleCommand) -> list[SimpleCommand]:
        """The commands earlier in the same pipeline, whose output `command` reads."""
        return [
            c
            for c in self.commands
            if c.pipeline == command.pipeline and c.stage < command.stage and c.stage >= 0
        ]


def outside(word: str, scan: Scan, verb: str, how: str) -> str:
    """Why acting on `word` reaches outside the workspace; "" when it stays inside."""
    verb = f"{verb} {word} {how}".rstrip()
    if dynamic(word):
        return f"{verb}, a path only known when it runs"
    if word.startswith("~"):
        return f"{verb}, in the home directory outside the workspace"
    path = scan.resolve(word)
    if path is None:
        return f"{verb} after a cd to a directory only known when it runs"
    if path == PurePosixPath("/") or (path.parent == PurePosixPath("/") and word.endswith("*")):
        return f"{verb}: the whole file system"
    if not scan.inside(path):
        return f"{verb}, outside the workspace ({path})"
    return ""


def split(
    args: Sequence[str], takes_value: frozenset[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """Options and operands; options may follow operands, `--` ends them, and the options in
    `takes_value` swallow the next word."""
    flags: list[str] = []
    operands: list[str] = []
    ended = skip = False
    for arg in args:
        if skip:
            skip = False
        elif not ended and arg == "--":
            ended = True
        elif not ended and len(arg) > 1 and arg.startswith("-"):
            flags.append(arg)
            skip = arg in takes_value
        else:
            operands.append(arg)
    return flags, operands


def find_starts(words: Sequence[str]) -> list[str]:
    """The folders a `find` command line searches."""
    starts = []
    for word in words[1:]:
        if word.startswith(("-", "(", "!")):
            break
        starts.append(word)
    return starts or ["."]


def dynamic(word: str) -> bool:
    """Whether `word` is only known at run time."""
    return "$" in word or "`" in word


def normal(path: str) -> PurePosixPath:
    """`path` with `.`, `..` and doubled slashes folded, lexically."""
    return PurePosixPath(posixpath.normpath(path))
