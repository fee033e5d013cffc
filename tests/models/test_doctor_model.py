"""`model_checks`: the endpoint, its detected kind and each capability, against a real server."""

from __future__ import annotations

from pathlib import Path

from wire_server import WireServer, model_list

from kestrel.cli.doctor_model import DoctorCheck, model_checks
from kestrel.settings import Settings
from kestrel.settings_load import load_settings


def settings_for(tmp_path: Path, url: str, **flags: object) -> Settings:
    flags = {"model": "openai:local-model", "base_url": url, **flags}
    return load_settings(tmp_path, env={}, flags=flags, home=tmp_path / "home")


def by_name(checks: list[DoctorCheck]) -> dict[str, DoctorCheck]:
    return {check.name: check for check in checks}


def test_detected_kind_and_where_each_capability_came_from(
    wire: WireServer, tmp_path: Path
) -> None:
    wire.pages["/v1/models"] = model_list("me")
    url = f"{wire.url}/v1"
    settings = settings_for(tmp_path, url, max_tokens_field="max_completion_tokens")

    checks = by_name(model_checks("openai:local-model", settings, {}))

    assert checks["credentials"].status == "ok"
    assert checks["endpoint"].detail == url
    kind = checks["server kind"]
    assert kind.status == "ok" and kind.detail.startswith("llama-cpp-python (detected:")
    assert '"me"' in kind.detail
    assert checks["max_tokens_field"].detail == "max_completion_tokens (setting)"
    assert checks["stream_tool_calls"].detail.startswith("no ")
    assert checks["stream_tool_calls"].detail.endswith("(detected: llama-cpp-python)")
    assert checks["tool_choice"].detail == "omit (default)"
    assert wire.received == []  # no model call, only GETs
    assert [get.path for get in wire.gets] == ["/v1/models"]


def test_unreachable_server_warns_and_shows_the_safe_defaults(
    wire: WireServer, tmp_path: Path
) -> None:
    url = "http://127.0.0.1:9/v1"

    checks = by_name(model_checks("openai:m", settings_for(tmp_path, url), {}))

    assert checks["server kind"].status == "warn"
    assert checks["endpoint reachable"].status == "warn"
    assert "could not connect" in checks["endpoint reachable"].detail
    assert checks["max_tokens_field"].detail == "max_tokens (default)"


def test_without_probe_nothing_is_sent(wire: WireServer, tmp_path: Path) -> None:
    wire.pages["/v1/models"] = model_list("vllm")
    settings = settings_for(tmp_path, f"{wire.url}/v1")

    checks = by_name(model_checks("openai:m", settings, {}, probe=False))

    assert wire.gets == [] and checks["server kind"].status == "warn"
    assert "endpoint reachable" not in checks


def test_set_kind_needs_no_probe(wire: WireServer, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, f"{wire.url}/v1", endpoint_kind="ollama")

    checks = by_name(model_checks("openai:m", settings, {}))

    assert checks["server kind"].detail == "ollama (setting)"
    assert checks["max_tokens_field"].detail == "max_tokens (default for ollama)"
    assert wire.gets == []


def test_anthropic_model_shows_its_endpoint(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={}, flags={}, home=tmp_path / "home")

    checks = model_checks("anthropic:claude-sonnet-4-5", settings, {"ANTHROPIC_API_KEY": "k"})

    assert [(c.name, c.status) for c in checks] == [("credentials", "ok"), ("endpoint", "info")]
    assert checks[1].detail == "https://api.anthropic.com"
