"""Server kinds from URLs and answers, and capabilities from choices: pure functions."""

from __future__ import annotations

import pytest

from kestrel.models.endpoint import (
    EndpointChoices,
    kind_from_fingerprint,
    kind_from_owner,
    kind_from_port,
    kind_from_url,
    resolve,
)
from kestrel.models.retry import RetryPolicy
from kestrel.protocol.errors import EmptyReply, NetworkError, StreamCut


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        (None, "openai"),
        ("https://api.openai.com/v1", "openai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://127.0.0.1:8000/v1", None),
        ("http://gpu-box:11434/v1", None),
    ],
)
def test_kind_from_url(url: str | None, kind: str | None) -> None:
    assert kind_from_url(url) == kind


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:11434/v1", "ollama"),
        ("http://127.0.0.1:1234/v1", "lmstudio"),
        ("http://127.0.0.1:8080/v1", "llama-server"),
        # vLLM and llama-cpp-python both default to 8000: the port cannot tell them apart.
        ("http://127.0.0.1:8000/v1", None),
        ("http://127.0.0.1/v1", None),
    ],
)
def test_kind_from_port(url: str, kind: str | None) -> None:
    assert kind_from_port(url) == kind


def test_owners_and_fingerprints() -> None:
    assert [kind_from_owner(o) for o in ("vllm", "me", "llamacpp", "library", "acme")] == [
        "vllm",
        "llama-cpp-python",
        "llama-server",
        "ollama",
        None,
    ]
    assert kind_from_fingerprint("b5921-3f4c1d2e") == "llama-server"
    assert kind_from_fingerprint("fp_44709d6fcb") is None
    assert kind_from_fingerprint(None) is None


def test_openai_keeps_the_newer_field_and_others_get_max_tokens() -> None:
    assert resolve(EndpointChoices(), "openai").max_tokens_field == "max_completion_tokens"
    for kind in ("vllm", "ollama", "lmstudio", "llama-server", "openrouter", None):
        assert resolve(EndpointChoices(), kind).max_tokens_field == "max_tokens"  # type: ignore[arg-type]


def test_choices_win_and_sources_say_so() -> None:
    choices = EndpointChoices(stream_tool_calls=True, tool_choice="auto")

    caps = resolve(choices, "llama-cpp-python", "owned_by me")

    assert (caps.kind, caps.stream_tool_calls, caps.usage, caps.tool_choice) == (
        "llama-cpp-python",
        True,
        False,
        "auto",
    )
    assert dict(caps.sources) == {
        "kind": "detected",
        "max_tokens_field": "detected",
        "stream_tool_calls": "setting",
        "usage": "detected",
        "tool_choice": "setting",
    }


def test_a_set_kind_beats_detection() -> None:
    caps = resolve(EndpointChoices(kind="openai"), "vllm")

    assert (caps.kind, caps.source("kind"), caps.max_tokens_field) == (
        "openai",
        "setting",
        "max_completion_tokens",
    )
    assert caps.source("max_tokens_field") == "default"


def test_needs_kind_only_while_something_is_left_to_detection() -> None:
    assert EndpointChoices().needs_kind
    assert not EndpointChoices(kind="vllm").needs_kind
    every = EndpointChoices(max_tokens_field="max_tokens", stream_tool_calls=True, usage=True)
    assert not every.needs_kind


def test_cut_and_empty_replies_get_exactly_one_retry() -> None:
    policy = RetryPolicy(max_attempts=5, jitter=0.0)

    for error in (StreamCut("cut"), EmptyReply("empty")):
        assert policy.delay_for(1, error, 0.5) == 1.0
        assert policy.delay_for(2, error, 0.5) is None
    assert policy.delay_for(4, NetworkError("reset"), 0.5) == 8.0
    assert RetryPolicy(max_attempts=1).delay_for(1, StreamCut("cut"), 0.5) is None
