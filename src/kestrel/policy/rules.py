"""Permission rules: `Tool(specifier)` strings in `allow`, `ask` and `deny` lists.

A rule names a tool, a family of tools or an MCP server, optionally narrowed by a specifier:

- `Bash(npm test)` is one exact command; `Bash(git diff:*)` every command starting with those
  words; `Bash(npm run test *)` a glob over the command's words. Quotes and backslashes work as
  in the shell (`Bash(python -c "print(1)")`), so `*`, `(` and `)` can be plain text.
- `BashExact(...)` is one whole command line, character for character (heredocs included);
  `BashRegex(...)` a regular expression the whole command line must match; `BashHeredoc(cat)`
  a command fed by a heredoc whose body is plain text (`cat <<'EOF' > file`).
- `Read(src/**)`, `Edit(docs/**)`: paths, gitignore style. A pattern without a slash (`.env`,
  `*.pem`) matches at any depth; `/x` and `./x` are relative to the workspace, `~/x` to the home
  directory and `//x` is the absolute path `/x`. A rule for a folder covers what is inside it.
- `WebFetch(domain:docs.python.org)`: that host and its subdomains.
- `mcp__server` (every tool of that server), `mcp__server__tool`.
- A tool's own name (`read_file`, `bash(pytest:*)`) works as well as its family's.

`Read` rules cover every tool that reads files by path; `Edit` (alias `Write`) every tool that
writes them. A denied read also denies editing the same file, since an edit shows its content.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kestrel.policy.bash_spec import SpecError, balanced, read_spec
from kestrel.policy.rule_paths import domain_matches, path_matches
from kestrel.policy.subject import CallSubject, CommandPart

RuleList = Literal["allow", "ask", "deny"]
FAMILIES = {"bash": "Bash", "read": "Read", "edit": "Edit", "write": "Edit", "webfetch": "WebFetch"}
FAMILIES |= {"bashexact": "Bash", "bashregex": "Bash", "bashheredoc": "Bash"}
"""Family names a rule may use (any case), and the family each stands for."""
Form = Literal["words", "exact", "regex", "heredoc"]
_FORMS: dict[str, Form] = {"bashexact": "exact", "bashregex": "regex", "bashheredoc": "heredoc"}

_RULE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_SAFE_ENV = frozenset(
    {"CI", "NODE_ENV", "RUST_BACKTRACE", "RUST_LOG", "NO_COLOR", "FORCE_COLOR", "TERM", "TZ"}
    | {"LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "DEBUG", "VERBOSE"}
)
"""Variables whose assignment before a command does not change what a rule about it means."""


class RuleError(ValueError):
    """A rule string that cannot be read; the message says what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One parsed rule and where it was written."""

    text: str
    tool: str
    """The tool, family (`Bash`, `Read`, `Edit`, `WebFetch`) or MCP name the rule is about."""
    specifier: str | None
    origin: str = ""
    form: Form = "words"
    """How a Bash rule matches: by words (`Bash`), the whole line as written (`BashExact`), a
    regex over the whole line (`BashRegex`), or a command fed by a plain heredoc."""

    @property
    def family(self) -> str | None:
        """`Bash`, `Read`, `Edit` or `WebFetch` when the rule names a family, else `None`."""
        return FAMILIES.get(self.tool.lower())

    @property
    def exact(self) -> bool:
        """True when the rule names one command or one path, with no wildcard."""
        spec = self.specifier
        if spec is None or self.form in ("regex", "heredoc"):
            return False
        if self.form == "exact":
            return True
        if self.family == "Bash":
            read = read_spec(spec)
            return read.glob is None and not read.prefix
        return not any(ch in spec for ch in "*?[")

    @property
    def reach(self) -> int:
        """How many leading words of a command a Bash rule names as plain text; options past
        them that run code or write files were not chosen by the rule's author."""
        if self.specifier is None:
            return 1 << 30
        if self.form in ("words", "heredoc"):
            return read_spec(self.specifier).literal
        return 0

    def describe(self) -> str:
        """The rule as written, with the file it came from."""
        return f"{self.text} ({self.origin})" if self.origin else self.text


def parse_rule(text: str, origin: str = "") -> Rule:
    """Read one rule string; raises `RuleError` saying what is wrong."""
    match = _RULE.match(text)
    form = _FORMS.get(match.group(1).lower(), "words") if match else "words"
    if match is None or (form in ("words", "heredoc") and not balanced(match.group(2) or "")):
        raise RuleError(
            f"{text!r} is not a rule: expected Tool or Tool(specifier), "
            'e.g. "Bash(npm test)", "Read(src/**)", "Bash(git diff:*)"; quote a parenthesis '
            "that is part of a command, or use BashExact(...)"
        )
    tool, spec = match.group(1), match.group(2)
    if form != "words":
        return _whole_line_rule(text, tool, spec, form, origin)
    if spec is not None:
        spec = spec.strip()
        if not spec or spec in ("*", "**"):
            spec = None  # "Bash()" and "Bash(*)" both mean every command.
    family = FAMILIES.get(tool.lower())
    if family == "WebFetch" and spec is not None and not spec.startswith("domain:"):
        raise RuleError(f"{text!r}: WebFetch rules name a host as domain:HOST")
    if family == "Bash" and spec is not None:
        try:
            read_spec(spec)
        except SpecError as exc:
            raise RuleError(f"{text!r}: {exc}") from None
    return Rule(text=text.strip(), tool=tool, specifier=spec, origin=origin)


def _whole_line_rule(text: str, tool: str, spec: str | None, form: Form, origin: str) -> Rule:
    """`BashExact(...)`, `BashRegex(...)`, `BashHeredoc(...)`: the body is taken as written."""
    body = (spec or "").strip()
    if not body:
        raise RuleError(f"{text!r}: {tool}(...) needs a command, e.g. {tool}(cat)")
    if form == "regex":
        try:
            _regex(body)
        except re.error as exc:
            raise RuleError(f"{text!r}: not a regular expression ({exc})") from None
    if form == "heredoc":
        try:
            read = read_spec(body)
        except SpecError as exc:
            raise RuleError(f"{text!r}: {exc}") from None
        if read.glob is not None or read.prefix or not read.words:
            raise RuleError(f"{text!r}: BashHeredoc names the command's first words, no *")
    return Rule(text=text.strip(), tool=tool, specifier=body, origin=origin, form=form)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """Which list decided, by which rule, and for which part of the call."""

    verdict: RuleList
    rule: Rule
    part: str
    """The command or path the rule matched."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleVerdict:
    """What the rules say about one call: `None` when no rule covers all of it."""

    verdict: RuleList | None
    hit: Hit | None = None
    reason: str = ""
    exactly_allowed: frozenset[str] = frozenset()
    """Commands and paths an exact allow rule names: the classifier does not ask about these."""
    part_rules: tuple[Rule | None, ...] = ()
    """For each simple command, in order, the allow rule that covers it, if one does."""
    by_regex: bool = False
    """A `BashRegex` allow rule matched the whole line (heredocs and inline code it spells out
    are then not asked about; everything else still is)."""


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The allow, ask and deny lists of every settings file, merged."""

    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    home: Path = field(default_factory=Path.home)

    @classmethod
    def from_lists(
        cls,
        lists: dict[RuleList, Sequence[str]],
        origins: dict[str, str] | None = None,
        home: Path | None = None,
    ) -> RuleSet:
        """Parse every rule; raises `RuleError` naming the first bad one."""
        origins = origins or {}
        parsed = {
            name: tuple(parse_rule(t, origins.get(t, "")) for t in lists.get(name, ()))
            for name in ("allow", "ask", "deny")
        }
        return cls(parsed["allow"], parsed["ask"], parsed["deny"], home or Path.home())

    def all_rules(self) -> Iterable[Rule]:
        """Every rule, deny first."""
        return (*self.deny, *self.ask, *self.allow)

    def evaluate(self, subject: CallSubject, commands: Sequence[CommandPart] = ()) -> RuleVerdict:
        """Deny beats ask beats allow; a call with several parts is allowed only if each is.

        `commands` are the simple commands of `subject.command`, parsed by the caller. A command
        line is allowed as a whole by an exact rule naming all of it, or part by part, where a
        wrapper (`timeout 5 pytest`) counts as allowed when its inner command is.
        """
        parts = _parts(subject, commands)
        if not parts:
            return RuleVerdict(verdict=None)
        for name in ("deny", "ask"):
            for part in parts:
                rule = self._first(name, subject, part)
                if rule is not None:
                    hit = Hit(verdict=name, rule=rule, part=part.text)
                    return RuleVerdict(verdict=hit.verdict, hit=hit, reason=_reason(hit))
        allowed = [(part, self._first("allow", subject, part)) for part in parts]
        exact = frozenset(p.text for p, rule in allowed if rule is not None and _names(rule, p))
        by_part = tuple(r for p, r in allowed if p.aspect == "command")
        whole = next((r for p, r in allowed if p.aspect == "whole" and r is not None), None)
        if whole is not None:
            hit = Hit(verdict="allow", rule=whole, part=parts[0].text)
            if whole.form == "regex":
                reason = _reason(hit)
                return RuleVerdict(
                    verdict="allow", hit=hit, reason=reason, part_rules=by_part, by_regex=True
                )
            texts = frozenset(p.text for p in parts)
            return RuleVerdict(
                verdict="allow",
                hit=hit,
                reason=_reason(hit),
                exactly_allowed=texts,
                part_rules=by_part,
            )
        needed = [(p, r) for p, r in allowed if p.aspect != "whole" and not p.exempt]
        if not needed or any(rule is None for _, rule in needed):
            return RuleVerdict(verdict=None, exactly_allowed=exact, part_rules=by_part)
        rule = next(rule for _, rule in needed if rule is not None)
        shown = subject.command or ", ".join(subject.paths) or subject.url or subject.tool
        hit = Hit(verdict="allow", rule=rule, part=shown.strip())
        return RuleVerdict(
            verdict="allow",
            hit=hit,
            reason=_reason(hit),
            exactly_allowed=exact,
            part_rules=by_part,
        )

    def denied_argument(self, subject: CallSubject, commands: Sequence[CommandPart]) -> Hit | None:
        """A command argument naming a file a `Read` deny rule protects (`cat .env`).

        Best effort: only words that are paths as written are seen, not paths a program
        builds or finds on its own.
        """
        rules = [r for r in self.deny if r.family == "Read" and r.specifier is not None]
        for command in commands:
            for word in command.words[1:]:
                candidate = word.partition("=")[2] if word.startswith("-") else word
                if not candidate or candidate.startswith("-"):
                    continue
                for rule in rules:
                    assert rule.specifier is not None
                    if path_matches(rule.specifier, candidate, subject.root, self.home):
                        return Hit(verdict="deny", rule=rule, part=command.text)
        return None

    def _first(self, name: RuleList, subject: CallSubject, part: _Part) -> Rule | None:
        """The first rule of a list that applies; for allow, the one naming most words, so
        `Bash(python -c *)` speaks for `python -c CODE` rather than `Bash(python:*)`."""
        rules: tuple[Rule, ...] = getattr(self, name)
        best: Rule | None = None
        for rule in rules:
            if _applies(rule, subject, part, self.home, deny=name == "deny"):
                if name != "allow" or part.aspect != "command":
                    return rule
                if best is None or rule.reach > best.reach:
                    best = rule
        return best


@dataclass(frozen=True, slots=True)
class _Part:
    text: str
    aspect: Literal["whole", "command", "path", "url", "tool"]
    words: tuple[str, ...] = ()
    exempt: bool = False
    heredoc: bool = False


def _parts(subject: CallSubject, commands: Sequence[CommandPart]) -> list[_Part]:
    """The pieces rules are matched against: the whole command line and each simple command,
    each path, the URL, or else the call as a whole."""
    if subject.command is not None:
        whole = _Part(subject.command.strip(), "whole")
        return [whole] + [
            _Part(c.text, "command", c.words, c.exempt, c.plain_heredoc) for c in commands
        ]
    if subject.paths:
        return [_Part(p, "path") for p in subject.paths]
    if subject.url is not None:
        return [_Part(subject.url, "url")]
    return [_Part(subject.tool, "tool")]


def _applies(rule: Rule, subject: CallSubject, part: _Part, home: Path, *, deny: bool) -> bool:
    if not _names_tool(rule, subject, deny=deny):
        return False
    spec = rule.specifier
    if part.aspect == "whole":
        # Only an exact rule or a regex speaks for a whole command line: it is how a person
        # allows a construct that is otherwise always asked about, such as a heredoc.
        if spec is None or rule.form == "heredoc":
            return False
        if rule.form == "exact":
            return spec == part.text.strip()
        if rule.form == "regex":
            return _regex(spec).fullmatch(part.text) is not None
        return rule.exact and " ".join(spec.split()) == " ".join(part.text.split())
    if spec is None:
        return True
    if part.aspect == "command":
        if rule.form == "heredoc" and not part.heredoc:
            return False
        return command_matches(rule, part.words)
    if part.aspect == "path":
        return path_matches(spec, part.text, subject.root, home)
    if part.aspect == "url":
        return domain_matches(spec, part.text)
    return False


@functools.lru_cache(maxsize=256)
def _regex(spec: str) -> re.Pattern[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "possible nested set" and the like
        return re.compile(spec)


def _names(rule: Rule, part: _Part) -> bool:
    """Whether an exact rule spells out the part as written, redirections included: only then
    does it speak for what the part does (`Bash(git status)` is not `git status > ~/.bashrc`)."""
    if not rule.exact or rule.specifier is None:
        return False
    if part.aspect != "command":
        return True
    return " ".join(rule.specifier.split()) == " ".join(part.text.split())


def _names_tool(rule: Rule, subject: CallSubject, *, deny: bool) -> bool:
    family = rule.family
    if family is None:
        tool = rule.tool
        if tool.startswith("mcp__") and not tool.endswith("*") and tool.count("__") == 1:
            return subject.tool.startswith(tool + "__")
        if "*" in tool:
            return re.fullmatch(tool.replace("*", ".*"), subject.tool) is not None
        return tool in (subject.tool, *subject.aliases)
    if family == "Bash":
        return subject.command is not None
    if family == "WebFetch":
        return subject.url is not None
    if family == "Read":
        # A file nobody may read may not be edited either: the edit would show its content.
        return bool(subject.paths) and (subject.kind == "read" or (deny and subject.kind == "edit"))
    return subject.kind == "edit"


def command_matches(rule: Rule, words: Sequence[str]) -> bool:
    """Whether a Bash rule covers one simple command, given as its words without quotes."""
    words = tuple(words)
    if rule.specifier is None:
        return True
    if rule.form in ("exact", "regex"):
        return False
    spec = read_spec(rule.specifier)
    if spec.glob is not None:
        return spec.glob.match(" ".join(words)) is not None
    if spec.prefix:
        return words[: len(spec.words)] == spec.words
    return words == spec.words  # BashHeredoc(cat) too: exactly `cat`, fed by the heredoc


def rule_words(assignments: Sequence[str], words: Sequence[str]) -> tuple[str, ...]:
    """The words a rule sees: assignments that may change a command's meaning, then the words."""
    kept = [a for a in assignments if a.partition("=")[0] not in _SAFE_ENV]
    return (*kept, *words)


def _reason(hit: Hit) -> str:
    verb = {"allow": "allows", "ask": "asks about", "deny": "denies"}[hit.verdict]
    return f"rule {hit.rule.describe()} {verb} {hit.part}"
