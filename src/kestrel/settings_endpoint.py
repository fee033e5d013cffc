"""The `[endpoint]` settings table: how requests to the OpenAI-compatible server at `base_url`
are shaped, where detection would guess wrong or a server needs it spelled out.

    [endpoint]
    kind = "auto"               # or llama-cpp-python, llama-server, vllm, ollama, lmstudio,
                                # openrouter, openai, unknown
    max_tokens_field = "auto"   # or max_tokens, max_completion_tokens
    stream_tool_calls = "auto"  # or true, false (false: tool turns are sent with stream=false)
    tool_choice = "omit"        # or none, auto, required
    usage = "auto"              # or true, false (false: ask for no usage, estimate tokens)
    probe = true                # may Kestrel GET /v1/models once to find the server's kind

"auto" takes the value from the server's kind: set, or detected from the URL and a probe.
Variables: `KESTREL_ENDPOINT_KIND`, `KESTREL_MAX_TOKENS_FIELD`, `KESTREL_STREAM_TOOL_CALLS`,
`KESTREL_TOOL_CHOICE`, `KESTREL_EXPECT_USAGE`, `KESTREL_ENDPOINT_PROBE`; flags `--base-url` and
`--max-tokens-field`. See docs/providers.md.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict

from kestrel.models.endpoint import SERVER_KINDS, EndpointChoices

TABLE = "endpoint"
"""The table's name in a settings file."""

KindSetting = Literal[
    "auto",
    "openai",
    "openrouter",
    "vllm",
    "ollama",
    "lmstudio",
    "llama-server",
    "llama-cpp-python",
    "unknown",
]
"""One flat list (not "auto" | ServerKind), so a wrong kind gets one message naming them all."""
assert get_args(KindSetting) == ("auto", *SERVER_KINDS)


def _auto_is_none(value: object) -> object:
    """ "auto" leaves a yes-or-no capability to detection; TOML and variables have no null."""
    return None if isinstance(value, str) and value.strip().lower() == "auto" else value


_AutoBool = Annotated[bool | None, BeforeValidator(_auto_is_none)]


class EndpointSettings(BaseModel):
    """What the endpoint at `base_url` can do; "auto" leaves a value to detection."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: KindSetting = "auto"
    max_tokens_field: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto"
    stream_tool_calls: _AutoBool = None
    """None ("auto"): from the server's kind."""
    tool_choice: Literal["omit", "none", "auto", "required"] = "omit"
    usage: _AutoBool = None
    """None ("auto"): from the server's kind."""
    probe: bool = True

    def choices(self) -> EndpointChoices:
        """The same choices as the provider takes them: None wherever detection decides."""
        return EndpointChoices(
            kind=None if self.kind == "auto" else self.kind,
            max_tokens_field=None if self.max_tokens_field == "auto" else self.max_tokens_field,
            stream_tool_calls=self.stream_tool_calls,
            tool_choice=self.tool_choice if "tool_choice" in self.model_fields_set else None,
            usage=self.usage,
            probe=self.probe,
        )
