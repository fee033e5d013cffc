"""What an OpenAI-compatible endpoint can do, and how Kestrel tells one server from another.

Servers that speak Chat Completions differ in small ways that break a session: llama.cpp and older
servers read only `max_tokens`, llama-cpp-python cannot stream a tool call, some servers send no
usage. `EndpointChoices` is what the user set (None: detect it); `resolve` turns it, with the
server kind detected by `kestrel.models.endpoint_probe`, into the frozen `EndpointCapabilities`
the provider sends requests by. Everything here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import urlsplit

ServerKind = Literal[
    "openai",
    "openrouter",
    "vllm",
    "ollama",
    "lmstudio",
    "llama-server",
    "llama-cpp-python",
    "unknown",
]
"""The servers Kestrel knows the habits of; `unknown` gets the safe defaults."""
SERVER_KINDS: tuple[ServerKind, ...] = get_args(ServerKind)
"""Every `ServerKind`, in the order messages list them."""

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]
"""The request field that carries the output limit."""
ToolChoice = Literal["omit", "none", "auto", "required"]
"""The `tool_choice` sent with requests that offer tools; `omit` sends none."""
Source = Literal["setting", "detected", "default"]
"""Where a capability's value came from."""

CAPABILITIES: tuple[str, ...] = ("max_tokens_field", "stream_tool_calls", "tool_choice", "usage")
"""The capability names, as settings and the doctor spell them."""

OPENAI_URL = "https://api.openai.com/v1"
"""Where the `openai` provider goes when no base URL is set."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointCapabilities:
    """How requests to one endpoint are shaped, each value with where it came from."""

    kind: ServerKind = "unknown"
    max_tokens_field: MaxTokensField = "max_tokens"
    stream_tool_calls: bool = True
    """False: requests that offer tools are sent with stream=false and replayed as parts."""
    tool_choice: ToolChoice = "omit"
    usage: bool = True
    """True: ask for usage in the stream (`stream_options`); False: expect none and estimate."""
    sources: tuple[tuple[str, Source], ...] = ()
    """(name, source) for `kind` and every capability."""
    evidence: str = ""
    """How the kind was found, in words (e.g. "owned_by of /v1/models is vllm")."""

    def source(self, name: str) -> Source:
        """Where the value of `name` (`kind` or a capability) came from."""
        return dict(self.sources).get(name, "default")


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointChoices:
    """What the user set for an endpoint; None means detect it (or use the kind's default)."""

    kind: ServerKind | None = None
    max_tokens_field: MaxTokensField | None = None
    stream_tool_calls: bool | None = None
    tool_choice: ToolChoice | None = None
    """None: the default, `omit`; no server needs one guessed for it."""
    usage: bool | None = None
    probe: bool = True
    """May Kestrel send one GET to the server to find its kind (never a model call)?"""

    @property
    def needs_kind(self) -> bool:
        """Whether some value is left to detection, so the server's kind matters."""
        return self.kind is None and (
            self.max_tokens_field is None or self.stream_tool_calls is None or self.usage is None
        )


@dataclass(frozen=True, slots=True)
class _Habits:
    max_tokens_field: MaxTokensField
    stream_tool_calls: bool
    usage: bool


_HABITS: dict[ServerKind, _Habits] = {
    "openai": _Habits("max_completion_tokens", True, True),
    "openrouter": _Habits("max_tokens", True, True),
    "vllm": _Habits("max_tokens", True, True),
    "ollama": _Habits("max_tokens", True, True),
    "lmstudio": _Habits("max_tokens", True, True),
    "llama-server": _Habits("max_tokens", True, True),
    # Its function-calling chat formats raise when asked to stream a tool call, and its streams
    # carry no usage.
    "llama-cpp-python": _Habits("max_tokens", False, False),
    # Safe for any server: every compatible server reads `max_tokens`.
    "unknown": _Habits("max_tokens", True, True),
}

_OWNED_BY: dict[str, ServerKind] = {
    "vllm": "vllm",
    "llamacpp": "llama-server",
    "me": "llama-cpp-python",
    "library": "ollama",
    "ollama": "ollama",
    "organization_owner": "lmstudio",
}
"""The `owned_by` each server writes into its /v1/models entries."""

_PORTS: dict[int, ServerKind] = {11434: "ollama", 1234: "lmstudio", 8080: "llama-server"}
"""Default ports that only one well-known server uses (8000 is vLLM's and llama-cpp-python's)."""


def kind_from_url(base_url: str | None) -> ServerKind | None:
    """The kind a hosted service's URL names for certain; None for any other URL."""
    if base_url is None:
        return "openai"
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "api.openai.com":
        return "openai"
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    return None


def kind_from_port(base_url: str | None) -> ServerKind | None:
    """The server a local URL's port suggests, when only one well-known server defaults to it."""
    if base_url is None:
        return None
    try:
        port = urlsplit(base_url).port
    except ValueError:
        return None
    return _PORTS.get(port) if port is not None else None


def kind_from_owner(owned_by: str) -> ServerKind | None:
    """The server whose /v1/models lists models as owned by `owned_by`."""
    return _OWNED_BY.get(owned_by.strip().lower())


def kind_from_server_header(value: str) -> ServerKind | None:
    """The server that names itself in an HTTP `Server` header, if one does."""
    lowered = value.lower()
    if "llama.cpp" in lowered or "llama-server" in lowered:
        return "llama-server"
    if "ollama" in lowered:
        return "ollama"
    return None


def kind_from_fingerprint(fingerprint: str | None) -> ServerKind | None:
    """llama-server's `system_fingerprint` is its build, `b<number>-<commit>`."""
    if not fingerprint or not fingerprint.startswith("b"):
        return None
    number, _, commit = fingerprint[1:].partition("-")
    return "llama-server" if number.isdigit() and commit else None


def resolve(
    choices: EndpointChoices, detected: ServerKind | None, evidence: str = ""
) -> EndpointCapabilities:
    """The capabilities: explicit choices first, then the detected kind's habits, then defaults."""
    kind_source: Source
    if choices.kind is not None:
        kind, kind_source, evidence = choices.kind, "setting", "set"
    elif detected is not None:
        kind, kind_source = detected, "detected"
    else:
        kind, kind_source = "unknown", "default"
    habits = _HABITS[kind]
    derived: Source = "detected" if kind_source == "detected" else "default"
    explicit = {
        "max_tokens_field": choices.max_tokens_field,
        "stream_tool_calls": choices.stream_tool_calls,
        "usage": choices.usage,
        "tool_choice": choices.tool_choice,
    }
    sources: list[tuple[str, Source]] = [("kind", kind_source)]
    for name, value in explicit.items():
        fallback: Source = "default" if name == "tool_choice" else derived
        sources.append((name, "setting" if value is not None else fallback))
    return EndpointCapabilities(
        kind=kind,
        max_tokens_field=choices.max_tokens_field or habits.max_tokens_field,
        stream_tool_calls=_first(choices.stream_tool_calls, habits.stream_tool_calls),
        tool_choice=choices.tool_choice or "omit",
        usage=_first(choices.usage, habits.usage),
        sources=tuple(sources),
        evidence=evidence,
    )


def _first(chosen: bool | None, habit: bool) -> bool:
    return habit if chosen is None else chosen
