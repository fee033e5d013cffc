"""A shell command line read with tree-sitter-bash: every simple command it could run, and the
constructs that hide commands from a reader (substitutions, eval, inline code, heredocs)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from kestrel.policy.shell_certainty import (
    code_word,
    heredocs_agree,
    misplaced_reserved_word,
    number_target,
    odd_node,
    split_redirect,
)
from kestrel.policy.shell_options import (
    _inline_code,
    _options,
    _wrapped,
    git_key_runs_code,
    is_interpreter,
    reads_program_from_stdin,
)
from kestrel.policy.shell_types import Risk, RiskKind, ShellParse, SimpleCommand, Via
from kestrel.policy.shell_words import (
    _DYNAMIC,
    Redirect,
    _descendants,
    _gap_words,
    _kids,
    _owner,
    _redirects,
    _short,
    _spilled,
    _text,
    _Word,
    _word,
)

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


def parse_shell(command: str) -> ShellParse:
    """Every simple command `command` could run, and the constructs that hide them."""
    walker = _Walker()
    if "\x00" in command:  # no shell can be handed it: what runs is anyone's guess
        walker.risks.append(Risk(kind="syntax-error", detail="a NUL character in the command"))
    walker.run(command, _Ctx(), depth=0)
    return ShellParse(source=command, commands=tuple(walker.commands), risks=tuple(walker.risks))


# -- parsing -------------------------------------------------------------------------------------

_MAX_DEPTH = 6  # nesting of inline code parsed again (sh -c "sh -c '...'")
_MAX_UNWRAP = 16

_lock = threading.Lock()
_parser: Parser | None = None


def _parse(source: bytes) -> Tree:
    global _parser
    with _lock:
        if _parser is None:
            _parser = Parser(Language(tree_sitter_bash.language()))
        return _parser.parse(source)


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
        root = _parse(src).root_node
        if b"<<" in src and not heredocs_agree(code, root):
            self._risk("syntax-error", "its heredocs could not be read with certainty")
        if b"\n" in src and split_redirect(root, src):
            self._risk("syntax-error", "a redirection whose target is on the next line")
        if number_target(root, src):
            self._risk("syntax-error", "a redirection whose target bash reads as a descriptor")
        odd = odd_node(root)
        if odd is not None:
            self._risk("syntax-error", odd)
        seen = len(self.risks)
        # An explicit stack: `a && b && ...` nests one level per operator.
        stack = [(root, ctx)]
        while stack:
            node, at = stack.pop()
            stack.extend(reversed(self._visit(node, at, src, depth)))
        unread = any(r.kind == "syntax-error" for r in self.risks[seen:])
        if root.has_error and not unread:
            # A missing quote or parenthesis deep inside a word: tree-sitter patched it up.
            self._risk("syntax-error", "an unclosed quote, bracket or construct")

    def _risk(
        self, kind: RiskKind, detail: str, command: int | None = None, at: int | None = None
    ) -> None:
        self.risks.append(Risk(kind=kind, detail=detail, command=command, at=at))

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
            first = _short((_text(node).splitlines() or [""])[0])
            self._risk("heredoc", f"heredoc {first}", ctx.owner)
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
        before: list[tuple[Node, _Ctx]] = []
        while body.type == "list":
            # tree-sitter hangs `a && b <<EOF` on the whole list; bash gives it to `b` alone.
            kids = [c for c in body.named_children if c.type != "comment"]
            before += [(c, ctx) for c in kids[:-1]]
            body = kids[-1]
        return before + self._redirected_body(node, body, nodes, ctx, src)

    def _redirected_body(
        self, node: Node, body: Node, nodes: list[Node], ctx: _Ctx, src: bytes
    ) -> list[tuple[Node, _Ctx]]:
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
        self._check(command, index, seg, place, job)
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
        self, command: SimpleCommand, index: int, seg: list[_Word], place: _Ctx, job: _Emit
    ) -> None:
        """Record the risks of one command, and parse code it runs from its command line."""
        depth = job.depth
        name, words, short = command.name, command.words, _short(command.text)
        if seg[0].dynamic:
            self._risk("dynamic-command", f"command name {seg[0].value} is only known at run time")
        if misplaced_reserved_word(seg[0].value, job.src[seg[0].start : seg[0].end]):
            self._risk("syntax-error", f"the reserved word {seg[0].value} where a command belongs")
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
            self._risk("inline-code", f"{what}: {short}", index, code_word(words))
            if at is not None and at < len(seg) and not seg[at].dynamic:
                code = words[at]
        if place.stage > 0 and reads_program_from_stdin(words):
            wrapper = self.commands[place.parent] if place.parent is not None else None
            if place.via != "wrapper" or wrapper is None or wrapper.name not in ("xargs", "find"):
                detail = f"a pipe feeds a program to {name}: {short}"
                self._risk("pipe-to-interpreter", detail, index)
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
