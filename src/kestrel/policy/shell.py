"""A shell command line read with tree-sitter-bash: every simple command it could run, and the
constructs that hide commands from a reader (substitutions, eval, inline code, heredocs)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

__all__ = [
    "Redirect",
    "Risk",
    "RiskKind",
    "ShellParse",
    "SimpleCommand",
    "Via",
    "git_key_runs_code",
    "is_interpreter",
    "parse_shell",
    "reads_program_from_stdin",
]

RiskKind = Literal[
    "substitution",
    "process-substitution",
    "eval",
    "source",
    "inline-code",
    "heredoc",
    "pipe-to-interpreter",
    "dynamic-command",
    "function-definition",
    "syntax-error",
]
Via = Literal["top", "substitution", "process-substitution", "wrapper", "inline-code"]
"""How a command was reached: directly, inside `$(..)`/backticks, inside `<(..)`/`>(..)`,
unwrapped from a wrapper (`sudo`, `timeout`, `find -exec`), or parsed from inline code
(`sh -c`, `eval`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    """One redirection: the operator as written (fd included) and its unquoted target."""

    op: str
    target: str
    """The file, fd or heredoc delimiter; "" when it is only known at run time."""
    body: str = ""
    """A heredoc's content."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleCommand:
    """One command that could run: its words with quotes removed, and where it sits."""

    words: tuple[str, ...]
    assignments: tuple[str, ...]
    text: str
    redirects: tuple[Redirect, ...]
    dynamic: bool
    """Some word is only known at run time ($VAR, $(..)); globs do not count."""
    pipeline: int
    stage: int
    nested: bool
    parent: int | None = None
    """Index in `ShellParse.commands` of the command that holds this one (its wrapper, the
    command whose word holds the substitution, the shell given the inline code)."""
    via: Via = "top"

    @property
    def name(self) -> str:
        """The command's base name (`/usr/bin/rm` -> `rm`), "" when there are no words."""
        return _base(self.words[0]) if self.words else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Risk:
    """A construct that hides what will run from someone reading the command."""

    kind: RiskKind
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellParse:
    """A parsed command line: its simple commands in source order, and its risky constructs."""

    source: str
    commands: tuple[SimpleCommand, ...]
    risks: tuple[Risk, ...]


def parse_shell(command: str) -> ShellParse:
    """Every simple command `command` could run, and the constructs that hide them."""
    walker = _Walker()
    walker.run(command, _Ctx(), depth=0)
    return ShellParse(source=command, commands=tuple(walker.commands), risks=tuple(walker.risks))


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


# -- parsing -------------------------------------------------------------------------------------

_MAX_DEPTH = 6  # nesting of inline code parsed again (sh -c "sh -c '...'")
_MAX_UNWRAP = 16
_SHORT = 80

_lock = threading.Lock()
_parser: Parser | None = None


def _parse(source: bytes) -> Tree:
    global _parser
    with _lock:
        if _parser is None:
            _parser = Parser(Language(tree_sitter_bash.language()))
        return _parser.parse(source)


@dataclass(frozen=True, slots=True)
class _Word:
    value: str
    dynamic: bool
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Ctx:
    """Where the walk is: the pipeline stage, the nesting, and what a command node inherits."""

    pipeline: int | None = None
    stage: int = 0
    nested: bool = False
    parent: int | None = None
    via: Via = "top"
    owner: int | None = None
    """The command whose words hold the node: the parent of substitutions found in it."""
    redirects: tuple[Redirect, ...] = ()
    attached: tuple[Node, ...] = ()
    """Redirect nodes of the statement, walked for substitutions on behalf of its command."""
    extra: tuple[_Word, ...] = ()
    text_end: int = 0


_DYNAMIC = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "process_substitution"}
    | {"arithmetic_expansion"}
)
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
_HEREDOC_PARTS = frozenset({"heredoc_start", "heredoc_body", "heredoc_end", "file_redirect"})
_PSEUDO = frozenset({"declaration_command", "unset_command", "test_command"})


class _Walker:
    """Collects commands and risks from a syntax tree, and from inline code parsed again."""

    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.risks: list[Risk] = []
        self._pipelines = 0

    def run(self, code: str, ctx: _Ctx, depth: int) -> None:
        src = code.encode("utf-8", "replace")
        # An explicit stack: `a && b && ...` nests one level per operator.
        stack = [(_parse(src).root_node, ctx)]
        while stack:
            node, at = stack.pop()
            stack.extend(reversed(self._visit(node, at, src, depth)))

    def _risk(self, kind: RiskKind, detail: str) -> None:
        self.risks.append(Risk(kind=kind, detail=detail))

    def _pipeline(self) -> int:
        self._pipelines += 1
        return self._pipelines - 1

    def _visit(self, node: Node, ctx: _Ctx, src: bytes, depth: int) -> list[tuple[Node, _Ctx]]:
        kind = node.type
        if node.is_missing:
            self._risk("syntax-error", f"missing {kind!r} at offset {node.start_byte}")
            return []
        if kind == "comment":
            return []
        if kind == "ERROR":
            self._risk("syntax-error", f"cannot parse {_short(_text(node))}")
        elif kind == "command":
            return self._command(node, ctx, src, depth)
        elif kind == "redirected_statement":
            return self._redirected(node, ctx, src)
        elif kind == "pipeline":
            p = self._pipeline()
            stages = [c for c in node.named_children if c.type != "comment"]
            return [(c, replace(ctx, pipeline=p, stage=i)) for i, c in enumerate(stages)]
        elif kind in ("command_substitution", "process_substitution"):
            plain = kind == "command_substitution"
            what = "command" if plain else "process"
            self._risk(
                "substitution" if plain else "process-substitution",
                f"{what} substitution {_short(_text(node))}",
            )
            via: Via = "substitution" if plain else "process-substitution"
            inner = _Ctx(nested=True, parent=ctx.owner, via=via)
            return [(c, inner) for c in _kids(node)]
        elif kind == "heredoc_redirect":
            self._risk("heredoc", f"heredoc {_short((_text(node).splitlines() or [''])[0])}")
            if node.parent is not None and node.parent.type == "redirected_statement":
                # Pipelines and lists tucked into the heredoc were taken by _redirected.
                return [(c, ctx) for c in _kids(node) if c.type in _HEREDOC_PARTS]
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            self._risk("function-definition", f"function {_text(name) if name else '?'}()")
        elif kind in _PSEUDO:
            return self._pseudo(node, ctx)
        return [(c, ctx) for c in _kids(node)]

    def _redirected(self, node: Node, ctx: _Ctx, src: bytes) -> list[tuple[Node, _Ctx]]:
        body = node.child_by_field_name("body")
        nodes = node.children_by_field_name("redirect")
        if body is None:  # `> file` alone truncates or creates it
            bare = tuple(v for r in nodes for v in _redirects(r))
            index = self._listed(node, ctx, [], ctx.redirects + bare)
            return [(r, _Ctx(nested=ctx.nested, owner=index)) for r in nodes]
        values: list[Redirect] = []
        extra: list[_Word] = []
        tail: list[Node] = []
        later: list[Node] = []
        end = body.end_byte
        for r in nodes:
            values += _redirects(r)
            extra += _spilled(r)
            if r.type != "heredoc_redirect":
                end = max(end, r.end_byte)
                continue
            for c in r.named_children:
                if c.type == "pipeline":
                    tail += [s for s in c.named_children if s.type != "comment"]
                elif c.type not in _HEREDOC_PARTS:
                    later.append(c)
                elif c.type in ("heredoc_start", "file_redirect"):
                    end = max(end, c.end_byte)
        if body.type == "command" and nodes:
            extra = _gap_words(src, body.end_byte, nodes[0].start_byte) + extra
        own = [s for s in body.named_children if s.type != "comment"]
        stages = (own if body.type == "pipeline" else [body]) + tail
        holder = len(stages) - len(tail) - 1
        pipeline, first = ctx.pipeline, ctx.stage
        if len(stages) > 1 and (body.type == "pipeline" or pipeline is None):
            pipeline, first = self._pipeline(), 0
        out: list[tuple[Node, _Ctx]] = []
        for i, stage in enumerate(stages):
            at = replace(ctx, pipeline=pipeline, stage=first + i)
            if i == holder:
                at = replace(at, redirects=ctx.redirects + tuple(values))
                if stage.type == "command":
                    at = replace(at, attached=tuple(nodes), extra=tuple(extra), text_end=end)
            out.append((stage, at))
        if stages[holder].type != "command":
            out += [(r, ctx) for r in nodes]
        return out + [(n, replace(ctx, pipeline=None, stage=0)) for n in later]

    def _command(self, node: Node, ctx: _Ctx, src: bytes, depth: int) -> list[tuple[Node, _Ctx]]:
        words: list[_Word] = []
        assignments: list[str] = []
        redirects = list(ctx.redirects)
        children: list[tuple[Node, int]] = []  # (node, index of its word or -1)
        for child in node.named_children:
            if child.type == "comment":
                continue
            if child.type in ("variable_assignment", "ERROR") or child.type in _REDIRECTS:
                if child.type == "variable_assignment":
                    assignments.append(_text(child))
                elif child.type in _REDIRECTS:
                    redirects += _redirects(child)
                    words += _spilled(child)
                children.append((child, -1))
                continue
            named = child.named_children
            words.append(_word(named[0] if child.type == "command_name" and named else child))
            if words[-1].dynamic:  # only dynamic words can hold commands
                children.append((child, len(words) - 1))
        words += ctx.extra
        place = ctx
        if ctx.pipeline is None:
            place = _Ctx(self._pipeline(), ctx.stage, ctx.nested, ctx.parent, ctx.via)
        text = src[node.start_byte : max(node.end_byte, ctx.text_end)].decode("utf-8", "replace")
        spans: list[tuple[int, int, int]] = []
        emit = _Emit(words=words, src=src, depth=depth, spans=spans)
        top = self._emit(emit, 0, len(words), tuple(assignments), tuple(redirects), text, place)
        nested = place.nested
        out = [(child, _Ctx(nested=nested, owner=_owner(spans, i, top))) for child, i in children]
        return out + [(r, _Ctx(nested=nested, owner=top)) for r in ctx.attached]

    def _emit(
        self,
        job: _Emit,
        lo: int,
        hi: int,
        assignments: tuple[str, ...],
        redirects: tuple[Redirect, ...],
        text: str,
        place: _Ctx,
        level: int = 0,
        dynamic: bool = False,
    ) -> int:
        """Record words[lo:hi] as one command, then the commands it wraps; return its index."""
        seg = job.words[lo:hi]
        index = len(self.commands)
        assert place.pipeline is not None
        command = SimpleCommand(
            words=tuple(w.value for w in seg),
            assignments=assignments,
            text=text,
            redirects=redirects,
            dynamic=dynamic or any(w.dynamic for w in seg),
            pipeline=place.pipeline,
            stage=place.stage,
            nested=place.nested,
            parent=place.parent,
            via=place.via,
        )
        self.commands.append(command)
        job.spans.append((lo, hi, index))
        if not seg:
            return index
        self._check(command, index, seg, place, job.depth)
        if level >= _MAX_UNWRAP:
            return index
        for a, b, inner_assignments, from_input in _wrapped(command.words):
            inner = replace(place, nested=True, parent=index, via="wrapper")
            start, end = job.words[lo + a].start, job.words[lo + b - 1].end
            inner_text = job.src[start:end].decode("utf-8", "replace")
            self._emit(
                job, lo + a, lo + b, inner_assignments, (), inner_text, inner, level + 1, from_input
            )
        return index

    def _check(
        self, command: SimpleCommand, index: int, seg: list[_Word], place: _Ctx, depth: int
    ) -> None:
        """Record the risks of one command, and parse code it runs from its command line."""
        name, words, short = command.name, command.words, _short(command.text)
        if seg[0].dynamic:
            self._risk("dynamic-command", f"command name {seg[0].value} is only known at run time")
        code: str | None = None
        via: Via = "inline-code"
        if name == "eval":
            self._risk("eval", f"eval runs its arguments as shell code: {short}")
            if not any(w.dynamic for w in seg[1:]):
                code = " ".join(words[1:])
        elif name in ("source", ".") and len(words) > 1:
            self._risk("source", f"{name} runs the script {words[1]} in this shell")
        elif name == "watch":
            rest = _options(words[1:], frozenset({"-n", "--interval", "-q", "--equexit"}))[1]
            if not any(w.dynamic for w in seg[1 + rest :]):
                code, via = " ".join(words[1 + rest :]), "wrapper"
        found = _inline_code(words)
        if found is not None:
            what, at = found
            self._risk("inline-code", f"{what}: {short}")
            if at is not None and at < len(seg) and not seg[at].dynamic:
                code = words[at]
        if place.stage > 0 and reads_program_from_stdin(words):
            wrapper = self.commands[place.parent] if place.parent is not None else None
            if place.via != "wrapper" or wrapper is None or wrapper.name not in ("xargs", "find"):
                self._risk("pipe-to-interpreter", f"a pipe feeds a program to {name}: {short}")
        if code and depth < _MAX_DEPTH:
            self.run(code, _Ctx(nested=True, parent=index, via=via), depth + 1)

    def _pseudo(self, node: Node, ctx: _Ctx) -> list[tuple[Node, _Ctx]]:
        """List `export X=1`, `unset A`, `[[ .. ]]` with their words (they run nothing else)."""
        if node.type == "test_command":
            words = [_Word(w, False, 0, 0) for w in _text(node).split()]
        else:
            keyword = node.children[0].type if node.child_count else ""
            words = [_Word(keyword, False, 0, 0)] + [
                _Word(_text(c), False, 0, 0) if c.type == "variable_assignment" else _word(c)
                for c in node.named_children
                if c.type != "comment"
            ]
        index = self._listed(node, ctx, words, ctx.redirects)
        plain = _Ctx(nested=ctx.nested, owner=index)
        return [(c, plain) for c in _kids(node)]

    def _listed(
        self, node: Node, ctx: _Ctx, words: list[_Word], redirects: tuple[Redirect, ...]
    ) -> int:
        """Record a command that is not a `command` node; return its index."""
        self.commands.append(
            SimpleCommand(
                words=tuple(w.value for w in words),
                assignments=(),
                text=_text(node),
                redirects=redirects,
                dynamic=any(c.type in _DYNAMIC for c in _descendants(node)),
                pipeline=self._pipeline() if ctx.pipeline is None else ctx.pipeline,
                stage=ctx.stage,
                nested=ctx.nested,
                parent=ctx.parent,
                via=ctx.via,
            )
        )
        return len(self.commands) - 1


@dataclass(frozen=True, slots=True)
class _Emit:
    """What every command emitted from one command node shares."""

    words: list[_Word]
    src: bytes
    depth: int
    spans: list[tuple[int, int, int]]


def _owner(spans: list[tuple[int, int, int]], word: int, top: int) -> int:
    """The innermost command (wrapper or wrapped) whose words include word number `word`."""
    best, best_lo = top, -1
    for lo, hi, index in spans:
        if lo <= word < hi and lo >= best_lo:
            best, best_lo = index, lo
    return best


# -- words ---------------------------------------------------------------------------------------


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _kids(node: Node) -> list[Node]:
    return [c for c in node.children if c.is_named or c.is_missing]


def _descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
_ANSI = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI_SIMPLE |= {"t": "\t", "v": "\v"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _dq_unescape(text: str) -> str:
    return _DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] in "xuU" and len(s) > 1:
            code = int(s[1:], 16)
            return chr(code) if code <= 0x10FFFF else m.group(0)
        if s[0] in "01234567":
            return chr(int(s, 8))
        if s[0] == "c" and len(s) == 2:
            return chr(ord(s[1]) & 0x1F)
        return _ANSI_SIMPLE.get(s, s)

    return _ANSI.sub(one, body)


def _word(node: Node) -> _Word:
    value, dynamic = _decode(node)
    return _Word(value, dynamic, node.start_byte, node.end_byte)


def _decode(node: Node) -> tuple[str, bool]:
    """A word's value with quotes and escapes removed; dynamic parts are kept as written."""
    kind, text = node.type, _text(node)
    if kind == "word":
        return _unescape(text), False
    if kind == "raw_string":
        return text[1:-1], False
    if kind == "ansi_c_string":
        return _ansi_c(text[2:-1]), False
    if kind in _DYNAMIC:
        return text, True
    if kind == "string":
        return _double_quoted(node)
    if kind == "concatenation":
        parts = [_decode(c) if c.is_named else (_text(c), False) for c in node.children]
        return "".join(p for p, _ in parts), any(d for _, d in parts)
    return text, False


def _double_quoted(node: Node) -> tuple[str, bool]:
    raw, base = node.text or b"", node.start_byte
    end = len(raw) - 1 if len(raw) > 1 and raw.endswith(b'"') else len(raw)
    out, pos, dynamic = [], 1, False
    for child in node.named_children:
        if child.type in _DYNAMIC:
            a, b = child.start_byte - base, child.end_byte - base
            out += [_dq_unescape(raw[pos:a].decode("utf-8", "replace")), _text(child)]
            pos, dynamic = b, True
    out.append(_dq_unescape(raw[pos:end].decode("utf-8", "replace")))
    return "".join(out), dynamic


def _gap_words(src: bytes, start: int, end: int) -> list[_Word]:
    """Words tree-sitter dropped between a command and its first redirect (`python3 - <<EOF`)."""
    out = []
    for m in re.finditer(rb"\S+", src[start:end]):
        out.append(
            _Word(m.group().decode("utf-8", "replace"), False, start + m.start(), start + m.end())
        )
    return out


def _redirects(node: Node) -> list[Redirect]:
    if node.type == "herestring_redirect":
        value = node.named_children[0] if node.named_child_count else None
        target = _decode(value) if value is not None else ("", False)
        return [Redirect(op="<<<", target="" if target[1] else target[0])]
    if node.type == "heredoc_redirect":
        op = next((_text(c) for c in node.children if not c.is_named), "<<")
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        delimiter = _unescape(_text(start)).strip("'\"") if start is not None else ""
        heredoc = Redirect(op=op, target=delimiter, body=_text(body) if body is not None else "")
        inner = [r for c in node.named_children if c.type == "file_redirect" for r in _redirects(c)]
        return [heredoc, *inner]
    if node.type != "file_redirect":
        return []
    destinations = node.children_by_field_name("destination")
    op = "".join(_text(c) for c in node.children if c.type == "file_descriptor" or not c.is_named)
    target = _decode(destinations[0]) if destinations else ("", False)
    return [Redirect(op=op, target="" if target[1] else target[0])]


def _spilled(node: Node) -> list[_Word]:
    """Arguments tree-sitter took for extra redirect targets: `echo > f x` passes x to echo."""
    if node.type == "heredoc_redirect":
        return [w for c in node.named_children if c.type == "file_redirect" for w in _spilled(c)]
    if node.type != "file_redirect":
        return []
    return [_word(d) for d in node.children_by_field_name("destination")[1:]]


# -- wrappers and inline code --------------------------------------------------------------------

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
    programs = [args[i + 1] for i, a in enumerate(args[:end]) if a in ("-e", "--source")]
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
