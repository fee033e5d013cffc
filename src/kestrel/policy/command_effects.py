"""Options and subcommands that make an ordinary command run code or write files.

`git log` reads history, but `git log --output=/etc/x` writes a file and `git submodule foreach`
runs one. A rule that allows a command by its first words (`Bash(git log:*)`) is about the
ordinary use; the table here finds the uses that are not, so the gate can ask about them. Each
finding names the word that makes it so (`at`): a rule whose own words reach that far (`Bash(git
log --output=out.txt)`, `Bash(npm run test *)`) chose it knowingly and covers it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kestrel.policy.command_tables import (
    CARGO,
    GIT_GLOBAL_VALUE,
    GIT_RUN_WORDS,
    GIT_RUNS,
    GIT_SUB,
    NODE_RUNNERS,
    PIP,
    SIMPLE,
    Kind,
    Spot,
    scan_options,
)
from kestrel.policy.sed_script import sed_commands
from kestrel.policy.shell_options import git_key_runs_code
from kestrel.policy.shell_words import _base

__all__ = ["Effect", "EffectKind", "effects"]

EffectKind = Kind


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """One thing a command does beyond its ordinary use."""

    kind: EffectKind
    reason: str
    at: int
    """The index (in the command's words) of the word that does it."""
    path: str | None = None
    """The file it writes, when the command line names it."""


def effects(words: Sequence[str]) -> list[Effect]:
    """What `words` does beyond the ordinary: code it runs, files it writes."""
    if not words:
        return []
    name = _base(words[0])
    python = re.fullmatch(r"(python|pypy)(\d+(\.\d+)?)?", name) is not None
    check = _CHECKS.get(name) or (_python if python else None)
    found = check(words) if check is not None else []
    table = SIMPLE.get(name)
    if table is not None:
        found += _spots(name, words, 1, scan_options(words, 1, table))
    return found


def _spots(prefix: str, words: Sequence[str], start: int, spots: list[Spot]) -> list[Effect]:
    out = []
    for spot in spots:
        shown = f"{prefix} {words[spot.at]}" if spot.at < len(words) else prefix
        out.append(
            Effect(
                kind=spot.kind,
                reason=f"`{_short(shown)}` {spot.what}",
                at=spot.at,
                path=spot.path,
            )
        )
    return out


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


# -- git -----------------------------------------------------------------------------------------


def _git(words: Sequence[str]) -> list[Effect]:
    out: list[Effect] = []
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        out += _git_global(words, i)
        i += 2 if words[i] in GIT_GLOBAL_VALUE else 1
    if i >= len(words):
        return out
    sub = words[i]
    rest = words[i + 1 :]
    for j, arg in enumerate(rest, start=i + 1):
        if re.match(r"(ext|fd)::", arg) or re.match(r"--?\w[\w-]*=(ext|fd)::", arg):
            out.append(_effect("runs-code", f"git {sub} {arg!r} runs a program (ext:: URL)", j))
    if sub in GIT_RUNS:
        word = GIT_RUN_WORDS.get(sub)
        hits = [j for j, w in enumerate(rest, start=i + 1) if w == word] if word else [i]
        out += [_effect("runs-code", f"`git {sub}` {GIT_RUNS[sub]}", j) for j in hits[:1]]
    table = GIT_SUB.get(sub)
    if table is not None:
        out += _spots(f"git {sub}", words, i + 1, scan_options(words, i + 1, table))
    return out


def _git_global(words: Sequence[str], i: int) -> list[Effect]:
    arg = words[i]
    option, eq, value = arg.partition("=")
    if option == "-C" and i + 1 < len(words) and words[i + 1].startswith(("/", "~", "$", "..")):
        return [_effect("other-repository", f"`git -C {words[i + 1]}` works in another folder", i)]
    if option in ("--git-dir", "--work-tree"):
        return [_effect("other-repository", f"`git {option}` points git at another tree", i)]
    if option == "--exec-path" and eq:
        return [_effect("runs-code", f"`git --exec-path={value}` runs git commands from there", i)]
    if option in ("-c", "--config-env") or (option.startswith("-c") and len(option) > 2):
        following = words[i + 1] if i + 1 < len(words) else ""
        pair = following if option in ("-c", "--config-env") and not eq else arg[2:]
        if option == "--config-env":
            pair = value or following
        key = pair.partition("=")[0]
        if git_key_runs_code(key) or key.lower().startswith(("core.", "include.", "includeif.")):
            return [_effect("runs-code", f"`git -c {key}=` can make git run a program", i)]
    return []


# -- the others ----------------------------------------------------------------------------------


def _node_runner(words: Sequence[str]) -> list[Effect]:
    name = _base(words[0])
    if name == "npx" or name == "bunx":
        return [_effect("runs-code", f"`{name}` runs a package's program", 0)]
    sub = next((k for k, w in enumerate(words[1:], 1) if not w.startswith("-")), None)
    if sub is None:
        return []
    what = NODE_RUNNERS.get(words[sub])
    if what is None and name == "yarn" and words[sub] not in _YARN_BUILTIN:
        what = "runs a script from package.json"
    if what is None:
        return []
    return [_effect("runs-code", f"`{name} {words[sub]}` {what}", sub)]


_YARN_BUILTIN = frozenset(
    {"add", "remove", "install", "info", "list", "why", "outdated", "audit", "config", "cache"}
    | {"init", "upgrade", "version", "versions", "help", "licenses", "bin", "global", "link"}
)


def _pip(words: Sequence[str]) -> list[Effect]:
    sub = next((k for k, w in enumerate(words[1:], 1) if not w.startswith("-")), None)
    if sub is None:
        return []
    table = PIP.get(words[sub])
    return [] if table is None else _spots("pip", words, sub + 1, table(words, sub))


def _python(words: Sequence[str]) -> list[Effect]:
    if "-m" not in words[1:3]:
        return []
    at = words.index("-m")
    module = words[at + 1] if at + 1 < len(words) else ""
    inner = [module, *words[at + 2 :]]
    found = effects(inner) if module in ("pytest", "pip", "pip3") else []
    return [Effect(kind=e.kind, reason=e.reason, at=e.at + at + 1, path=e.path) for e in found]


def _cargo(words: Sequence[str]) -> list[Effect]:
    sub = next((k for k, w in enumerate(words[1:], 1) if not w.startswith(("-", "+"))), None)
    if sub is None or words[sub] not in CARGO:
        return []
    return [_effect("runs-code", f"`cargo {words[sub]}` {CARGO[words[sub]]}", sub)]


def _sed(words: Sequence[str]) -> list[Effect]:
    out = _sed_in_place(words)
    programs: list[tuple[int, str]] = []
    expecting = False
    first_operand = True
    for k, arg in enumerate(words[1:], 1):
        if expecting:
            programs.append((k, arg))
            expecting = False
        elif arg in ("-e", "--expression"):
            expecting, first_operand = True, False
        elif arg.startswith("--expression="):
            programs.append((k, arg.partition("=")[2]))
            first_operand = False
        elif arg in ("-f", "--file") or arg.startswith("--file="):
            first_operand = False
        elif arg.startswith("-") and len(arg) > 1:
            continue
        elif first_operand:
            programs.append((k, arg))
            first_operand = False
    for k, program in programs:
        runs, writes = sed_commands(program)
        if runs:
            out.append(_effect("runs-code", "a sed `e` command runs shell commands", k))
        if writes:
            out.append(_effect("writes-file", "a sed `w` command writes a file", k))
    return out


def _sed_in_place(words: Sequence[str]) -> list[Effect]:
    """`sed -i` rewrites each file it is given."""
    flags = [w for w in words[1:] if w.startswith("-") and len(w) > 1]
    if not any(f.startswith("--in-place") or (f[1] != "-" and "i" in f) for f in flags):
        return []
    scripted = any(f in ("-e", "-f", "--expression", "--file") for f in flags)
    operands = [k for k, w in enumerate(words[1:], 1) if not w.startswith("-") or w == "-"]
    values = {k + 1 for k, w in enumerate(words) if w in ("-e", "-f", "--expression", "--file")}
    operands = [k for k in operands if k not in values]
    files = operands if scripted else operands[1:]
    return [_effect("writes-file", "`sed -i` rewrites the file", k, words[k]) for k in files]


def _go(words: Sequence[str]) -> list[Effect]:
    sub = next((k for k, w in enumerate(words[1:], 1) if not w.startswith("-")), None)
    if sub is not None and words[sub] == "generate":
        return [_effect("runs-code", "`go generate` runs the commands its directives name", sub)]
    return []


def _uv(words: Sequence[str]) -> list[Effect]:
    name = _base(words[0])
    if name == "uvx":
        return [_effect("runs-code", "`uvx` runs a package's program", 0)]
    subs = [k for k, w in enumerate(words[1:], 1) if not w.startswith("-")][:2]
    said = [words[k] for k in subs]
    if said[:1] == ["run"] or said == ["tool", "run"]:
        return [_effect("runs-code", f"`uv {' '.join(said)}` runs a program", subs[0])]
    if said in (["pip", "install"], ["add"], ["sync"]):
        return [_effect("runs-code", "`uv` installs packages, running their build code", subs[0])]
    return []


def _awk(words: Sequence[str]) -> list[Effect]:
    out = []
    for k, arg in enumerate(words[1:], 1):
        if re.search(r"(print|printf)[^;{}]*>\s*\"|(print|printf)[^;{}]*>>", arg):
            out.append(_effect("writes-file", "an awk program writes a file (print > file)", k))
        if arg in ("-i", "--include") or arg.startswith(("--load", "-l")):
            out.append(_effect("runs-code", "`awk -i`/`-l` loads code from a file", k))
    return out


def _dd(words: Sequence[str]) -> list[Effect]:
    return [
        _effect("writes-file", "`dd of=` writes the file", k, w[3:])
        for k, w in enumerate(words[1:], 1)
        if w.startswith("of=")
    ]


def _effect(kind: EffectKind, reason: str, at: int, path: str | None = None) -> Effect:
    return Effect(kind=kind, reason=reason, at=at, path=path)


_CHECKS: dict[str, Callable[[Sequence[str]], list[Effect]]] = {
    "git": _git,
    "npm": _node_runner,
    "pnpm": _node_runner,
    "yarn": _node_runner,
    "bun": _node_runner,
    "npx": _node_runner,
    "bunx": _node_runner,
    "pip": _pip,
    "pip3": _pip,
    "cargo": _cargo,
    "dd": _dd,
    "go": _go,
    "uv": _uv,
    "uvx": _uv,
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
}
