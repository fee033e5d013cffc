"""The `[models]` table: each role's models in failover order, and how `model` leads main."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel import app
from kestrel.protocol.errors import ConfigError
from kestrel.settings import ModelChoice, Settings
from kestrel.settings_load import load_settings
from kestrel.settings_trust_actions import review, store_for, trust


def settings(tmp_path: Path, text: str, **flags: object) -> Settings:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / ".kestrel").mkdir(exist_ok=True)
    (tmp_path / ".kestrel" / "settings.toml").write_text(text)
    # The user trusts the file (endpoints in a repository's file need it), in a fresh home.
    trust(
        [review(tmp_path / ".kestrel" / "settings.toml")], store_for(env={}, home=tmp_path / "home")
    )
    return load_settings(tmp_path, env={}, flags=flags, home=tmp_path / "home")


def test_without_a_models_table_every_role_uses_model(tmp_path: Path) -> None:
    s = settings(tmp_path, 'model = "openai:gpt-4.1"\n')
    for role in ("main", "plan", "fast", "edit"):
        assert s.role_models(role) == (ModelChoice("openai:gpt-4.1"),)


def test_the_main_list_leads_when_no_layer_chooses_model(tmp_path: Path) -> None:
    s = settings(
        tmp_path,
        'base_url = "http://127.0.0.1:8000"\n'
        "[models]\n"
        'main = ["openai:qwen3-coder", "anthropic:claude-sonnet-4-6"]\n'
        'fast = "anthropic:claude-haiku-4-5"\n',
    )
    assert s.model == "openai:qwen3-coder"
    # A plain entry of the same provider as `model` is reached at base_url; others are not.
    assert s.role_models("main") == (
        ModelChoice("openai:qwen3-coder", "http://127.0.0.1:8000"),
        ModelChoice("anthropic:claude-sonnet-4-6"),
    )
    assert s.role_models("fast") == (ModelChoice("anthropic:claude-haiku-4-5"),)
    assert s.role_models("plan") == s.role_models("main") == s.role_models("edit")


def test_a_chosen_model_goes_first_and_is_not_repeated(tmp_path: Path) -> None:
    text = '[models]\nmain = ["anthropic:claude-sonnet-4-6", "openai:gpt-4.1"]\n'
    s = settings(tmp_path, text, model="openai:gpt-4.1")
    assert [c.model for c in s.role_models("main")] == [
        "openai:gpt-4.1",
        "anthropic:claude-sonnet-4-6",
    ]


def test_a_table_entry_names_its_own_endpoint(tmp_path: Path) -> None:
    s = settings(
        tmp_path,
        'model = "anthropic:claude-opus-4-6"\n'
        'base_url = "https://proxy.example"\n'
        "[models]\n"
        'main = ["anthropic:claude-opus-4-6", '
        '{ model = "openai:gpt-5", base_url = "http://127.0.0.1:9000/v1" }]\n'
        "failover_after = 2\n",
    )
    assert s.role_models("main") == (
        ModelChoice("anthropic:claude-opus-4-6", "https://proxy.example"),
        ModelChoice("openai:gpt-5", "http://127.0.0.1:9000/v1"),
    )
    assert s.models.failover_after == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models]\nmain = ["nope"]\n', 'models.main: expected "provider:model-id"'),
        ('[models]\nfast = [{ model = "openai:x", base_url = "ftp://x" }]\n', "http:// or"),
        ("[models]\nmian = []\n", 'did you mean "models.main"'),
        ("[models]\nfailover_after = 0\n", "models.failover_after"),
        ('[models]\nedit = [{ base_url = "http://x" }]\n', "models.edit.0.table.model"),
    ],
)
def test_bad_role_settings_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        settings(tmp_path, text)
    assert str(caught.value).count("\n") == 0  # One problem, reported once.


def test_every_listed_model_needs_its_key_before_the_session_starts(tmp_path: Path) -> None:
    s = settings(tmp_path, '[models]\nmain = ["anthropic:claude-sonnet-4-6", "openai:gpt-4.1"]\n')
    app.check_credentials(s, {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"})
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY is not set.*main role"):
        app.check_credentials(s, {"ANTHROPIC_API_KEY": "k"})


def test_the_router_follows_the_settings(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text("[]")
    s = settings(
        tmp_path,
        '[models]\nmain = ["scripted:script.json", "openai:gpt-4.1"]\n'
        'fast = "openai:gpt-4.1-mini"\n',
    )
    router = app.router_for(s, tmp_path)
    assert router.for_role("main").names == ("scripted:script.json", "openai:gpt-4.1")
    assert router.for_role("fast").names == ("openai:gpt-4.1-mini",)
    assert router.first_models()["edit"] == "scripted:script.json"
