"""Kestrel's one typed settings object, and where it comes from.

Precedence, lowest first: built-in defaults < user file (`$XDG_CONFIG_HOME/kestrel/settings.toml`,
else `~/.config/kestrel/settings.toml`) < project file (`.kestrel/settings.toml`, found by walking
up from the working directory to the repository root) < `.kestrel/settings.local.toml` beside it <
`KESTREL_*` environment variables < command-line flags. Tables merge key by key. API keys are not
settings: providers read `ANTHROPIC_API_KEY` and `OPENAI_API_KEY` from the environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kestrel.policy.hooks import HOOK_EVENTS
from kestrel.policy.rules import RuleError, parse_rule
from kestrel.protocol.events_base import Limits, ModelRole, PermissionMode
from kestrel.settings_checks import check_combined
from kestrel.settings_endpoint import EndpointSettings
from kestrel.settings_limits import SandboxLimitSettings
from kestrel.settings_mcp import check_servers
from kestrel.settings_models import PROVIDERS as PROVIDERS
from kestrel.settings_models import ModelChoice as ModelChoice
from kestrel.settings_models import ModelEntrySettings as ModelEntrySettings
from kestrel.settings_models import ModelRoleSettings as ModelRoleSettings
from kestrel.settings_models import ProviderName as ProviderName
from kestrel.settings_models import _none_word as _none_word
from kestrel.settings_models import _NoneWord, _Table, check_model_spec, check_url, one_or_many
from kestrel.settings_sandbox import SandboxViewSettings

DEFAULT_MODEL = "anthropic:claude-sonnet-4-5"
"""The model used when no layer sets one."""
ENV_PREFIX = "KESTREL_"
"""The prefix of every environment variable that sets a setting."""
API_KEY_ENV: Mapping[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
"""The environment variable each provider reads its API key from; keys never go in files."""


_PARTIAL = "partial"
"""Validation context for one layer on its way to the merged settings."""


class LimitSettings(_Table):
    """Budgets for one session, and for all sessions of a day; `None` means unlimited."""

    max_turns: Annotated[PositiveInt | None, _NoneWord] = 200
    """Model calls per session. Of 500 recorded runs of a strong model on real repository
    tasks the longest took 145 steps: 200 leaves room without letting a stuck run go on."""
    turn_grace: Annotated[float, Field(ge=0.0, le=1.0)] = 0.25
    """The share of `max_turns` a run may go past it by, once, when its files changed in its
    last 10 turns (a `budget_notice` says so); 0 makes `max_turns` a hard stop, as
    `--max-turns N` on the command line always does."""
    max_tokens: Annotated[PositiveInt | None, _NoneWord] = None
    max_cost_usd: Annotated[PositiveFloat | None, _NoneWord] = None
    max_wall_s: Annotated[PositiveFloat | None, _NoneWord] = None
    max_cost_usd_per_day: Annotated[PositiveFloat | None, _NoneWord] = None
    """US dollars all sessions together may spend per local day (from midnight)."""
    max_tokens_per_day: Annotated[PositiveInt | None, _NoneWord] = None
    """Tokens all sessions together may use per local day (from midnight)."""

    def as_limits(self) -> Limits:
        """The same budgets as the protocol's `Limits`, as recorded in `session_started`."""
        return Limits(
            max_turns=self.max_turns,
            max_tokens=self.max_tokens,
            max_cost_usd=self.max_cost_usd,
            max_wall_s=self.max_wall_s,
        )


class ToolSettings(_Table):
    """How tools run and how much of their output the model sees."""

    bash_timeout_s: PositiveFloat = 120.0
    max_output_chars: PositiveInt = 30_000
    rerun_interrupted: bool = False
    """On resume, run a call a crash cut short again after its rollback when it only checks."""


class VerifySettings(_Table):
    """Checking the change when the model says it is done (only inside the sandbox)."""

    enabled: bool = True
    max_rounds: PositiveInt = 3
    """Failed verifications in a row the model gets to fix before the session stops."""
    timeout_s: PositiveFloat = 300.0
    """Longest one check (a linter, a test run) may take."""


class CompactionSettings(_Table):
    """Folding older turns into a summary before the conversation overflows the context window."""

    enabled: bool = True
    window_tokens: PositiveInt = 200_000
    """The main model's context window in tokens (set it for models with a smaller one)."""
    compact_at: Annotated[float, Field(gt=0, le=1)] = 0.8
    """Compact when a request would fill this share of the window (less the output's room)."""
    keep_share: Annotated[float, Field(gt=0, lt=1)] = 0.3
    """The share of the window the newest turns keep word for word."""
    move_outputs_over: PositiveInt = 10_000
    """Tool outputs longer than this many characters in kept turns are moved to files."""


class ContextSettings(_Table):
    """What a new session starts with besides the task (docs/context.md, "First context")."""

    first_context_files: Annotated[int, Field(ge=0, le=20)] = 0
    """Files of the context engine's ranking for the task shown before the first turn; 0: none."""
    rerank: bool = False
    """Let the `fast` model reorder the engine's best candidates first: one bounded call whose
    cost counts in the session's totals."""
    rerank_candidates: Annotated[int, Field(ge=2, le=50)] = 30


class LoopDetectionSettings(_Table):
    """After how many repeats the model is warned, and after how many the session stops."""

    warn_after: PositiveInt = 3
    stop_after: PositiveInt = 5
    oscillate_after: Annotated[int, Field(ge=3)] = 4
    """Failing results alternating between two states (X, Y, X, Y) before the session goes
    back to before the loop, once, and asks for another approach; the next such loop stops it."""

    @model_validator(mode="after")
    def _stop_not_before_warn(self, info: ValidationInfo) -> LoopDetectionSettings:
        # A lower layer may be fixed by a higher one, so only the merged settings must agree.
        if info.context != _PARTIAL and self.stop_after < self.warn_after:
            raise ValueError(
                f"stop_after ({self.stop_after}) must be at least warn_after ({self.warn_after})"
            )
        return self


class PermissionSettings(_Table):
    """Permission rules, `Tool(specifier)` strings; every settings layer's lists are combined."""

    allow: list[str] = []
    ask: list[str] = []
    deny: list[str] = []

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _check_rules(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            try:
                parse_rule(rule)
            except RuleError as exc:
                raise ValueError(str(exc)) from None
        return list(dict.fromkeys(rules))


class HookCommandSettings(_Table):
    """One hook command: run with `/bin/sh -c`, JSON on its standard input."""

    type: Literal["command"] = "command"
    command: str
    timeout: PositiveFloat = 60.0
    """Seconds before the command is killed; a killed PreToolUse hook denies (see `on_error`)."""
    on_error: Literal["deny", "continue"] = "deny"
    """What a PreToolUse hook that crashes or times out means: deny the call, or ignore it."""

    @field_validator("command")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a hook needs a command")
        return value


class HookMatcherSettings(_Table):
    """Hooks for the tools whose name matches `matcher` (a regex; empty or `*` for all)."""

    matcher: str = ""
    hooks: list[HookCommandSettings]

    @field_validator("matcher")
    @classmethod
    def _check_matcher(cls, value: str) -> str:
        if value not in ("", "*"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"matcher {value!r} is not a regular expression: {exc}") from None
        return value


class HookSettings(_Table):
    """Hook commands per event, as in Claude Code's settings."""

    PreToolUse: list[HookMatcherSettings] = []
    PostToolUse: list[HookMatcherSettings] = []
    UserPromptSubmit: list[HookMatcherSettings] = []
    Stop: list[HookMatcherSettings] = []
    SessionStart: list[HookMatcherSettings] = []
    SessionEnd: list[HookMatcherSettings] = []
    PreCompact: list[HookMatcherSettings] = []
    SubagentStop: list[HookMatcherSettings] = []


assert tuple(HookSettings.model_fields) == HOOK_EVENTS


class Settings(_Table):
    """Everything configurable about a Kestrel run; see docs/configuration.md."""

    model: str = DEFAULT_MODEL
    base_url: Annotated[str | None, _NoneWord] = None
    permission_mode: PermissionMode = "default"
    limits: LimitSettings = LimitSettings()
    tools: ToolSettings = ToolSettings()
    loop_detection: LoopDetectionSettings = LoopDetectionSettings()
    verify: VerifySettings = VerifySettings()
    compaction: CompactionSettings = CompactionSettings()
    context: ContextSettings = ContextSettings()
    data_dir: Annotated[Path | None, _NoneWord] = None
    store_url: Annotated[str | None, _NoneWord] = None
    """The event log: none for the SQLite file in `data_dir`, or a `postgresql://` URL for one
    database that several processes and machines share."""
    store_outage_wait_s: Annotated[float, Field(ge=0, le=3600)] = 60.0
    """With `store_url`: how long a running session waits for a database that went away (a
    restart, a fail-over) before it ends with an error; one never reached fails at once."""
    archive_url: Annotated[str | None, _NoneWord] = None
    """Cold storage for idle sessions (`kestrel sessions archive`): none for the folder
    `archive/objects` in `data_dir`, a `file:///folder`, or `s3://bucket/prefix` of any
    S3-compatible store (credentials from the standard AWS environment variables)."""
    archive_idle_days: Annotated[float, Field(ge=0, le=36500)] = 30.0
    """How long a session must have been idle for `kestrel sessions archive` to take it."""
    workspace_share_url: Annotated[str | None, _NoneWord] = None
    """Cluster mode without a shared data folder: where each session's checkpoints are put as
    they are recorded (`file:///folder` or `s3://bucket/prefix`), so that a machine that takes
    the session over makes its files from the newest one; none: not shared."""
    redis_url: Annotated[str | None, _NoneWord] = None
    """Cluster mode's Redis (`redis://host:6379/0`): live events between processes, the
    response cache and the hosted API's rate limits; none: each process on its own."""
    redis_prefix: Annotated[str, Field(min_length=1, max_length=64)] = "kestrel:"
    """What every key Kestrel writes in Redis starts with, so deployments can share one."""
    response_cache_ttl_s: Annotated[float, Field(ge=0, le=7 * 86400)] = 3600.0
    """With `redis_url`: how long a model reply may answer an identical request of the same
    session (a resumed one, say); 0 turns the response cache off."""
    max_output_tokens: PositiveInt = 8192
    sandbox: Literal["none", "bwrap"] = "bwrap"
    """Where `bash` runs: `none` as the user, or `bwrap`, confined to the workspace."""
    workspace: Literal["overlay", "direct"] = "overlay"
    """`overlay`: edit an overlay and apply the change on approval; `direct`: edit the checkout."""
    network: Literal["none", "host", "allowlist"] = "none"
    """With `sandbox = "bwrap"`: no network, the host's, or only `network_allow` through a proxy."""
    network_allow: list[str] = []
    """Host names commands may reach when `network = "allowlist"`, exactly (`*.x`: any name
    under x, which also lets a command leak data through DNS lookups)."""
    permissions: PermissionSettings = PermissionSettings()
    hooks: HookSettings = HookSettings()
    models: ModelRoleSettings = ModelRoleSettings()
    """Models per role and failover lists; `model` always leads the `main` role."""
    sandbox_view: SandboxViewSettings = SandboxViewSettings()
    """What of the host sandboxed commands see besides the defaults (user's file only)."""
    sandbox_limits: SandboxLimitSettings = SandboxLimitSettings()
    """CPU, memory, process, file and workspace-growth limits per command (user's file only)."""
    endpoint: EndpointSettings = EndpointSettings()  # the server at base_url: settings_endpoint
    mcp_servers: dict[str, dict[str, Any]] = {}
    """Other MCP servers whose tools the model may call, by name (see `kestrel.settings_mcp`)."""

    _sources: tuple[Path, ...] = PrivateAttr(default=())
    _rule_origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _skipped: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        return check_model_spec(value)

    @model_validator(mode="before")
    @classmethod
    def _model_from_main_role(cls, data: object) -> object:
        # With a main role listed and no `model` chosen anywhere, the list's first entry leads.
        if not isinstance(data, Mapping) or "model" in data:
            return data
        models = data.get("models")
        main = one_or_many(models.get("main")) if isinstance(models, Mapping) else None
        if not isinstance(main, list) or not main:
            return data
        first = main[0]
        spec = first.get("model") if isinstance(first, Mapping) else first
        try:
            check_model_spec(spec if isinstance(spec, str) else "")
        except ValueError:
            return data  # The entry's own check reports it, once.
        return {**data, "model": spec}

    @model_validator(mode="after")
    def _check_combined(self, info: ValidationInfo) -> Settings:
        # A lower layer may be fixed by a higher one, so only the merged settings must agree.
        if info.context != _PARTIAL:
            check_combined(self)
        return self

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _check_mcp_servers(cls, value: object) -> dict[str, dict[str, Any]]:
        return check_servers(value)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        return check_url(value)

    @field_validator("store_url")
    @classmethod
    def _check_store_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("expected a postgresql:// URL, or none for the local SQLite file")
        return value

    @field_validator("archive_url", "workspace_share_url")
    @classmethod
    def _check_archive_url(cls, value: str | None) -> str | None:
        if value is not None:
            from kestrel.archive.blobs import parse

            parse(value)  # its ValueError says what an archive URL looks like
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("expected a redis://, rediss:// or unix:// URL, or none")
        return value

    @property
    def provider(self) -> ProviderName:
        """The provider part of `model`."""
        # `_check_model` admitted only known providers.
        return cast(ProviderName, self.model.partition(":")[0])

    @property
    def model_id(self) -> str:
        """The model part of `model`, as the provider names it."""
        return self.model.partition(":")[2]

    def role_models(self, role: ModelRole) -> tuple[ModelChoice, ...]:
        """The models `role` tries, in order; a role with none of its own gets `main`'s.

        `model` leads the main role, then the rest of `models.main`. A plain `provider:model`
        entry of the same provider as `model` is reached at `base_url`; others at their
        provider's public API unless written as a table with a `base_url` of its own.
        """
        entries = getattr(self.models, role)
        if role != "main" and not entries:
            return self.role_models("main")
        choices = [self._choice(entry) for entry in entries]
        if role == "main" and (not choices or choices[0].model != self.model):
            choices.insert(0, ModelChoice(self.model, self.base_url))
        unique: dict[str, ModelChoice] = {}
        for choice in choices:
            unique.setdefault(choice.model, choice)
        return tuple(unique.values())

    def _choice(self, entry: str | ModelEntrySettings) -> ModelChoice:
        if isinstance(entry, ModelEntrySettings):
            return ModelChoice(entry.model, entry.base_url)
        same = entry.partition(":")[0] == self.provider
        return ModelChoice(entry, self.base_url if same else None)

    @property
    def sources(self) -> tuple[Path, ...]:
        """The settings files `load_settings` read, lowest precedence first."""
        return self._sources

    @property
    def rule_origins(self) -> dict[str, str]:
        """Where each permission rule was first written (a file, or "command line")."""
        return dict(self._rule_origins)

    @property
    def skipped(self) -> tuple[str, ...]:
        """Files left out, each with why: a repository's `.mcp.json` not yet trusted."""
        return self._skipped
