"""Command substitutions inside a heredoc body whose commands the rules allow.

In `cat <<EOF > new.py` with `$(head -n 40 old.py)` in the body, the shell runs `head` while it
reads the body and pastes its output into the text it feeds `cat`: the output is data, never
words of a command. The parse lists `head` as a command of its own, judged by the rules like any
other, so the substitution hides nothing when every command it runs is parsed with certainty and
allowed by a rule. A substitution anywhere else (in a command's words, a redirection target, an
assignment) still decides what runs or where it writes, and is asked about as before.
"""

from __future__ import annotations

from kestrel.policy.rules import RuleVerdict
from kestrel.policy.shell import Risk, ShellParse, SimpleCommand

__all__ = ["body_substitution_waived", "expanded_body_allowed", "substitutions_only"]


def expanded_body_allowed(parsed: ShellParse, ruled: RuleVerdict, index: int) -> bool:
    """Whether command `index` is fed by one unquoted heredoc whose only expansions that run
    anything are `$(..)` substitutions in its body, each running rule-allowed commands."""
    command = parsed.commands[index]
    docs = [r for r in command.redirects if r.op in ("<<", "<<-")]
    if len(docs) != 1 or any(q in docs[0].raw for q in "'\"\\"):
        return False
    body = docs[0].body
    if "`" in body or "$((" in body or _runs_elsewhere(command):
        return False
    children = [
        j for j, c in enumerate(parsed.commands) if c.via == "substitution" and c.parent == index
    ]
    if len(children) != body.count("$(") or not children:
        return False
    if any(c.parent in children for c in parsed.commands):
        return False  # a substitution inside a substitution: keep asking
    if any(r.command in children for r in parsed.risks):
        return False
    rules = ruled.part_rules
    return all(j < len(rules) and rules[j] is not None for j in children)


def body_substitution_waived(risk: Risk, parsed: ShellParse, ruled: RuleVerdict) -> bool:
    """Whether a substitution risk can only come from heredoc bodies `expanded_body_allowed`
    accepts: every substituted command of the line belongs to such a body."""
    if risk.kind != "substitution":
        return False
    parents = {
        c.parent for c in parsed.commands if c.via in ("substitution", "process-substitution")
    }
    if not parents or None in parents:
        return False
    return all(p is not None and expanded_body_allowed(parsed, ruled, p) for p in parents)


def substitutions_only(body: str) -> bool:
    """Whether the only expansions in an unquoted heredoc body are `$(..)` substitutions: no
    `$VAR`, `${..}`, `$((..))`, backquote or backslash escape."""
    if "`" in body or "\\" in body or "$((" in body or "$(" not in body:
        return False
    return all(body[i + 1 : i + 2] == "(" for i, ch in enumerate(body) if ch == "$")


def _runs_elsewhere(command: SimpleCommand) -> bool:
    """A substitution in the command's own words or redirection targets."""
    texts = [*command.words, *command.assignments]
    texts += [r.raw or r.target for r in command.redirects if r.op not in ("<<", "<<-")]
    return any("$(" in t or "`" in t or "<(" in t or ">(" in t for t in texts)
