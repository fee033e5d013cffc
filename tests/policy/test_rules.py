"""Permission rule strings: parsing, command matching, path matching, precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.policy.rules import RuleError, RuleSet, command_matches, parse_rule, path_matches
from kestrel.policy.subject import CallSubject, CommandPart


def test_a_rule_names_a_tool_and_an_optional_specifier() -> None:
    rule = parse_rule("Bash(git diff:*)", "user settings")
    assert (rule.tool, rule.specifier, rule.family) == ("Bash", "git diff:*", "Bash")
    assert not rule.exact
    assert rule.describe() == "Bash(git diff:*) (user settings)"
    assert parse_rule("Bash(npm test)").exact
    assert parse_rule("read_file").specifier is None
    assert parse_rule("Bash(*)").specifier is None
    assert parse_rule("mcp__github__create_issue").family is None


@pytest.mark.parametrize(
    "text",
    ["Bash(npm test", "Bash)x(", "(x)", "", "Bash(a*:*)", "WebFetch(docs.python.org)", "a b"],
)
def test_malformed_rules_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(RuleError):
        parse_rule(text)


@pytest.mark.parametrize(
    ("rule", "words", "matches"),
    [
        ("Bash(npm test)", ["npm", "test"], True),
        ("Bash(npm test)", ["npm", "test", "--watch"], False),
        ("Bash(git diff:*)", ["git", "diff"], True),
        ("Bash(git diff:*)", ["git", "diff", "HEAD~1"], True),
        ("Bash(git diff:*)", ["git", "diffx"], False),
        ("Bash(git diff:*)", ["git", "-c", "x=y", "diff"], False),
        ("Bash(npm run test *)", ["npm", "run", "test", "--", "-x"], True),
        ("Bash(npm run test *)", ["npm", "run", "test:unit"], False),
        ("Bash(git * main)", ["git", "push", "origin", "main"], True),
        ("Bash", ["anything"], True),
        ("Bash('my tool' run:*)", ["my tool", "run", "x"], True),
    ],
)
def test_command_rules_match_words_exactly_by_prefix_or_by_glob(
    rule: str, words: list[str], matches: bool
) -> None:
    assert command_matches(parse_rule(rule), words) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("src/**", "src/a/b.py", True),
        ("src/**", "src", True),
        ("src/**", "lib/src/a.py", False),
        ("src", "src/deep/x.py", True),
        ("docs/", "docs/index.md", True),
        ("*.env", "deep/dir/prod.env", True),
        (".env", ".env", True),
        (".env", "config/.env", True),
        (".env", ".envrc", False),
        ("/build/*.o", "build/x.o", True),
        ("/build/*.o", "build/sub/x.o", False),
        ("./README.md", "README.md", True),
        ("**/*.lock", "a/b/Cargo.lock", True),
        ("*.lock", "Cargo.lock", True),
        ("src/**/test_*.py", "src/test_a.py", True),
        ("src/**/test_*.py", "src/x/y/test_a.py", True),
        ("secret?.txt", "secret1.txt", True),
        ("[abc].txt", "b.txt", True),
        ("[!abc].txt", "b.txt", False),
    ],
)
def test_path_patterns_follow_gitignore_conventions(
    tmp_path: Path, pattern: str, path: str, matches: bool
) -> None:
    assert path_matches(pattern, path, tmp_path, tmp_path / "home") is matches


def test_absolute_and_home_patterns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert path_matches("//etc/**", "/etc/passwd", tmp_path, home)
    assert not path_matches("//etc/**", "etc/passwd", tmp_path, home)
    assert path_matches("~/.ssh/**", str(home / ".ssh" / "id_rsa"), tmp_path, home)
    # A relative pattern never matches a path outside the workspace.
    assert not path_matches("*.pem", "/elsewhere/key.pem", tmp_path, home)


def test_a_symlink_is_matched_by_where_it_leads(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("KEY=1\n")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / ".env")
    assert path_matches(".env", "innocent.txt", tmp_path, tmp_path)


def _bash(root: Path, command: str, *parts: CommandPart) -> tuple[CallSubject, list[CommandPart]]:
    subject = CallSubject(tool="bash", kind="execute", root=root, command=command)
    return subject, list(parts)


def _part(text: str, exempt: bool = False) -> CommandPart:
    return CommandPart(text=text, words=tuple(text.split()), exempt=exempt)


def test_deny_beats_ask_beats_allow(tmp_path: Path) -> None:
    rules = RuleSet.from_lists(
        {"allow": ["Bash(git:*)"], "ask": ["Bash(git commit:*)"], "deny": ["Bash(git push:*)"]}
    )
    subject, parts = _bash(tmp_path, "git push", _part("git push"))
    assert rules.evaluate(subject, parts).verdict == "deny"
    subject, parts = _bash(tmp_path, "git commit -m x", _part("git commit -m x"))
    assert rules.evaluate(subject, parts).verdict == "ask"
    subject, parts = _bash(tmp_path, "git log", _part("git log"))
    verdict = rules.evaluate(subject, parts)
    assert verdict.verdict == "allow"
    assert "Bash(git:*)" in verdict.reason


def test_a_compound_command_is_allowed_only_when_every_part_is(tmp_path: Path) -> None:
    rules = RuleSet.from_lists({"allow": ["Bash(git:*)"]})
    subject, parts = _bash(tmp_path, "git log && curl x", _part("git log"), _part("curl x"))
    assert rules.evaluate(subject, parts).verdict is None


def test_a_wrapper_is_allowed_when_what_it_wraps_is(tmp_path: Path) -> None:
    rules = RuleSet.from_lists({"allow": ["Bash(pytest:*)"]})
    subject, parts = _bash(
        tmp_path, "timeout 60 pytest -x", _part("timeout 60 pytest -x", True), _part("pytest -x")
    )
    assert rules.evaluate(subject, parts).verdict == "allow"
    denied = RuleSet.from_lists({"allow": ["Bash(pytest:*)"], "deny": ["Bash(timeout:*)"]})
    assert denied.evaluate(subject, parts).verdict == "deny"


def test_an_exact_rule_allows_a_whole_command_line(tmp_path: Path) -> None:
    line = "cat <<EOF > notes.txt\nhi\nEOF"
    rules = RuleSet.from_lists({"allow": [f"Bash({line})"]})
    subject, parts = _bash(tmp_path, line, _part("cat"))
    verdict = rules.evaluate(subject, parts)
    assert verdict.verdict == "allow"
    assert line in verdict.exactly_allowed


def test_read_deny_rules_also_keep_edits_away(tmp_path: Path) -> None:
    rules = RuleSet.from_lists({"deny": ["Read(.env)"], "allow": ["Edit(**)"]})
    edit = CallSubject(tool="edit_file", kind="edit", root=tmp_path, paths=(".env",))
    assert rules.evaluate(edit).verdict == "deny"
    other = CallSubject(tool="edit_file", kind="edit", root=tmp_path, paths=("a.py",))
    assert rules.evaluate(other).verdict == "allow"


def test_every_path_of_a_call_must_be_allowed(tmp_path: Path) -> None:
    rules = RuleSet.from_lists({"allow": ["Edit(src/**)"]})
    patch = CallSubject(tool="apply_patch", kind="edit", root=tmp_path, paths=("src/a", "b"))
    assert rules.evaluate(patch).verdict is None
    inside = CallSubject(tool="apply_patch", kind="edit", root=tmp_path, paths=("src/a", "src/b"))
    assert rules.evaluate(inside).verdict == "allow"


def test_tool_names_mcp_servers_and_domains(tmp_path: Path) -> None:
    rules = RuleSet.from_lists(
        {
            "allow": ["mcp__github", "WebFetch(domain:python.org)", "search_code"],
            "deny": ["mcp__db__drop_table"],
        }
    )

    def verdict(subject: CallSubject) -> str | None:
        return rules.evaluate(subject).verdict

    mcp = CallSubject(tool="mcp__github__create_issue", kind="edit", root=tmp_path)
    assert verdict(mcp) == "allow"
    assert verdict(CallSubject(tool="mcp__db__drop_table", kind="edit", root=tmp_path)) == "deny"
    assert verdict(CallSubject(tool="mcp__githubx__y", kind="edit", root=tmp_path)) is None
    fetch = CallSubject(
        tool="web_fetch", kind="read", root=tmp_path, url="https://docs.python.org/3/"
    )
    assert verdict(fetch) == "allow"
    evil = CallSubject(
        tool="web_fetch", kind="read", root=tmp_path, url="https://python.org.evil.io"
    )
    assert verdict(evil) is None
    assert verdict(CallSubject(tool="search_code", kind="read", root=tmp_path)) == "allow"


def test_a_command_argument_naming_a_denied_file_is_denied(tmp_path: Path) -> None:
    rules = RuleSet.from_lists({"deny": ["Read(.env)", "Read(secrets/**)"]})
    subject, parts = _bash(tmp_path, "cat .env", _part("cat .env"))
    assert rules.denied_argument(subject, parts) is not None
    subject, parts = _bash(tmp_path, "cp secrets/k /tmp", _part("cp secrets/k /tmp"))
    assert rules.denied_argument(subject, parts) is not None
    subject, parts = _bash(tmp_path, "grep --file=.env x", _part("grep --file=.env x"))
    assert rules.denied_argument(subject, parts) is not None
    subject, parts = _bash(tmp_path, "cat README", _part("cat README"))
    assert rules.denied_argument(subject, parts) is None
