"""A settings file with several mistakes lists every one of them, in one error or in the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.settings_load import check_settings, load_settings


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository root (it holds `.git`)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_mistake_of_a_repository_file_is_listed(home: Path, repo: Path) -> None:
    project = write(
        repo / ".kestrel" / "settings.toml",
        'modle = "x"\npermission_mode = "bypass"\n[sandbox_view]\nread_only = ["/srv"]\n'
        "[limits]\nmax_turns = 0\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(repo, env={}, flags={}, home=home)
    lines = str(caught.value).splitlines()
    assert lines == [
        f"{project}: permission_mode: bypass mode can only be chosen on the command line "
        "(--permission-mode bypass), never by a settings file or variable",
        f"{project}: [sandbox_view] can only be set in your own settings file "
        "(~/.config/kestrel/settings.toml): a repository's settings must not widen the sandbox",
        f"{project}: limits.max_turns: Input should be greater than 0 (got 0)",
        f'{project}: modle: unknown setting; did you mean "model"?',
        f"{project}: sets permission_mode, which a repository's settings may not set until you "
        f"trust the file: review it, then run `kestrel trust` in {repo}",
    ]


def test_mistakes_in_two_files_are_each_blamed_on_their_own_file(home: Path, repo: Path) -> None:
    user = write(home / ".config" / "kestrel" / "settings.toml", "max_output_tokens = -1\n")
    project = write(
        repo / ".kestrel" / "settings.toml", '[tools]\nbash_timeout = 3\nsandbox = "x"\n'
    )
    reports, good = check_settings(repo, env={"KESTREL_MAX_TURNS": "many"}, flags={}, home=home)
    assert good is not None and good.sources == ()  # What the layers without problems make.
    by_origin = {report.origin: report.problems for report in reports}
    assert by_origin[str(user)] == (
        f"{user}: max_output_tokens: Input should be greater than 0 (got -1)",
    )
    assert by_origin[str(project)] == (
        f'{project}: tools.bash_timeout: unknown setting; did you mean "tools.bash_timeout_s"?',
        f'{project}: tools.sandbox: unknown setting; did you mean "sandbox"?',
    )
    assert by_origin["environment"] == (
        'KESTREL_MAX_TURNS: Input should be a valid integer (got "many")',
    )
    assert by_origin["command line"] == ()
    with pytest.raises(ConfigError) as caught:
        load_settings(repo, env={"KESTREL_MAX_TURNS": "many"}, flags={}, home=home)
    assert len(str(caught.value).splitlines()) == 4


def test_an_unreadable_file_is_reported_and_the_others_still_checked(
    home: Path, repo: Path
) -> None:
    user = write(home / ".config" / "kestrel" / "settings.toml", "model = [\n")
    local = write(repo / ".kestrel" / "settings.local.toml", "max_turns = 3\n")
    reports, _ = check_settings(repo, env={}, flags={}, home=home)
    assert [r.origin for r in reports] == [str(user), str(local), "environment", "command line"]
    assert reports[0].problems[0].startswith(f"{user}: invalid TOML: ")
    assert reports[1].problems == (
        f'{local}: max_turns: unknown setting; did you mean "limits.max_turns"?',
    )


def test_good_settings_have_no_problems_and_load(home: Path, repo: Path) -> None:
    write(home / ".config" / "kestrel" / "settings.toml", "[limits]\nmax_turns = 7\n")
    reports, good = check_settings(repo, env={}, flags={"max_turns": 9}, home=home)
    assert all(not r.problems for r in reports)
    assert good is not None and good.limits.max_turns == 9
    assert load_settings(repo, env={}, flags={"max_turns": 9}, home=home).limits.max_turns == 9
