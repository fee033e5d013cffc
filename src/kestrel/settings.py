"""Kestrel's one typed settings object, and where it comes from.

Precedence, lowest first: built-in defaults < user file (`$XDG_CONFIG_HOME/kestrel/settings.toml`,
else `~/.config/kestrel/settings.toml`) < project file (`.kestrel/settings.toml`, found by walking
up from the working directory to the repository root) < `.kestrel/settings.local.toml` beside it <
`KESTREL_*` environment variables < command-line flags. Tables merge key by key. API keys are not
settings: providers read `ANTHROPIC_API_KEY` and `OPENAI_API_KEY` from the environment.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kestrel.policy.hooks import HOOK_EVENTS
from kestrel.policy.rules import RuleError, parse_rule
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import Limits, ModelRole, PermissionMode
from kestrel.settings_limits import SandboxLimitSettings, check_limits_source
from kestrel.settings_sandbox import SandboxViewSettings, check_view_source
from kestrel.settings_trust import check_trusted, digest
from kestrel.settings_trust_store import STORE_NAME, TrustStore

ProviderName = Literal["anthropic", "openai", "scripted"]
"""The providers a `model` setting may name."""
PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai", "scripted")
"""Every `ProviderName`, in the order messages list them."""
DEFAULT_MODEL = "anthropic:claude-sonnet-4-5"
"""The model used when no layer sets one."""
ENV_PREFIX = "KESTREL_"
"""The prefix of every environment variable that sets a setting."""
API_KEY_ENV: Mapping[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
"""The environment variable each provider reads its API key from; keys never go in files."""


_PARTIAL = "partial"
"""Validation context for one layer on its way to the merged settings."""


def _none_word(value: object) -> object:
    """Let "none" (or "unlimited") stand for no value, since TOML and env vars have no null."""
    if isinstance(value, str) and value.strip().lower() in ("none", "unlimited"):
        return None
    return value


_NoneWord = BeforeValidator(_none_word)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitSettings(_Table):
    """Budgets for one session, and for all sessions of a day; `None` means unlimited."""

    max_turns: Annotated[PositiveInt | None, _NoneWord] = 100
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


def _check_model_spec(value: str) -> str:
    provider, sep, model_id = value.partition(":")
    if not sep or provider not in PROVIDERS or not model_id.strip():
        raise ValueError(
            'expected "provider:model-id" with provider one of ' + ", ".join(PROVIDERS)
        )
    return value


def _check_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return value


def _one_or_many(value: object) -> object:
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
        return _check_model_spec(value)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        return _check_url(value)


def _entry_form(value: object) -> str:
    return "text" if isinstance(value, str) else "table"


_Entry = Annotated[
    Annotated[str, Tag("text")] | Annotated[ModelEntrySettings, Tag("table")],
    Discriminator(_entry_form),
]
_RoleList = Annotated[list[_Entry], BeforeValidator(_one_or_many)]


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
                _check_model_spec(entry)
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
    data_dir: Annotated[Path | None, _NoneWord] = None
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

    _sources: tuple[Path, ...] = PrivateAttr(default=())
    _rule_origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        return _check_model_spec(value)

    @model_validator(mode="before")
    @classmethod
    def _model_from_main_role(cls, data: object) -> object:
        # With a main role listed and no `model` chosen anywhere, the list's first entry leads.
        if not isinstance(data, Mapping) or "model" in data:
            return data
        models = data.get("models")
        main = _one_or_many(models.get("main")) if isinstance(models, Mapping) else None
        if not isinstance(main, list) or not main:
            return data
        first = main[0]
        spec = first.get("model") if isinstance(first, Mapping) else first
        try:
            _check_model_spec(spec if isinstance(spec, str) else "")
        except ValueError:
            return data  # The entry's own check reports it, once.
        return {**data, "model": spec}

    @model_validator(mode="after")
    def _allowlist_needs_hosts(self, info: ValidationInfo) -> Settings:
        if info.context != _PARTIAL and self.network == "allowlist" and not self.network_allow:
            raise ValueError(
                'network = "allowlist" needs the hosts commands may reach in network_allow, '
                'e.g. network_allow = ["pypi.org", "files.pythonhosted.org"]'
            )
        return self

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        return _check_url(value)

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


_FLAT: Mapping[str, tuple[str, ...]] = {
    "model": ("model",),
    "base_url": ("base_url",),
    "permission_mode": ("permission_mode",),
    "data_dir": ("data_dir",),
    "max_output_tokens": ("max_output_tokens",),
    "sandbox": ("sandbox",),
    "network": ("network",),
    "workspace": ("workspace",),
    "max_turns": ("limits", "max_turns"),
    "max_tokens": ("limits", "max_tokens"),
    "max_cost_usd": ("limits", "max_cost_usd"),
    "max_wall_s": ("limits", "max_wall_s"),
    "max_cost_usd_per_day": ("limits", "max_cost_usd_per_day"),
    "max_tokens_per_day": ("limits", "max_tokens_per_day"),
    "bash_timeout_s": ("tools", "bash_timeout_s"),
    "max_output_chars": ("tools", "max_output_chars"),
    "loop_warn_after": ("loop_detection", "warn_after"),
    "loop_stop_after": ("loop_detection", "stop_after"),
}
"""Flat names, as flags and `KESTREL_<NAME>` environment variables use them, to settings paths."""

_LIST_FLAGS: Mapping[str, tuple[str, ...]] = {
    "allow": ("permissions", "allow"),
    "ask": ("permissions", "ask"),
    "deny": ("permissions", "deny"),
}
"""Flags that add to a list (each may be given several times); they have no variable."""
_COMBINED = frozenset({"permissions", "hooks"})
"""Tables whose lists combine across layers instead of the higher one replacing the lower."""
_FLAG_ONLY = frozenset({"bypass"})
"""Values of `permission_mode` only a command-line flag may choose: a file in a repository one
has just cloned must not be able to turn every question off."""

ENV_VARS: Mapping[str, tuple[str, ...]] = {
    ENV_PREFIX + name.upper(): path for name, path in _FLAT.items()
}
"""Every environment variable `load_settings` reads, and the setting it sets."""

FLAG_NAMES: tuple[str, ...] = (*_FLAT, *_LIST_FLAGS)
_FLAG_SPELLING = {"max_cost_usd": "--max-cost"}
"""Command-line flags whose names differ from their settings key."""
"""The keys `load_settings` accepts in `flags`."""


@dataclass(frozen=True, slots=True)
class _Layer:
    origin: str
    data: dict[str, Any]
    names: Mapping[tuple[str, ...], str]
    """What to call a setting's path in messages, where it is not `origin: dotted.path`."""
    file: Path | None = None
    sha256: str = ""
    """The SHA-256 of the file's bytes as read, which trust compares."""


def load_settings(
    cwd: Path, *, env: Mapping[str, str], flags: Mapping[str, Any], home: Path
) -> Settings:
    """Read every settings layer for a run in `cwd` and merge them; raises `ConfigError`.

    The result's `model_fields_set` names the top-level settings some layer set, so a caller can
    tell a chosen value from a default (a resume keeps the session's model unless one was chosen).
    """
    cwd = cwd.resolve()
    files = [user_settings_path(env=env, home=home), *_project_files(cwd)]
    layers = [_file_layer(path, home) for path in files if path.is_file()]
    layers.append(_env_layer(env, cwd, home))
    layers.append(_flag_layer(flags, cwd, home))
    store = TrustStore(trust_store_path(files[0]))
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for layer in layers:
        _check_flag_only(layer)
        own = layer.file in (None, files[0])
        check_view_source(layer.origin, layer.data, trusted=own)
        check_limits_source(layer.origin, layer.data, trusted=own)
        for rules in dict(layer.data.get("permissions") or {}).values():
            for rule in rules if isinstance(rules, list) else ():
                if isinstance(rule, str):
                    origins.setdefault(rule, layer.origin)
        candidate = _merge(merged, layer.data)
        # Validating after each layer blames the layer that made the settings invalid.
        try:
            Settings.model_validate(candidate, context=_PARTIAL)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, layer)) from None
        if layer.file is not None and not own:
            # A repository's file: what could turn Kestrel against its user needs trust first.
            check_trusted(layer.file, layer.sha256, layer.data, store)
        merged = candidate
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, _Layer("combined settings", merged, {}))) from None
    settings._sources = tuple(layer.file for layer in layers if layer.file is not None)
    settings._rule_origins = origins
    return settings


def _check_flag_only(layer: _Layer) -> None:
    mode = layer.data.get("permission_mode")
    if layer.origin != "command line" and isinstance(mode, str) and mode in _FLAG_ONLY:
        where = layer.names.get(("permission_mode",)) or f"{layer.origin}: permission_mode"
        raise ConfigError(
            f"{where}: {mode} mode can only be chosen on the command line "
            f"(--permission-mode {mode}), never by a settings file or variable"
        )


def user_settings_path(*, env: Mapping[str, str], home: Path) -> Path:
    """The user's settings file, under `$XDG_CONFIG_HOME` when that is an absolute path."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return config_home / "kestrel" / "settings.toml"


def trust_store_path(user_file: Path) -> Path:
    """Where the user's record of trusted repository settings files is, beside `user_file`."""
    return user_file.parent / STORE_NAME


def project_settings_dir(cwd: Path) -> Path | None:
    """The nearest `.kestrel/` holding a settings file, from `cwd` up to the repository root."""
    for directory in (cwd, *cwd.parents):
        candidate = directory / ".kestrel"
        if (candidate / "settings.toml").is_file() or (candidate / "settings.local.toml").is_file():
            return candidate
        if (directory / ".git").exists():
            return None
    return None


def _project_files(cwd: Path) -> list[Path]:
    found = project_settings_dir(cwd)
    if found is None:
        return []
    return [found / "settings.toml", found / "settings.local.toml"]


def _file_layer(path: Path, home: Path) -> _Layer:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    # A relative data_dir in a file means relative to that file, wherever Kestrel runs.
    _anchor_data_dir(data, path.parent, home)
    return _Layer(origin=str(path), data=data, names={}, file=path, sha256=digest(raw))


def _env_layer(env: Mapping[str, str], cwd: Path, home: Path) -> _Layer:
    data: dict[str, Any] = {}
    names: dict[tuple[str, ...], str] = {}
    for var, path in ENV_VARS.items():
        value = env.get(var, "")
        if value.strip():
            _set(data, path, value)
            names[path] = var
    _anchor_data_dir(data, cwd, home)
    return _Layer(origin="environment", data=data, names=names)


def _flag_layer(flags: Mapping[str, Any], cwd: Path, home: Path) -> _Layer:
    data: dict[str, Any] = {}
    names: dict[tuple[str, ...], str] = {}
    for key, value in flags.items():
        path = _FLAT.get(key) or _LIST_FLAGS.get(key)
        if path is None:
            hint = _suggestion(key, FLAG_NAMES)
            raise ConfigError(f"unknown flag setting {key!r}{hint}")
        if value is not None and value != [] and value != ():
            _set(data, path, list(value) if key in _LIST_FLAGS else value)
            names[path] = _FLAG_SPELLING.get(key, "--" + key.replace("_", "-"))
    _anchor_data_dir(data, cwd, home)
    return _Layer(origin="command line", data=data, names=names)


def _set(data: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value


def _anchor_data_dir(data: dict[str, Any], base: Path, home: Path) -> None:
    value = data.get("data_dir")
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or _none_word(value) is None:
        return
    if value == "~" or value.startswith("~/"):
        data["data_dir"] = str(home / value[2:])
    else:
        data["data_dir"] = str(base / value)


def _merge(
    lower: Mapping[str, Any], higher: Mapping[str, Any], combine: bool = False
) -> dict[str, Any]:
    """`higher` over `lower`; tables present in both merge key by key.

    Lists inside `permissions` and `hooks` are joined instead: a project file cannot drop a
    rule or hook the user's own file set.
    """
    merged = dict(lower)
    for key, value in higher.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(below, value, combine or key in _COMBINED)
        elif combine and isinstance(below, list) and isinstance(value, list):
            merged[key] = below + value
        else:
            merged[key] = value
    return merged


def _describe(exc: ValidationError, layer: _Layer) -> str:
    """One line per problem, each naming the file (or variable, or flag) and the setting."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(str(part) for part in error["loc"])
        dotted = ".".join(loc)
        where = layer.names.get(loc) or (f"{layer.origin}: {dotted}" if dotted else layer.origin)
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown setting{_suggestion(dotted, _known_keys())}")
            continue
        message = error["msg"].removeprefix("Value error, ")
        # Pydantic's ", unable to parse string as an integer" repeats what "(got ...)" shows.
        message = message.split(", unable to parse")[0]
        value = error.get("input")
        if not isinstance(value, Mapping):
            message += f" (got {_show(value)})"
        lines.append(f"{where}: {message}")
    return "\n".join(lines)


def _show(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _known_keys() -> list[str]:
    keys = []
    for name, info in Settings.model_fields.items():
        keys.append(name)
        table = info.annotation
        if isinstance(table, type) and issubclass(table, BaseModel):
            keys.extend(f"{name}.{sub}" for sub in table.model_fields)
    return keys


def _suggestion(key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""
