"""Which word on a command line is a command: `kestrel help`, and "did you mean" for typos.

A task is any text, so a mistyped command (`kestrel sesions list`) would otherwise be taken as a
task and start a paid session. Before a command line runs as a task, its first free-standing word
is compared with the command names: the same name, or one edit away from it (a letter added,
dropped, changed, or two letters swapped), is a command the person meant, not a task.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from typer.core import TyperOption


def edit_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i, left in enumerate(a, 1):
        row = [i]
        for j, right in enumerate(b, 1):
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (left != right))
            if i > 1 and j > 1 and left == b[j - 2] and a[i - 2] == right:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]


def closest_command(word: str, names: Collection[str]) -> str | None:
    """The command `word` names or is one edit away from, when exactly one is that close."""
    if not word or any(c.isspace() for c in word) or word.startswith("-"):
        return None
    lowered = word.lower()
    if lowered in names:
        return lowered
    near = [name for name in names if edit_distance(lowered, name) == 1]
    return near[0] if len(near) == 1 else None


def value_options(params: Iterable[object]) -> frozenset[str]:
    """The names of the options that take a value (`--model M`), so a value is not a word."""
    names: set[str] = set()
    for param in params:
        if isinstance(param, TyperOption) and not param.is_flag and not param.count:
            names.update(param.opts)
            names.update(param.secondary_opts)
    return frozenset(names)


def positionals(args: Sequence[str], takes_value: Collection[str]) -> list[int]:
    """Indexes of the free-standing words of `args` (neither an option nor an option's value)."""
    found: list[int] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == "--":
            found.extend(range(i + 1, len(args)))
            break
        elif arg.startswith("--"):
            skip = "=" not in arg and arg in takes_value
        elif arg.startswith("-") and len(arg) > 1:
            skip = _short_cluster_wants_value(arg, takes_value)
        else:
            found.append(i)
    return found


def _short_cluster_wants_value(arg: str, takes_value: Collection[str]) -> bool:
    """Whether `-pm` (flags run together) ends with an option whose value is the next word."""
    for k, letter in enumerate(arg[1:], 1):
        if f"-{letter}" in takes_value:
            return k == len(arg) - 1
    return False


@dataclass(frozen=True, slots=True)
class Misread:
    """A command line that would run as a task although its first word names a command."""

    word: str
    command: str
    corrected: tuple[str, ...]
    """The command line the person most likely meant (without the task's options)."""
    one_word: bool
    """The word stands alone, so it could be meant as a (very short) task."""

    @property
    def suggestion(self) -> str:
        """`kestrel sessions list`, quoted for a shell."""
        return "kestrel " + shlex.join(self.corrected)

    @property
    def problem(self) -> str:
        """The first line the person reads."""
        if self.word.lower() == self.command:
            return f'"{self.word}" is a command, not a task; did you mean `{self.suggestion}`?'
        return f'"{self.word}" is not a command; did you mean `{self.suggestion}`?'


def misread(args: Sequence[str], names: Collection[str], takes_value: Collection[str]) -> Misread:
    """What is wrong with a task command line whose first word is (nearly) a command name.

    Raise `LookupError` when the first word is no command's name: the line is a task.
    """
    words = positionals(args, takes_value)
    if not words:
        raise LookupError("no words")
    first = words[0]
    command = closest_command(args[first], names)
    if command is None:
        raise LookupError(args[first])
    rest = [a for a in args[first + 1 :] if a != "--"]
    return Misread(
        word=args[first],
        command=command,
        corrected=(command, *rest),
        one_word=len(words) == 1,
    )


ONE_WORD_HINT = 'Nothing was started. A one-word task needs a few more words: kestrel "..."'
"""The line after a refusal, for the rare one-word task that really was meant."""
