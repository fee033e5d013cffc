"""The `models` settings: which model each role asks, in order, and at which endpoint.

[models]
main = ["anthropic:claude-sonnet-4-5", { model = "openai:gpt-5", base_url = "..." }]
fast = "anthropic:claude-haiku-4-5"
failover_after = 1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    PositiveInt,
    Tag,
    field_validator,
)

ProviderName = Literal["anthropic", "openai", "scripted"]
"""The providers a `model` setting may name."""
PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai", "scripted")
"""Every `ProviderName`, in the order messages list them."""


def _none_word(value: object) -> object:
    """Let "none" (or "unlimited") stand for no value, since TOML and env vars have no null."""
    if isinstance(value, str) and value.strip().lower() in ("none", "unlimited"):
        return None
    return value


_NoneWord = BeforeValidator(_none_word)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_model_spec(value: str) -> str:
    provider, sep, model_id = value.partition(":")
    if not sep or provider not in PROVIDERS or not model_id.strip():
        raise ValueError(
            'expected "provider:model-id" with provider one of ' + ", ".join(PROVIDERS)
        )
    return value


def check_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return value


def one_or_many(value: object) -> object:
    """A single entry where a list is expected stands for a list of one."""
    return [value] if isinstance(value, str | Mapping) else value


class ModelEntrySettings(_Table):
    """One model of a role with its own endpoint: `{ model = "...", base_url = "..." }`."""

    model: str
    base_url: Annotated[str | None, _NoneWord] = None
    """None: the provider's public API (the top-level `base_url` does not apply)."""

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        return check_model_spec(value)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        return check_url(value)


def _entry_form(value: object) -> str:
    return "text" if isinstance(value, str) else "table"


_Entry = Annotated[
    Annotated[str, Tag("text")] | Annotated[ModelEntrySettings, Tag("table")],
    Discriminator(_entry_form),
]
_RoleList = Annotated[list[_Entry], BeforeValidator(one_or_many)]


class ModelRoleSettings(_Table):
    """Each role's models, in the order they are tried; an empty role uses `main`'s."""

    main: _RoleList = []
    plan: _RoleList = []
    fast: _RoleList = []
    edit: _RoleList = []
    failover_after: PositiveInt = 1
    """Attempts an overloaded, failing or unreachable model gets before the next is tried."""

    @field_validator("main", "plan", "fast", "edit")
    @classmethod
    def _check_entries(
        cls, entries: list[str | ModelEntrySettings]
    ) -> list[str | ModelEntrySettings]:
        for entry in entries:
            if isinstance(entry, str):
                check_model_spec(entry)
        return entries


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model a role may use: `provider:model-id` and the endpoint to reach it at."""

    model: str
    base_url: str | None = None

    @property
    def provider(self) -> str:
        """The provider part of `model`."""
        return self.model.partition(":")[0]
