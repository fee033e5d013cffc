"""The gate's questions about a parsed command line that no rule can settle by itself:
constructs that hide what runs, options that run code or write files, writes outside the
workspace. Each answer is a sentence for the person asked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kestrel.policy.command_effects import Effect, effects
from kestrel.policy.heredoc_body import body_substitution_waived, substitutions_only
from kestrel.policy.rules import RuleVerdict, rule_words
from kestrel.policy.shell import Risk, ShellParse, SimpleCommand
from kestrel.policy.shell_paths import Places, written_outside
from kestrel.policy.subject import CommandPart

__all__ = ["command_parts", "hidden", "outside", "unusual"]

WRAPPERS = frozenset(
    {"timeout", "nice", "nohup", "time", "env", "stdbuf", "command", "builtin", "exec", "xargs"}
    | {"sudo", "doas", "watch"}
)
"""Commands that run another command given on their command line."""
HARMLESS = frozenset({"true", "false", ":", "cd", "pushd", "popd", "test", "[", "[["})
"""Commands that need no rule of their own: they change nothing but the shell's own state."""

_RISK_WORDS = {
    "substitution": "command substitution",
    "process-substitution": "process substitution",
    "eval": "eval",
    "source": "sourcing a script",
    "inline-code": "code given on the command line",
    "heredoc": "a heredoc",
    "pipe-to-interpreter": "a pipe into an interpreter",
    "dynamic-command": "a command name that is only known when it runs",
    "function-definition": "a function definition",
    "syntax-error": "shell syntax Kestrel could not parse",
}
_REGEX_WAIVES = frozenset({"heredoc", "inline-code"})


def command_parts(parsed: ShellParse | None) -> list[CommandPart]:
    """The simple commands of a parse, as rules match them."""
    if parsed is None:
        return []
    commands = parsed.commands
    wrapping = {c.parent for c in commands if c.via == "wrapper" and c.parent is not None}
    parts = []
    for index, command in enumerate(commands):
        # A wrapper whose inner command the parse lists separately is judged by that command.
        wrapper = command.name in WRAPPERS and index in wrapping
        words = rule_words(command.assignments, command.words)
        harmless = bool(words) and words[0] in HARMLESS
        parts.append(
            CommandPart(
                text=command.text,
                words=words,
                exempt=wrapper or harmless,
                plain_heredoc=_plain_heredoc(command),
                lead=len(words) - len(command.words),
            )
        )
    return parts


def hidden(
    parsed: ShellParse, ruled: RuleVerdict, *, whole_exact: bool, only_unread: bool = False
) -> list[str]:
    """Constructs rules cannot see through, less those an allow rule spells out: inline code
    after the words that start it (`Bash(python -c *)`), a plain heredoc into a command a
    `BashHeredoc` rule names, heredocs and inline code in a line a `BashRegex` rule matches.
    A parse that is not certain is never waived; `only_unread` keeps only those."""
    out = []
    for risk in parsed.risks:
        unread = risk.kind == "syntax-error"
        if not unread and (only_unread or whole_exact or _waived(risk, parsed, ruled)):
            continue
        words = _RISK_WORDS.get(risk.kind, risk.kind)
        out.append(f"it uses {words} ({risk.detail}), which rules cannot see through")
    return out


def _waived(risk: Risk, parsed: ShellParse, ruled: RuleVerdict) -> bool:
    if ruled.by_regex and risk.kind in _REGEX_WAIVES:
        return True
    if body_substitution_waived(risk, parsed, ruled):
        return True
    index = risk.command
    if index is None or index >= len(ruled.part_rules):
        return False
    rule = ruled.part_rules[index]
    if rule is None:
        return False
    command = parsed.commands[index]
    if risk.kind == "inline-code" and risk.at is not None and rule.form == "words":
        lead = len(rule_words(command.assignments, command.words)) - len(command.words)
        return rule.reach > risk.at + lead
    return risk.kind == "heredoc" and rule.form == "heredoc" and _plain_heredoc(command)


def unusual(parsed: ShellParse, parts: Sequence[CommandPart], ruled: RuleVerdict) -> list[str]:
    """Options and subcommands that run code or write files where the rule that allows the
    command does not name them (`git log --output=FILE` under `Bash(git log:*)`)."""
    out = []
    for index, (command, part) in enumerate(zip(parsed.commands, parts, strict=False)):
        rule = ruled.part_rules[index] if index < len(ruled.part_rules) else None
        for effect in effects(command.words):
            if effect.kind == "writes-file" and effect.path is not None:
                continue  # judged by where it writes
            if rule is not None and rule.reach > effect.at + part.lead:
                continue
            out.append(f"{effect.reason}, and no allow rule names it")
    return out


SANDBOX_PRIVATE: tuple[Path, ...] = (Path("/tmp"), Path("/var/tmp"))  # noqa: S108
"""Folders a sandboxed command gets a private copy of: the session's own /tmp, an empty /var/tmp."""


def outside(parsed: ShellParse, root: Path, home: Path, private: Sequence[Path] = ()) -> list[str]:
    """Writes outside the workspace and the `private` folders, or to places only known when
    the command runs."""
    found: list[list[Effect]] = [effects(c.words) for c in parsed.commands]
    return written_outside(parsed, found, Places.of(root, home, private))


def _plain_heredoc(command: SimpleCommand) -> bool:
    """Fed by a heredoc the shell does not expand: a quoted delimiter, or a body with no `$`,
    backquote or backslash, or none but `$(..)` substitutions (asked about on their own unless
    `body_substitution_waived`)."""
    docs = [r for r in command.redirects if r.op in ("<<", "<<-")]
    if len(docs) != 1:
        return False
    doc = docs[0]
    quoted = any(q in doc.raw for q in "'\"\\")
    return quoted or not any(ch in doc.body for ch in "$`\\") or substitutions_only(doc.body)
