"""Rules for real commands: quoted `Bash(...)` specifiers, `BashExact`, `BashRegex`, `BashHeredoc`,
and what an allow rule must name to cover code-running options and hidden constructs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kestrel.policy.gate import PermissionGate
from kestrel.policy.rules import RuleError, RuleSet, command_matches, parse_rule
from kestrel.policy.subject import CallSubject
from kestrel.settings import PermissionSettings

HEREDOC = "cat <<'EOF' > reproduce.py\nimport numpy as np\nprint(np.arange(3))\nEOF"


def decide(allow: list[str], command: str, root: Path, mode: str = "default") -> tuple[str, str]:
    gate = PermissionGate(rules=RuleSet.from_lists({"allow": allow}), dirty=lambda: False)
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    decision = asyncio.run(gate.check(subject, mode))  # type: ignore[arg-type]
    return decision.verdict, decision.reason


@pytest.mark.parametrize(
    ("rule", "words", "matches"),
    [
        ('Bash(echo "a)")', ["echo", "a)"], True),
        ("Bash(echo '*')", ["echo", "*"], True),
        ("Bash(echo '*')", ["echo", "x"], False),
        ("Bash(echo \\*)", ["echo", "*"], True),
        ("Bash(echo *)", ["echo", "x", "y"], True),
        ('Bash(python -c "print(1)")', ["python", "-c", "print(1)"], True),
        ('Bash(python -c "print(*)")', ["python", "-c", "print(2)"], False),
        ("Bash(python -c *)", ["python", "-c", "import os; print(os.sep)"], True),
        ("Bash(grep -n 'a b':*)", ["grep", "-n", "a b", "f"], True),
        ("Bash(ls [ab]?)", ["ls", "[ab]?"], True),
        ("BashHeredoc(cat)", ["cat"], True),
        ("BashHeredoc(cat)", ["cat", "/etc/shadow", "-"], False),  # exactly `cat`
        ("BashHeredoc(python3 -)", ["python3", "-"], True),
        ("BashExact(ls)", ["ls"], False),  # a whole-line rule says nothing about one command
    ],
)
def test_quotes_make_wildcards_and_parentheses_plain_text(
    rule: str, words: list[str], matches: bool
) -> None:
    assert command_matches(parse_rule(rule), words) is matches


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Bash(echo 'a)", "not a rule"),
        ("Bash(a) (b)", "not a rule"),
        ("Bash(echo 'unclosed)", "not a rule"),
        ("Bash(git *:*)", "either a prefix"),
        ("BashRegex(a[)", "not a regular expression"),
        ("BashExact()", "needs a command"),
        ("BashHeredoc(ca*)", "no *"),
        ("BashHeredoc()", "needs a command"),
    ],
)
def test_malformed_rules_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(RuleError, match=r"(?i)" + says.replace("(", r"\(")):
        parse_rule(text)


def test_the_settings_loader_reports_a_bad_rule_of_the_new_forms() -> None:
    with pytest.raises(ValueError, match="not a regular expression"):
        PermissionSettings(allow=["BashRegex(a[)"])
    assert PermissionSettings(allow=[f"BashExact({HEREDOC})"]).allow == [f"BashExact({HEREDOC})"]


def test_bash_exact_allows_one_heredoc_character_for_character(tmp_path: Path) -> None:
    rule = f"BashExact({HEREDOC})"
    assert decide([rule], HEREDOC, tmp_path)[0] == "allow"
    assert decide([rule], HEREDOC + "\n", tmp_path)[0] == "allow"  # outer blanks do not count
    changed = HEREDOC.replace("arange(3)", "arange(4)")
    assert decide([rule], changed, tmp_path)[0] == "ask"
    indented = HEREDOC.replace("print", "    print")
    assert decide([rule], indented, tmp_path)[0] == "ask"  # indentation is part of a program


def test_bash_heredoc_allows_plain_heredocs_into_the_workspace_only(tmp_path: Path) -> None:
    rules = ["BashHeredoc(cat)"]
    assert decide(rules, HEREDOC, tmp_path)[0] == "allow"
    assert decide(rules, "cat > out.txt <<EOF\nplain text\nEOF", tmp_path)[0] == "allow"
    asked = [
        "cat <<EOF > x.py\n$(curl evil)\nEOF",  # an unquoted body runs its substitutions
        "cat <<'EOF' > /etc/cron.d/job\n* * * * * id\nEOF",  # outside the workspace
        "cat <<'EOF' > ~/.bashrc\nid\nEOF",
        "cat <<'EOF' | sh\nid\nEOF",  # into a shell
        "cat <<'EOF' > x.py && curl evil\nx\nEOF",  # another command no rule allows
        "cat <<'EOF' > .git/hooks/pre-commit\nid\nEOF",  # a git hook
    ]
    for command in asked:
        assert decide(rules, command, tmp_path)[0] == "ask", command


def test_bash_regex_speaks_for_the_whole_line_and_the_classifier_still_asks(
    tmp_path: Path,
) -> None:
    rule = r"BashRegex(cat <<'EOF' > notes/\w+\.md\n(?:[^\n]*\n)*EOF)"
    note = "cat <<'EOF' > notes/todo.md\n- one\n- two\nEOF"
    assert decide([rule], note, tmp_path)[0] == "allow"
    assert decide([rule], note.replace("todo", "../../x"), tmp_path)[0] == "ask"
    everything = ["BashRegex((?s).*)"]
    assert decide(everything, "rm -rf ~", tmp_path)[0] == "ask"
    assert decide(everything, "echo x > /tmp/x", tmp_path)[0] == "ask"
    assert decide(everything, "echo $(id)", tmp_path)[0] == "ask"  # substitutions still ask


@pytest.mark.parametrize(
    ("allow", "command", "verdict"),
    [
        (["Bash(python3 -c *)"], "python3 -c 'print(1)'", "allow"),
        (["Bash(python3:*)"], "python3 -c 'print(1)'", "ask"),
        (["Bash(python3:*)", "Bash(python3 -c *)"], "python3 -c 'print(1)'", "allow"),
        (["Bash(python3 -c *)"], "python3 -X dev -c 'print(1)'", "ask"),
        (["Bash(git log:*)"], "git log --output=out.txt", "allow"),  # inside the workspace
        (["Bash(git log:*)"], "git log --output=/tmp/x", "ask"),
        (["Bash(git *)"], "git submodule foreach id", "ask"),
        (["Bash(git submodule foreach:*)"], "git submodule foreach id", "allow"),
        (["Bash(npm:*)"], "npm run build", "ask"),
        (["Bash(npm run build)"], "npm run build", "allow"),
        (["Bash(find:*)"], "find . -name '*.pyc' -delete", "ask"),
        (["Bash(find . -name:*)"], "find . -name '*.pyc' -delete", "ask"),
        (["Bash(xargs grep:*)", "Bash(find:*)", "Bash(grep:*)"], "find . | xargs grep x", "allow"),
        (["Bash(git status)"], "git status > ~/.bashrc", "ask"),
    ],
)
def test_an_allow_rule_covers_what_its_words_name(
    tmp_path: Path, allow: list[str], command: str, verdict: str
) -> None:
    assert decide(allow, command, tmp_path)[0] == verdict


def test_a_line_the_parser_cannot_read_is_asked_about_in_every_mode(tmp_path: Path) -> None:
    for mode in ("default", "accept-edits", "bypass"):
        verdict, reason = decide(["Bash"], "cat <<A <<B\na\nA\nb\nB", tmp_path, mode)
        assert verdict == "ask" and "could not parse" in reason


def test_the_new_forms_deny_and_ask_too(tmp_path: Path) -> None:
    rules = RuleSet.from_lists(
        {
            "allow": ["Bash"],
            "ask": ["BashHeredoc(python3 -)"],
            "deny": [r"BashRegex((?s).*\bcurl\b.*)", "BashExact(make deploy)"],
        }
    )
    gate = PermissionGate(rules=rules, dirty=lambda: False)

    def verdict(command: str) -> str:
        subject = CallSubject(tool="bash", kind="execute", root=tmp_path, command=command)
        return asyncio.run(gate.check(subject, "bypass")).verdict

    assert verdict("ls && curl -s https://example.com") == "deny"
    assert verdict("make deploy") == "deny"
    assert verdict("python3 - <<'EOF'\nprint(1)\nEOF") == "ask"
    assert verdict("make test") == "allow"
