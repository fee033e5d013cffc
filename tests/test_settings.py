"""Settings: every layer of precedence, table merging, and what each mistake's message says."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import Limits
from kestrel.settings import Settings
from kestrel.settings_load import ENV_VARS, FLAG_NAMES, load_settings
from kestrel.settings_trust_actions import review, store_for, trust

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository root (it holds `.git`) with a nested working directory."""
    root = tmp_path / "work" / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "sub").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    """Write a settings file, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(
    cwd: Path,
    home: Path,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """`load_settings` with empty env and flags unless given."""
    return load_settings(cwd, env=env or {}, flags=flags or {}, home=home)


def trusted(path: Path, home: Path) -> Path:
    """Trust a repository's settings file as it is now, through the real store in `home`."""
    trust([review(path)], store_for(env={}, home=home))
    return path


def user_file(home: Path, text: str) -> Path:
    """Write the user's settings file in its default place."""
    return write(home / ".config" / "kestrel" / "settings.toml", text)


def test_defaults_when_nothing_is_configured(repo: Path, home: Path) -> None:
    settings = load(repo, home)
    assert settings.model_dump() == Settings().model_dump()
    assert settings.model == "anthropic:claude-sonnet-4-5"
    assert (settings.provider, settings.model_id) == ("anthropic", "claude-sonnet-4-5")
    assert settings.permission_mode == "default"
    assert settings.limits.as_limits() == Limits(max_turns=200)
    assert (settings.tools.bash_timeout_s, settings.tools.max_output_chars) == (120.0, 30_000)
    assert (settings.loop_detection.warn_after, settings.loop_detection.stop_after) == (3, 5)
    assert (settings.base_url, settings.data_dir, settings.max_output_tokens) == (None, None, 8192)
    assert settings.sources == ()
    assert settings.model_fields_set == set()


def test_fields_set_tells_chosen_values_from_defaults(repo: Path, home: Path) -> None:
    write(repo / ".kestrel" / "settings.toml", "[limits]\nmax_turns = 9\n")
    settings = load(repo, home, env={"KESTREL_MODEL": "openai:gpt-5"})
    assert settings.model_fields_set == {"model", "limits"}


def test_settings_are_frozen_and_strict() -> None:
    settings = Settings()
    with pytest.raises(pydantic.ValidationError):
        settings.model = "openai:gpt-5"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        Settings(colour="blue")  # type: ignore[call-arg]


def test_user_file_overrides_defaults(repo: Path, home: Path) -> None:
    path = user_file(home, 'model = "openai:gpt-5"\n')
    settings = load(repo, home)
    assert settings.model == "openai:gpt-5"
    assert settings.sources == (path,)


def test_xdg_config_home_moves_the_user_file(repo: Path, home: Path, tmp_path: Path) -> None:
    user_file(home, 'model = "openai:ignored"\n')
    xdg = write(tmp_path / "xdg" / "kestrel" / "settings.toml", 'model = "openai:from-xdg"\n')
    settings = load(repo, home, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert (settings.model, settings.sources) == ("openai:from-xdg", (xdg,))
    # The XDG spec says a relative value is ignored.
    assert load(repo, home, env={"XDG_CONFIG_HOME": "xdg"}).model == "openai:ignored"


def test_project_file_is_found_walking_up_to_the_repo_root(repo: Path, home: Path) -> None:
    user_file(home, 'model = "openai:user"\npermission_mode = "plan"\n')
    project = write(repo / ".kestrel" / "settings.toml", 'model = "openai:project"\n')
    settings = load(repo / "pkg" / "sub", home)
    assert (settings.model, settings.permission_mode) == ("openai:project", "plan")
    assert settings.sources[1:] == (project,)


def test_the_walk_stops_at_the_repo_root(repo: Path, home: Path) -> None:
    write(repo.parent / ".kestrel" / "settings.toml", 'model = "openai:outside"\n')
    assert load(repo / "pkg", home).model == "anthropic:claude-sonnet-4-5"


def test_without_a_repo_the_walk_goes_on_up(tmp_path: Path, home: Path) -> None:
    write(tmp_path / ".kestrel" / "settings.toml", 'model = "openai:above"\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert load(tmp_path / "a" / "b", home).model == "openai:above"


def test_nearest_project_directory_wins(repo: Path, home: Path) -> None:
    write(repo / ".kestrel" / "settings.toml", 'model = "openai:root"\n')
    write(repo / "pkg" / ".kestrel" / "settings.toml", 'model = "openai:pkg"\n')
    assert load(repo / "pkg" / "sub", home).model == "openai:pkg"


def test_local_file_overrides_project_file_and_tables_merge_key_by_key(
    repo: Path, home: Path
) -> None:
    user_file(
        home, "[limits]\nmax_cost_usd = 5.0\nmax_wall_s = 600\n[tools]\nbash_timeout_s = 30\n"
    )
    project = write(repo / ".kestrel" / "settings.toml", "[limits]\nmax_turns = 10\n")
    local = write(repo / ".kestrel" / "settings.local.toml", "[limits]\nmax_cost_usd = 1.5\n")
    settings = load(repo, home)
    assert settings.limits.as_limits() == Limits(max_turns=10, max_cost_usd=1.5, max_wall_s=600.0)
    assert settings.tools.bash_timeout_s == 30.0
    assert settings.sources[1:] == (project, local)


def test_a_local_file_alone_marks_the_project(repo: Path, home: Path) -> None:
    trusted(
        write(repo / ".kestrel" / "settings.local.toml", 'permission_mode = "accept-edits"\n'), home
    )
    assert load(repo / "pkg", home).permission_mode == "accept-edits"


def test_environment_overrides_every_file(repo: Path, home: Path) -> None:
    write(
        repo / ".kestrel" / "settings.local.toml",
        'model = "openai:local"\n[limits]\nmax_turns = 7\n',
    )
    env = {"KESTREL_MODEL": "scripted:demo.json", "KESTREL_MAX_COST_USD": "2.5"}
    settings = load(repo, home, env=env)
    assert settings.model == "scripted:demo.json"
    assert settings.limits.as_limits() == Limits(max_turns=7, max_cost_usd=2.5)


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("KESTREL_MODEL", "openai:gpt-5", ("model", "openai:gpt-5")),
        ("KESTREL_BASE_URL", "http://127.0.0.1:8000/v1", ("base_url", "http://127.0.0.1:8000/v1")),
        ("KESTREL_PERMISSION_MODE", "accept-edits", ("permission_mode", "accept-edits")),
        ("KESTREL_MAX_OUTPUT_TOKENS", "1024", ("max_output_tokens", 1024)),
        ("KESTREL_MAX_TURNS", "12", ("limits.max_turns", 12)),
        ("KESTREL_MAX_TURNS", "none", ("limits.max_turns", None)),
        ("KESTREL_TURN_GRACE", "0", ("limits.turn_grace", 0.0)),
        ("KESTREL_MAX_TOKENS", "50000", ("limits.max_tokens", 50_000)),
        ("KESTREL_MAX_COST_USD", "0.75", ("limits.max_cost_usd", 0.75)),
        ("KESTREL_MAX_WALL_S", "90", ("limits.max_wall_s", 90.0)),
        ("KESTREL_BASH_TIMEOUT_S", "2.5", ("tools.bash_timeout_s", 2.5)),
        ("KESTREL_MAX_OUTPUT_CHARS", "100", ("tools.max_output_chars", 100)),
        ("KESTREL_LOOP_WARN_AFTER", "2", ("loop_detection.warn_after", 2)),
        ("KESTREL_LOOP_STOP_AFTER", "9", ("loop_detection.stop_after", 9)),
    ],
)
def test_each_environment_variable(
    repo: Path, home: Path, var: str, value: str, expected: tuple[str, object]
) -> None:
    dotted, wanted = expected
    got: Any = load(repo, home, env={var: value})
    for part in dotted.split("."):
        got = getattr(got, part)
    assert got == wanted
    assert ENV_VARS[var] == tuple(dotted.split("."))


def test_empty_environment_variables_are_unset(repo: Path, home: Path) -> None:
    assert load(repo, home, env={"KESTREL_MODEL": "", "KESTREL_MAX_TURNS": " "}) == Settings()


def test_flags_override_the_environment_and_none_is_ignored(repo: Path, home: Path) -> None:
    env = {
        "KESTREL_MODEL": "openai:env",
        "KESTREL_MAX_TURNS": "3",
        "KESTREL_PERMISSION_MODE": "plan",
    }
    flags = {
        "model": "openai:flag",
        "max_turns": None,
        "max_cost_usd": 0.5,
        "permission_mode": None,
    }
    settings = load(repo, home, env=env, flags=flags)
    assert (settings.model, settings.permission_mode) == ("openai:flag", "plan")
    assert settings.limits.as_limits() == Limits(max_turns=3, max_cost_usd=0.5)


def test_every_flag_name_is_accepted(repo: Path, home: Path) -> None:
    assert load(repo, home, flags=dict.fromkeys(FLAG_NAMES)) == Settings()


def test_data_dir_is_anchored_where_it_was_written(repo: Path, home: Path) -> None:
    trusted(write(repo / ".kestrel" / "settings.toml", 'data_dir = "state"\n'), home)
    assert load(repo / "pkg", home).data_dir == repo / ".kestrel" / "state"
    user_file(home, 'data_dir = "~/kestrel-data"\n')
    assert load(repo.parent, home).data_dir == home / "kestrel-data"
    env = {"KESTREL_DATA_DIR": "rel"}
    assert load(repo / "pkg", home, env=env).data_dir == repo / "pkg" / "rel"
    assert load(repo, home, flags={"data_dir": "/abs/dir"}).data_dir == Path("/abs/dir")
    assert load(repo, home, flags={"data_dir": Path("rel")}).data_dir == repo / "rel"


def error_of(cwd: Path, home: Path, **kwargs: Any) -> str:
    """The message of the `ConfigError` that loading raises."""
    with pytest.raises(ConfigError) as caught:
        load(cwd, home, **kwargs)
    return str(caught.value)


def test_a_wrong_type_names_the_file_the_field_and_the_value(repo: Path, home: Path) -> None:
    path = write(repo / ".kestrel" / "settings.toml", '[limits]\nmax_turns = "ten"\n')
    assert (
        error_of(repo, home)
        == f'{path}: limits.max_turns: Input should be a valid integer (got "ten")'
    )


def test_a_toml_syntax_error_names_the_file_and_the_line(repo: Path, home: Path) -> None:
    path = user_file(home, 'model = "openai:x"\nlimits = = 3\n')
    message = error_of(repo, home)
    assert message.startswith(f"{path}: invalid TOML: ")
    assert "line 2" in message


def test_a_file_that_is_not_utf8_is_named(repo: Path, home: Path) -> None:
    path = repo / ".kestrel" / "settings.toml"
    path.parent.mkdir()
    path.write_bytes(b'model = "\xff"\n')
    assert error_of(repo, home).startswith(f"{path}: not UTF-8 text")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("modle = 'openai:x'\n", 'modle: unknown setting; did you mean "model"?'),
        (
            "[limits]\nmax_turn = 3\n",
            'limits.max_turn: unknown setting; did you mean "limits.max_turns"?',
        ),
        ("max_turns = 3\n", 'max_turns: unknown setting; did you mean "limits.max_turns"?'),
        ("[limit]\nmax_turns = 3\n", 'limit: unknown setting; did you mean "limits"?'),
        ("flavour = 'mint'\n", "flavour: unknown setting"),
    ],
)
def test_an_unknown_key_is_named_with_the_closest_known_one(
    repo: Path, home: Path, text: str, expected: str
) -> None:
    path = write(repo / ".kestrel" / "settings.local.toml", text)
    assert error_of(repo, home) == f"{path}: {expected}"


BAD_VALUES = [
    (
        "model = 'gpt-5'\n",
        'model: expected "provider:model-id" with provider one of anthropic, openai, scripted'
        ' (got "gpt-5")',
    ),
    ("model = 'mistral:large'\n", "model: expected"),
    (
        "permission_mode = 'yolo'\n",
        "permission_mode: Input should be 'default', 'accept-edits', 'plan' or 'bypass'",
    ),
    (
        "[limits]\nmax_cost_usd = -1\n",
        "limits.max_cost_usd: Input should be greater than 0 (got -1)",
    ),
    ("[tools]\nmax_output_chars = 0\n", "tools.max_output_chars: Input should be greater than 0"),
    ("base_url = 'localhost'\n", 'base_url: expected an http:// or https:// URL (got "localhost")'),
    ("limits = 5\n", "limits: Input should be a valid dictionary or instance of LimitSettings"),
    (
        "[loop_detection]\nwarn_after = 4\nstop_after = 2\n",
        "loop_detection: stop_after (2) must be at least warn_after (4)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_VALUES)
def test_each_bad_value_is_described(repo: Path, home: Path, text: str, expected: str) -> None:
    write(repo / ".kestrel" / "settings.toml", text)
    assert expected in error_of(repo, home)


def test_every_problem_in_a_file_is_listed(repo: Path, home: Path) -> None:
    write(
        repo / ".kestrel" / "settings.toml",
        "max_output_tokens = 0\n[tools]\nbash_timeout_s = 'x'\n",
    )
    path = repo / ".kestrel" / "settings.toml"
    assert sorted(error_of(repo, home).splitlines()) == [
        f"{path}: max_output_tokens: Input should be greater than 0 (got 0)",
        f'{path}: tools.bash_timeout_s: Input should be a valid number (got "x")',
    ]


def test_a_bad_environment_variable_is_named(repo: Path, home: Path) -> None:
    message = error_of(repo, home, env={"KESTREL_MAX_TURNS": "ten"})
    assert message == 'KESTREL_MAX_TURNS: Input should be a valid integer (got "ten")'
    message = error_of(repo, home, env={"KESTREL_PERMISSION_MODE": "yolo"})
    assert message.startswith("KESTREL_PERMISSION_MODE: Input should be 'default'")


def test_a_bad_flag_is_named_as_the_flag(repo: Path, home: Path) -> None:
    assert (
        error_of(repo, home, flags={"max_turns": 0})
        == "--max-turns: Input should be greater than 0 (got 0)"
    )
    assert (
        error_of(repo, home, flags={"max_turn": 3})
        == "unknown flag setting 'max_turn'; did you mean \"max_turns\"?"
    )


def test_cross_field_rules_apply_to_the_merged_settings(repo: Path, home: Path) -> None:
    # A file may rely on a higher layer to make the combination valid...
    write(repo / ".kestrel" / "settings.toml", "[loop_detection]\nstop_after = 2\n")
    assert load(repo, home, env={"KESTREL_LOOP_WARN_AFTER": "1"}).loop_detection.stop_after == 2
    # ...and when none does, the merged result is what is blamed.
    assert error_of(repo, home) == (
        "combined settings: loop_detection: stop_after (2) must be at least warn_after (3)"
    )


def test_a_lower_layer_error_is_reported_even_when_overridden(repo: Path, home: Path) -> None:
    path = user_file(home, "max_output_tokens = 'lots'\n")
    assert error_of(repo, home, flags={"max_output_tokens": 10}).startswith(f"{path}: ")


def test_unlimited_can_be_written_in_a_file(repo: Path, home: Path) -> None:
    write(repo / ".kestrel" / "settings.toml", "[limits]\nmax_turns = 'unlimited'\n")
    assert load(repo, home).limits.max_turns is None


def test_nothing_is_read_at_import(tmp_path: Path) -> None:
    user_file(tmp_path, "this is = not toml =\n")
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config"), "PATH": ""}
    code = "import kestrel.settings, kestrel.store; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
    assert not (tmp_path / ".local").exists()


def test_the_configuration_doc_names_every_setting_and_variable() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name, info in Settings.model_fields.items():
        table = info.annotation
        if not (isinstance(table, type) and issubclass(table, pydantic.BaseModel)):
            assert f"`{name}`" in text, name
        else:
            assert f"`[{name}]`" in text, name
            for sub in table.model_fields:
                assert f"`{name}.{sub}`" in text, f"{name}.{sub}"
    for var in ENV_VARS:
        assert f"`{var}`" in text, var
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "XDG_CONFIG_HOME"):
        assert key in text


def test_permission_rules_from_every_layer_combine(repo: Path, home: Path) -> None:
    user = user_file(home, '[permissions]\ndeny = ["Bash(git push:*)"]\nallow = ["Bash(ls:*)"]\n')
    project = write(
        repo / ".kestrel" / "settings.toml", '[permissions]\nallow = ["Bash(pytest:*)"]\n'
    )
    trusted(project, home)
    settings = load(repo, home, flags={"allow": ["Edit(src/**)"], "deny": ["Read(.env)"]})
    # A project file cannot drop the user's deny rule by writing its own list.
    assert settings.permissions.deny == ["Bash(git push:*)", "Read(.env)"]
    assert settings.permissions.allow == ["Bash(ls:*)", "Bash(pytest:*)", "Edit(src/**)"]
    assert settings.rule_origins["Bash(git push:*)"] == str(user)
    assert settings.rule_origins["Bash(pytest:*)"] == str(project)
    assert settings.rule_origins["Edit(src/**)"] == "command line"


def test_a_malformed_rule_names_its_file(repo: Path, home: Path) -> None:
    path = write(repo / ".kestrel" / "settings.toml", '[permissions]\nallow = ["Bash(npm test"]\n')
    with pytest.raises(ConfigError) as caught:
        load(repo, home)
    assert str(path) in str(caught.value)
    assert "is not a rule" in str(caught.value)


@pytest.mark.parametrize("where", ["project", "env"])
def test_bypass_mode_is_only_ever_chosen_on_the_command_line(
    repo: Path, home: Path, where: str
) -> None:
    env = {}
    if where == "project":
        write(repo / ".kestrel" / "settings.toml", 'permission_mode = "bypass"\n')
    else:
        env = {"KESTREL_PERMISSION_MODE": "bypass"}
    with pytest.raises(ConfigError, match="only be chosen on the command line"):
        load(repo, home, env=env)
    (repo / ".kestrel" / "settings.toml").unlink(missing_ok=True)
    assert load(repo, home, flags={"permission_mode": "bypass"}).permission_mode == "bypass"


def test_hooks_are_read_and_checked(repo: Path, home: Path) -> None:
    user_file(
        home,
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\n'
        '[[hooks.PreToolUse.hooks]]\ncommand = "./check.sh"\ntimeout = 5\n',
    )
    project = write(
        repo / ".kestrel" / "settings.toml",
        '[[hooks.PreToolUse]]\nmatcher = "Edit|Write"\nhooks = [{ command = "lint" }]\n',
    )
    trusted(project, home)
    settings = load(repo, home)
    matchers = settings.hooks.PreToolUse
    assert [m.matcher for m in matchers] == ["Bash", "Edit|Write"]
    assert matchers[0].hooks[0].timeout == 5
    assert matchers[1].hooks[0].on_error == "deny"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[hooks.PreToolUse]]\nmatcher = "("\nhooks = [{ command = "x" }]\n', "regular"),
        ('[[hooks.PreTool]]\nhooks = [{ command = "x" }]\n', "unknown setting"),
        ('[[hooks.Stop]]\nhooks = [{ command = "  " }]\n', "needs a command"),
        ('[[hooks.Stop]]\nhooks = [{ command = "x", on_error = "allow" }]\n', "on_error"),
    ],
)
def test_bad_hook_settings_are_explained(repo: Path, home: Path, text: str, message: str) -> None:
    write(repo / ".kestrel" / "settings.toml", text)
    with pytest.raises(ConfigError, match=message):
        load(repo, home)


def test_a_network_allow_list_needs_hosts(repo: Path, home: Path) -> None:
    trusted(write(repo / ".kestrel" / "settings.toml", 'network = "allowlist"\n'), home)
    with pytest.raises(ConfigError, match="network_allow"):
        load(repo, home)
    project = write(
        repo / ".kestrel" / "settings.toml",
        'network = "allowlist"\nnetwork_allow = ["pypi.org"]\n',
    )
    trusted(project, home)
    assert load(repo, home).network_allow == ["pypi.org"]
