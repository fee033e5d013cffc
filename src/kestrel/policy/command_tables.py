"""The table behind `command_effects`: for each command, the options that run code or write
files, and a scanner that finds them however they are spelled (`--output FILE`,
`--output=FILE`, `--out=FILE`, `-oFILE`, `-xo FILE`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["runs-code", "writes-file", "other-repository"]


@dataclass(frozen=True, slots=True)
class Opt:
    """What an option does, and whether it takes a value (a written path, or anything)."""

    kind: Kind
    what: str
    value: Literal["none", "path", "any"] = "none"
    unless: str = ""
    """A start of the value that makes the option harmless (`pytest -p no:cacheprovider`)."""


@dataclass(frozen=True, slots=True)
class Spot:
    """Where an option of the table was found in a command's words."""

    at: int
    kind: Kind
    what: str
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """The options of one command (or subcommand) that matter."""

    options: Mapping[str, Opt]
    clusters: bool = True
    """Single-dash words are clusters of one-letter options (`-xzf`); False for `find`."""
    operands: Opt | None = None
    """What the command does to its operands (`tee FILE`), if it writes them."""
    last_operand: Opt | None = None
    """What it does to its last operand only (`cp SRC DEST`)."""


def scan_options(words: Sequence[str], start: int, table: Table) -> list[Spot]:
    """Every option of `table` among `words[start:]`, with its value when it takes one."""
    spots: list[Spot] = []
    operands: list[int] = []
    i = start
    while i < len(words):
        arg = words[i]
        if arg == "--":
            operands += range(i + 1, len(words))
            break
        found, used = _match(arg, words, i, table)
        spots += found
        if used == 0:
            operands.append(i)
        i += max(used, 1)
    if table.operands is not None:
        spots += [_spot(k, table.operands, words[k]) for k in operands]
    if table.last_operand is not None and len(operands) > 1:
        spots.append(_spot(operands[-1], table.last_operand, words[operands[-1]]))
    return spots


def _match(arg: str, words: Sequence[str], i: int, table: Table) -> tuple[list[Spot], int]:
    """(spots, words used) for one word; 0 words used means it is an operand."""
    nxt = words[i + 1] if i + 1 < len(words) else None
    if arg.startswith("--") or (arg.startswith("-") and not table.clusters and len(arg) > 1):
        name, eq, value = arg.partition("=")
        opt = table.options.get(name) or _abbreviation(name, table)
        if opt is None:
            return [], 1
        if opt.value == "none" or eq:
            return _spots(i, opt, value if eq else None), 1
        return _spots(i, opt, nxt), 2
    if not arg.startswith("-") or len(arg) < 2:
        return [], 0
    for k in range(1, len(arg)):
        opt = table.options.get("-" + arg[k])
        if opt is None:
            continue
        if opt.value == "none":
            return [_spot(i, opt, None)], 1
        rest = arg[k + 1 :]
        return (_spots(i, opt, rest), 1) if rest else (_spots(i, opt, nxt), 2)
    return [], 1


def _abbreviation(name: str, table: Table) -> Opt | None:
    """GNU and git accept any unambiguous start of a long option (`--out` for `--output`)."""
    if not name.startswith("--") or len(name) < 4:
        return None
    hits = [o for key, o in table.options.items() if key.startswith(name)]
    return hits[0] if hits else None


def _spots(at: int, opt: Opt, value: str | None) -> list[Spot]:
    if opt.unless and value is not None and value.startswith(opt.unless):
        return []
    return [_spot(at, opt, value)]


def _spot(at: int, opt: Opt, value: str | None) -> Spot:
    path = value if opt.value == "path" else None
    return Spot(at=at, kind=opt.kind, what=opt.what, path=path)


def _run(what: str, value: Literal["none", "path", "any"] = "any") -> Opt:
    return Opt("runs-code", what, value)


def _write(what: str = "writes a file", value: Literal["none", "path", "any"] = "path") -> Opt:
    return Opt("writes-file", what, value)


_OUTPUT = {"--output": _write("writes its output to a file")}
_WRITES_OPERANDS = _write("writes the file it names")

GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
GIT_GLOBAL_VALUE |= {"--config-env", "--super-prefix", "--exec-path"}

GIT_SUB: dict[str, Table] = {
    "log": Table(_OUTPUT),
    "show": Table(_OUTPUT),
    "diff": Table(_OUTPUT | {"--ext-diff": _run("runs an external diff program", "none")}),
    "whatchanged": Table(_OUTPUT),
    "range-diff": Table(_OUTPUT),
    "format-patch": Table(
        _OUTPUT | {"-o": _write(), "--output-directory": _write("writes patches to a folder")}
    ),
    "submodule": Table({}, operands=None),
    "archive": Table(_OUTPUT | {"-o": _write(), "--exec": _run("runs a program remotely")}),
    "bundle": Table({}, operands=_write("writes a bundle file")),
    "init": Table({}, operands=_write("creates a repository here")),
    "worktree": Table({}, operands=_write("creates a working tree here")),
    "apply": Table({"--unsafe-paths": Opt("writes-file", "patches files outside the tree")}),
    "grep": Table(
        {"-O": _run("opens files in a pager program", "none")}
        | {"--open-files-in-pager": _run("opens files in a pager program", "none")}
    ),
    "difftool": Table(
        {"-x": _run("runs a diff program"), "--extcmd": _run("runs a diff program")}
        | {"-t": _run("runs a diff tool"), "--tool": _run("runs a diff tool")}
        | {"-g": _run("runs the GUI diff tool", "none")}
    ),
    "mergetool": Table({"--tool-cmd": _run("runs a merge program")} | {"-t": _run("runs a tool")}),
    "clone": Table(
        {"-u": _run("runs a program on the remote side")}
        | {"--upload-pack": _run("runs a program on the remote side")}
        | {"--template": _run("copies hooks from a template folder")}
        | {"-c": _run("sets config that can run programs"), "--config": _run("sets config")},
        operands=_write("clones into this folder"),
    ),
    "fetch": Table({"--upload-pack": _run("runs a program on the remote side")}),
    "pull": Table({"--upload-pack": _run("runs a program on the remote side")}),
    "ls-remote": Table({"--upload-pack": _run("runs a program"), "-u": _run("runs a program")}),
    "push": Table({"--receive-pack": _run("runs a program"), "--exec": _run("runs a program")}),
    "rebase": Table({"-x": _run("runs a command after each commit"), "--exec": _run("runs")}),
    "send-email": Table({"--smtp-server": _run("may run a program as the mail server")}),
}
GIT_RUNS: dict[str, str] = {
    "filter-branch": "runs its filters as shell commands",
    "instaweb": "starts a web server and a browser",
    "bisect": "runs a test command (bisect run)",
    "submodule": "runs a command in each submodule (foreach)",
}
"""Subcommands that run code only with one word after them: (word it takes, what it does)."""
GIT_RUN_WORDS: dict[str, str] = {"submodule": "foreach", "bisect": "run"}

NODE_RUNNERS: dict[str, str] = {
    name: "runs a script from package.json"
    for name in ("run", "run-script", "rum", "urn", "test", "tst", "t", "start", "stop")
}
NODE_RUNNERS |= {name: "runs a package's program" for name in ("exec", "x", "dlx", "create")}
NODE_RUNNERS |= {name: "runs the install scripts of packages" for name in ("install", "i", "ci")}
NODE_RUNNERS |= {"add": "runs the install scripts of packages", "rebuild": "runs build scripts"}
NODE_RUNNERS |= {"restart": "runs a script from package.json", "init": "may run a create-* package"}

CARGO: dict[str, str] = {
    "install": "builds and installs a program outside the workspace",
    "uninstall": "removes a program outside the workspace",
}


def _pip_install(words: Sequence[str], sub: int) -> list[Spot]:
    spots = [Spot(sub, "runs-code", "runs the build code of the packages it installs")]
    return spots + scan_options(words, sub + 1, _PIP_PATHS)


_PIP_PATHS = Table(
    {"-t": _write(), "--target": _write(), "--prefix": _write(), "--root": _write()}
    | {"--src": _write(), "-d": _write(), "--dest": _write(), "--log": _write()}
    | {"--user": _write("installs into your home folder", "none")}
)
PIP: dict[str, Callable[[Sequence[str], int], list[Spot]]] = {
    "install": _pip_install,
    "download": lambda w, s: scan_options(w, s + 1, _PIP_PATHS),
    "wheel": _pip_install,
}

_FIND = Table(
    {k: _run("runs a command for each file", "none") for k in ("-exec", "-execdir", "-ok")}
    | {"-okdir": _run("runs a command for each file", "none")}
    | {"-delete": Opt("writes-file", "deletes the files it finds")}
    | {k: _write() for k in ("-fprint", "-fprintf", "-fprint0", "-fls")},
    clusters=False,
)
_TAR = Table(
    {"--to-command": _run("runs a program for each file")}
    | {"--checkpoint-action": _run("can run a program at checkpoints")}
    | {"-I": _run("runs a compression program"), "--use-compress-program": _run("runs")}
    | {"--rsh-command": _run("runs a remote shell program"), "-F": _run("runs a script")}
    | {"--info-script": _run("runs a script"), "--new-volume-script": _run("runs a script")}
    | {"-C": _write("works in another folder"), "--directory": _write("works elsewhere")}
    | {"-f": _write("reads or writes this archive"), "--file": _write("reads or writes this")}
    | {
        "-P": Opt("writes-file", "keeps absolute paths"),
        "--absolute-names": Opt("writes-file", "keeps absolute paths"),
    }
)
_RSYNC = Table(
    {"-e": _run("runs a remote shell program"), "--rsh": _run("runs a remote shell")}
    | {"--rsync-path": _run("runs a program on the remote side")}
    | {"--log-file": _write(), "--write-batch": _write(), "--only-write-batch": _write()},
    last_operand=_write("copies into this destination"),
)
_CURL = Table(
    {"-o": _write(), "--output": _write(), "--output-dir": _write(), "-D": _write()}
    | {"--dump-header": _write(), "-c": _write(), "--cookie-jar": _write()}
    | {"--trace": _write(), "--trace-ascii": _write(), "--libcurl": _write()}
    | {"--stderr": _write(), "-K": _run("reads options from a file"), "--config": _run("reads")}
)
_WGET = Table(
    {"-O": _write(), "--output-document": _write(), "-o": _write(), "--output-file": _write()}
    | {"-a": _write(), "--append-output": _write(), "-P": _write("saves into a folder")}
    | {"--directory-prefix": _write("saves into a folder")}
    | {"-e": _run("runs a wgetrc command"), "--execute": _run("runs a wgetrc command")}
)
_MAKE = Table(
    {"-f": _run("runs the recipes of another makefile"), "--file": _run("runs a makefile")}
    | {"--makefile": _run("runs another makefile"), "--eval": _run("evaluates make code")}
    | {"-C": _run("runs the makefile of another folder"), "--directory": _run("runs elsewhere")}
)
_PYTEST = Table(
    {"-p": Opt("runs-code", "loads a plugin", "any", unless="no:")}
    | {"--rootdir": Opt("other-repository", "moves the root", "any")}
    | {"--basetemp": _write(), "--junitxml": _write(), "--junit-xml": _write()}
    | {"--result-log": _write(), "--html": _write(), "--confcutdir": _run("reads conftest")}
    | {"-c": _run("reads another config file"), "--config-file": _run("reads another config")}
    | {"-o": _run("overrides ini options"), "--override-ini": _run("overrides ini options")}
)
_GO = Table(
    {"-toolexec": _run("runs a program for each tool"), "-exec": _run("runs the binaries with")}
    | {"-o": _write(), "-modfile": _run("uses another go.mod"), "-w": _write("writes go env")},
    clusters=False,
)
_UV = Table({"--with": _run("installs and runs extra packages")})
_SORT = Table({"-o": _write(), "--output": _write()})
_PATCH = Table({"-o": _write(), "--output": _write(), "-d": _write(), "--directory": _write()})
_ENV = Table({"-S": _run("splits a string into a command"), "--split-string": _run("splits")})
_SUDO = Table({"-e": _write("edits files as root", "none"), "--edit": _write("edits", "none")})
_CP = Table(
    {"-t": _write("copies into this folder"), "--target-directory": _write("copies here")},
    last_operand=_write("copies into this file"),
)
_DD = Table({})

SIMPLE: dict[str, Table] = {
    "find": _FIND,
    "tar": _TAR,
    "gtar": _TAR,
    "rsync": _RSYNC,
    "curl": _CURL,
    "wget": _WGET,
    "make": _MAKE,
    "gmake": _MAKE,
    "pytest": _PYTEST,
    "py.test": _PYTEST,
    "go": _GO,
    "uv": _UV,
    "sort": _SORT,
    "patch": _PATCH,
    "env": _ENV,
    "sudo": _SUDO,
    "tee": Table({}, operands=_WRITES_OPERANDS),
    "touch": Table({}, operands=_WRITES_OPERANDS),
    "truncate": Table({}, operands=_WRITES_OPERANDS),
    "mkdir": Table({}, operands=_WRITES_OPERANDS),
    "cp": _CP,
    "mv": _CP,
    "install": _CP,
    "ln": _CP,
}
