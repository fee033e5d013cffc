"""The harness itself: a terminal run and a piped run both report what the command said."""

from kit import NewUser, assert_clean


def test_help_runs_on_a_terminal_and_in_a_pipe(user: NewUser) -> None:
    piped = user.run("--help")
    tty = user.run_tty("--help")
    assert piped.code == tty.code == 0
    assert "Usage" in piped.out and "Usage" in tty.out
    assert_clean(piped)
    assert_clean(tty)
