"""The table of options that run code or write files, path expansion for writes, sed scripts, and
the second reading of heredocs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from kestrel.policy.command_effects import effects
from kestrel.policy.sed_script import sed_commands
from kestrel.policy.shell import parse_shell
from kestrel.policy.shell_heredoc import read_heredocs
from kestrel.policy.shell_paths import Places, expand_word, is_write, written_outside


@pytest.mark.parametrize(
    ("command", "kind", "at", "path"),
    [
        ("git log --output=/etc/x", "writes-file", 2, "/etc/x"),
        ("git log --out /tmp/x", "writes-file", 2, "/tmp/x"),
        ("git -c core.pager=less log", "runs-code", 1, None),
        ("git --git-dir=/etc status", "other-repository", 1, None),
        ("git submodule --quiet foreach id", "runs-code", 3, None),
        ("git bisect run make", "runs-code", 2, None),
        ("git grep -Ovi x", "runs-code", 2, None),
        ("git clone ext::sh x", "runs-code", 2, None),
        ("npm run build", "runs-code", 1, None),
        ("yarn build", "runs-code", 1, None),
        ("python -m pytest -p evil", "runs-code", 3, None),
        ("pip install x", "runs-code", 1, None),
        ("find . -fprintf /tmp/x %p", "writes-file", 2, "/tmp/x"),
        ("tar -xzf a.tgz --to-command=sh", "runs-code", 3, None),
        ("sort -o/tmp/x f", "writes-file", 1, "/tmp/x"),
        ("curl -sSLo /tmp/x u", "writes-file", 1, "/tmp/x"),
        ("cp a b /etc/", "writes-file", 3, "/etc/"),
        ("sed -i s/a/b/ /etc/hosts", "writes-file", 3, "/etc/hosts"),
        ("sed '1e id' f", "runs-code", 1, None),
        ("env -S 'sh -c id'", "runs-code", 1, None),
    ],
)
def test_the_table_finds_the_option_however_it_is_spelled(
    command: str, kind: str, at: int, path: str | None
) -> None:
    found = effects(shlex.split(command))
    assert any((e.kind, e.at, e.path) == (kind, at, path) for e in found), found


@pytest.mark.parametrize(
    "command",
    [
        "git log --oneline -5",
        "git diff --stat",
        "git -C src status",
        "npm ls",
        "pip list",
        "pytest -q -x",
        "find . -name '*.py' -print",
        "sed -n 1,20p f",
        "sed 's/a;b/c/g' f",
        "tar -tf a.tar",
        "sort f",
        "awk '{print $1}' f",
    ],
)
def test_ordinary_uses_have_no_effects(command: str) -> None:
    found = effects(shlex.split(command))
    assert [e for e in found if e.kind != "writes-file" or e.path is None] == []


@pytest.mark.parametrize(
    ("program", "runs", "writes"),
    [
        ("s/a/b/g", False, False),
        ("s/x/y/e", True, False),
        ("s/a/b/w out", False, True),
        ("1e date", True, False),
        ("/x/,/y/{s/a/b/;p}", False, False),
        ("873a\\\n  text with e and w\\\n  more", False, False),
        ("/x/!b; /y/a \\\n  text", False, False),
        ("s/a/b", True, True),  # unreadable: counts as both
    ],
)
def test_sed_scripts_are_read_as_sed_reads_them(program: str, runs: bool, writes: bool) -> None:
    assert sed_commands(program) == (runs, writes)


def test_known_variables_and_tildes_expand_and_unknown_ones_do_not(tmp_path: Path) -> None:
    home = tmp_path / "home"
    places = Places(root=tmp_path / "ws", home=home, env={"HOME": str(home), "USER": "me"})
    cwd = tmp_path / "ws"
    assert expand_word("$HOME/x", cwd, places) == f"{home}/x"
    assert expand_word("${HOME}/x", cwd, places) == f"{home}/x"
    assert expand_word("~/x", cwd, places) == f"{home}/x"
    assert expand_word("~+/x", cwd, places) == f"{cwd}/x"
    assert expand_word("$PWD/x", cwd, places) == f"{cwd}/x"
    assert expand_word("/home/$USER/x", cwd, places) == "/home/me/x"
    for unknown in ("~-/x", "$OLDPWD/x", "$X/y", "${X:-a}/y", "$(pwd)/x", "`pwd`/x", "~bob/x"):
        assert expand_word(unknown, cwd, places) is None, unknown


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("echo x > f", True),
        ("echo x >> f", True),
        ("echo x >| f", True),
        ("echo x &> f", True),
        ("echo x &>> f", True),
        ("echo x 2> f", True),
        ("echo x >& f", True),
        ("echo x 2>&1", False),
        ("echo x >&2", False),
        ("echo x 1>&-", False),
        ("cat < f", False),
        ("cat <<< f", False),
    ],
)
def test_redirections_that_open_a_file_for_writing(command: str, writes: bool) -> None:
    redirects = [r for c in parse_shell(command).commands for r in c.redirects]
    assert any(is_write(r) for r in redirects) is writes


def test_writes_are_followed_through_cd(tmp_path: Path) -> None:
    places = Places(root=tmp_path, home=tmp_path.parent / "home", env={})

    def outside(command: str) -> list[str]:
        parsed = parse_shell(command)
        return written_outside(parsed, [[] for _ in parsed.commands], places)

    assert outside("cd src && echo x > f") == []
    assert outside("cd /tmp && echo x > f") != []
    assert outside("(cd /tmp); echo x > f") != []  # maybe there, maybe not: asked
    assert "only known when" in outside('cd "$X" && echo x > f')[0]
    assert outside("echo x > ~+/f") == []
    assert outside("echo x > /dev/null 2>&1") == []


def test_heredocs_are_read_line_by_line_as_bash_reads_them() -> None:
    source = "cat <<A <<-'B' > f\none\nA\n\ttwo $x\n\tB\necho <<< not-a-heredoc"
    docs = read_heredocs(source)
    assert docs is not None
    assert [(d.delimiter, d.quoted, d.body, d.closed) for d in docs] == [
        ("A", False, "one\n", True),
        ("B", True, "two $x\n", True),
    ]
    assert read_heredocs("cat <<EOF\nno end")[0].closed is False  # type: ignore[index]


def test_a_heredoc_body_keeps_its_leading_blank_lines_and_indentation() -> None:
    parsed = parse_shell("cat <<'EOF' >> tests.py\n\n    def test_x(self):\n        pass\nEOF")
    (doc, _) = parsed.commands[0].redirects
    assert doc.body == "\n    def test_x(self):\n        pass\n"
    assert not any(r.kind == "syntax-error" for r in parsed.risks)


@pytest.mark.parametrize(
    "command",
    [
        "cat <<A <<B\na\nA\nb\nB",  # two heredocs on one line
        "cat <<EOF\nno end",
        "echo 'unclosed",
        "python3 -c \"print('a",
        "fi",
        "for i in a; do echo ;; done",
        "echo x >\ny",
        "print('x')",
        "echo a\x00b",
        "pytest -q >2>&1 | tail -20",  # bash reads `2>` as a descriptor
    ],
)
def test_what_tree_sitter_patches_up_is_marked_uncertain(command: str) -> None:
    assert any(r.kind == "syntax-error" for r in parse_shell(command).risks), command


def test_a_heredoc_after_a_list_belongs_to_its_last_command() -> None:
    parsed = parse_shell("mkdir -p t && touch t/i && cat <<'EOF' > t/m.py\nx = 1\nEOF")
    assert [len(c.redirects) for c in parsed.commands] == [0, 0, 2]
    assert [r.command for r in parsed.risks] == [2]


def test_odd_input_from_the_fuzzer_raises_nothing(tmp_path: Path) -> None:
    places = Places(root=tmp_path, home=tmp_path, env={})
    for command in ("awk -e", "git -c", "cd '\x00' && echo x > y", "echo x > a\x00b"):
        parsed = parse_shell(command)
        found = [effects(c.words) for c in parsed.commands]
        written_outside(parsed, found, places)
