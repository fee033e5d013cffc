"""Commands that run other code given on their command line: shells and interpreters with inline
code, wrappers (`sudo`, `timeout`, `xargs`, `find -exec`), and git options that run programs."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kestrel.policy.shell_words import _base

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)?)?")
_OTHER_INTERPRETERS = frozenset(
    {"node", "nodejs", "bun", "deno", "perl", "ruby", "php", "lua", "pwsh", "powershell"}
    | {"osascript", "tclsh", "Rscript"}
)


def is_interpreter(name: str) -> bool:
    """Whether `name` is a shell or a language interpreter that runs code it is given."""
    return name in SHELLS or name in _OTHER_INTERPRETERS or _PYTHON.fullmatch(name) is not None


def reads_program_from_stdin(words: Sequence[str]) -> bool:
    """Whether the interpreter invoked as `words` takes its program from standard input."""
    if not words or not is_interpreter(_base(words[0])) or _inline_code(words) is not None:
        return False
    args = words[1:]
    shell = _base(words[0]) in SHELLS
    options, end = _options(args, _SHELL_VALUE if shell else _PYTHON_VALUE, "-+" if shell else "-")
    if shell and any(o.startswith("-") and not o.startswith("--") and "s" in o for o in options):
        return True
    if any(o in ("-m", "-r", "--require") or o.startswith("--require=") for o in options):
        return False  # python -m runs a module; node -r preloads one and still reads a script
    return end >= len(args) or args[end] == "-"


_GIT_CODE_KEY = re.compile(
    r"core\.(pager|sshcommand|editor|fsmonitor|hookspath|askpass|gitproxy)|sequence\.editor"
    r"|diff\.external|gpg(\.\w+)?\.program|credential\.helper|uploadpack\.packobjectshook"
    r"|alias\..+|pager\..+|(diff|merge|filter)\..+\.(textconv|command|driver|clean|smudge|process)",
    re.IGNORECASE,
)


def git_key_runs_code(key: str) -> bool:
    """Whether a git config key names a program git will run (core.pager, alias.*, ...)."""
    return _GIT_CODE_KEY.fullmatch(key) is not None


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_SUDO_VALUE = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user"})
_SUDO_VALUE |= {"--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type"}
_XARGS_VALUE = frozenset({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file"})
_XARGS_VALUE |= {"--delimiter", "--max-args", "--max-procs", "--max-chars", "--max-lines"}
_WRAPPERS: dict[str, frozenset[str]] = {  # wrapper -> its options that take a separate value
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-P"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "xargs": _XARGS_VALUE,
    "sudo": _SUDO_VALUE,
    "doas": frozenset({"-u", "-C"}),
}
_RUNS_NOTHING = frozenset({"-v", "-V", "-l", "-e", "-k", "-K", "--list", "--validate", "--edit"})
_EXEC_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _options(
    args: Sequence[str], takes_value: frozenset[str] = frozenset(), prefixes: str = "-"
) -> tuple[list[str], int]:
    """The leading options of `args`, and the index of the first operand (past any `--`)."""
    options: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return options, i + 1
        if len(arg) < 2 or arg[0] not in prefixes:
            break
        options.append(arg)
        i += 2 if arg in takes_value else 1
    return options, i


def _wrapped(words: Sequence[str]) -> list[tuple[int, int, tuple[str, ...], bool]]:
    """Commands that `words` runs from its own command line, as (start, end, assignments,
    fed from input) slices of `words`: `sudo X`, `timeout 5 X`, `find -exec X ;`."""
    name = _base(words[0])
    if name == "find":
        out: list[tuple[int, int, tuple[str, ...], bool]] = []
        i = 1
        while i < len(words):
            if words[i] in _EXEC_ACTIONS:
                j = i + 1
                while j < len(words) and words[j] not in (";", "+"):
                    j += 1
                if j > i + 1:
                    out.append((i + 1, j, (), False))
                i = j
            i += 1
        return out
    takes = _WRAPPERS.get(name)
    if takes is None:
        return []
    options, i = _options(words[1:], takes)
    i += 1
    while name == "env" and i < len(words) and words[i] == "-":
        i += 1  # `env -` is `env -i`
    if name in ("command", "sudo") and any(o in _RUNS_NOTHING for o in options):
        return []
    if name == "timeout":
        i += 1  # the duration
    assignments = []
    while name in ("env", "sudo", "doas") and i < len(words) and _ASSIGNMENT.fullmatch(words[i]):
        assignments.append(words[i])
        i += 1
    if i >= len(words):
        return []
    return [(i, len(words), tuple(assignments), name == "xargs")]


_SHELL_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_PYTHON_VALUE = frozenset({"-W", "-X", "-m", "-c"})
_PERL_CODE = re.compile(r"-[lnpaswWtTuUX0]*[eE].*", re.DOTALL)
_RUBY_CODE = re.compile(r"-[nplasdvwy]*e.*", re.DOTALL)
_AWK_RUNS = re.compile(r"\bsystem\s*\(|\|\s*getline|\|\s*\"|\|&")
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_JS_CODE = frozenset({"-e", "-p", "--eval", "--print", "--eval=", "--print="}).__contains__
_PYTHON_CODE = frozenset({"-c"}).__contains__
_CODE_FLAGS: dict[str, tuple[str, Callable[[str], bool]]] = {  # interpreter -> code option test
    "node": ("JavaScript", _JS_CODE),
    "nodejs": ("JavaScript", _JS_CODE),
    "bun": ("JavaScript", _JS_CODE),
    "perl": ("Perl", lambda o: _PERL_CODE.fullmatch(o) is not None),
    "ruby": ("Ruby", lambda o: _RUBY_CODE.fullmatch(o) is not None),
    "php": ("PHP", frozenset({"-r", "-R", "-B", "-E", "--run"}).__contains__),
    "osascript": ("AppleScript", frozenset({"-e"}).__contains__),
}


def _inline_code(words: Sequence[str]) -> tuple[str, int | None] | None:
    """Code given on the command line, as (what runs it, index of the word when it is shell
    code to parse again, else None); None when there is none."""
    name, args = _base(words[0]), words[1:]
    if name in SHELLS:
        options, end = _options(args, _SHELL_VALUE, "-+")
        if any(o[0] == "-" and o[:2] != "--" and "c" in o for o in options):
            return f"{name} -c runs inline shell code", end + 1
        return None
    if name == "su":
        at = next((i for i, a in enumerate(args) if a in ("-c", "--command")), None)
        return None if at is None else ("su -c runs inline shell code as another user", at + 2)
    if name == "deno":
        return (
            ("deno eval runs inline JavaScript code", None)
            if tuple(args[:1]) == ("eval",)
            else None
        )
    if _PYTHON.fullmatch(name) or name in _CODE_FLAGS:
        language, is_code = _CODE_FLAGS.get(name, ("Python", _PYTHON_CODE))
        options = _options(args, _PYTHON_VALUE)[0]
        if "-m" in options:  # what follows `python -m mod` belongs to the module
            options = options[: options.index("-m")]
        if any(is_code(o) or is_code(o.partition("=")[0] + "=") for o in options):
            return f"{name} runs inline {language} code", None
        return None
    if name in _AWKS:
        return _awk(args)
    if name == "find" and any(a in _EXEC_ACTIONS for a in args):
        action = next(a for a in args if a in _EXEC_ACTIONS)
        return f"find {action} runs a command for each file found", None
    if name == "xargs":
        return "xargs runs a command built from its input", None
    if name == "git":
        return _git_inline(args)
    return None


def _awk(args: Sequence[str]) -> tuple[str, int | None] | None:
    takes = frozenset({"-F", "-v", "-f", "-e", "--source", "--file", "--assign"})
    options, end = _options(args, takes)
    programs = [
        args[i + 1]
        for i, a in enumerate(args[:end])
        if a in ("-e", "--source") and i + 1 < len(args)
    ]
    programs += [o.partition("=")[2] for o in options if o.startswith("--source=")]
    if not programs and not any(o in ("-f", "--file") or o.startswith("--file=") for o in options):
        programs = list(args[end : end + 1])
    if any(_AWK_RUNS.search(p) for p in programs):
        return "awk runs shell commands from its program (system, pipes)", None
    return None


def _git_inline(args: Sequence[str]) -> tuple[str, int | None] | None:
    takes = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
    options, end = _options(args, takes)
    pairs = [args[i + 1] for i, a in enumerate(args[:end]) if a == "-c" and i + 1 < len(args)]
    pairs += [o[2:] for o in options if o.startswith("-c") and len(o) > 2]
    pairs += [o.partition("=")[2] for o in options if o.startswith("--config-env=")]
    for pair in pairs:
        key = pair.partition("=")[0]
        if git_key_runs_code(key):
            return f"git -c {key}= makes git run a program", None
    for arg in args[end:]:
        option = arg.partition("=")[0]
        if option in ("--upload-pack", "--receive-pack", "--exec"):
            return f"git {option} makes git run a program", None
    if end < len(args) and args[end] == "rebase" and "-x" in args[end:]:
        return "git rebase -x runs a command after each commit", None
    return None
