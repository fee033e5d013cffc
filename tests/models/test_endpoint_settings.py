"""The `[endpoint]` table, its variables and flags, and how they reach a provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.app import build_provider, endpoint_for, router_for
from kestrel.models.endpoint import EndpointChoices, resolve
from kestrel.models.openai_compat import OpenAICompatProvider
from kestrel.protocol.errors import ConfigError
from kestrel.settings_load import ENV_VARS, load_settings


def user_file(home: Path, text: str) -> None:
    path = home / ".config" / "kestrel" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def load(tmp_path: Path, env: dict[str, str] | None = None, **flags: object) -> EndpointChoices:
    home = tmp_path / "home"
    settings = load_settings(tmp_path, env=env or {}, flags=flags, home=home)
    return settings.endpoint.choices()


def test_defaults_leave_everything_to_detection(tmp_path: Path) -> None:
    assert load(tmp_path) == EndpointChoices()


def test_file_then_environment_then_flag(tmp_path: Path) -> None:
    user_file(
        tmp_path / "home",
        '[endpoint]\nkind = "vllm"\nmax_tokens_field = "max_completion_tokens"\n'
        'stream_tool_calls = false\ntool_choice = "auto"\nusage = false\n',
    )
    from_file = load(tmp_path)
    assert from_file == EndpointChoices(
        kind="vllm",
        max_tokens_field="max_completion_tokens",
        stream_tool_calls=False,
        tool_choice="auto",
        usage=False,
    )

    env = {
        "KESTREL_MAX_TOKENS_FIELD": "max_tokens",
        "KESTREL_STREAM_TOOL_CALLS": "true",
        "KESTREL_TOOL_CHOICE": "required",
        "KESTREL_ENDPOINT_KIND": "auto",
    }
    from_env = load(tmp_path, env)
    assert (from_env.kind, from_env.max_tokens_field, from_env.stream_tool_calls) == (
        None,
        "max_tokens",
        True,
    )
    assert (from_env.tool_choice, from_env.usage) == ("required", False)

    from_flag = load(tmp_path, env, max_tokens_field="max_completion_tokens")
    assert from_flag.max_tokens_field == "max_completion_tokens"


def test_every_endpoint_variable_is_read() -> None:
    endpoint_vars = {name for name, path in ENV_VARS.items() if path[0] == "endpoint"}
    assert endpoint_vars == {
        "KESTREL_ENDPOINT_KIND",
        "KESTREL_MAX_TOKENS_FIELD",
        "KESTREL_STREAM_TOOL_CALLS",
        "KESTREL_TOOL_CHOICE",
        "KESTREL_EXPECT_USAGE",
        "KESTREL_ENDPOINT_PROBE",
    }


def test_a_bad_value_names_its_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="KESTREL_MAX_TOKENS_FIELD"):
        load(tmp_path, {"KESTREL_MAX_TOKENS_FIELD": "max_output_tokens"})


def test_base_url_flag_and_endpoint_reach_the_provider(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1"
    settings = load_settings(
        tmp_path,
        env={"KESTREL_STREAM_TOOL_CALLS": "false"},
        flags={"model": "openai:local", "base_url": url, "max_tokens_field": "max_tokens"},
        home=tmp_path / "home",
    )
    provider = router_for(settings, tmp_path).for_role("main")._candidates[0].provider
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.url == url
    choices = endpoint_for(settings, settings.base_url)
    assert choices is not None
    caps = resolve(choices, "vllm")
    assert (caps.max_tokens_field, caps.stream_tool_calls, caps.usage) == (
        "max_tokens",
        False,
        True,
    )
    assert (caps.source("max_tokens_field"), caps.source("usage")) == ("setting", "detected")
    # A model with an endpoint of its own is not described by `[endpoint]`.
    assert endpoint_for(settings, "http://elsewhere:8000/v1") is None


def test_build_provider_takes_the_choices() -> None:
    provider = build_provider(
        "openai:m", base_url="http://127.0.0.1:9/v1", endpoint=EndpointChoices(kind="ollama")
    )
    assert isinstance(provider, OpenAICompatProvider)
