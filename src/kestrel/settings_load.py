"""Reading the settings layers and merging them into one `Settings`: the user's file, the
repository's files (refused where they loosen anything the user has not trusted), environment
variables and command-line flags, with one clear line per problem naming where it was set."""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kestrel.protocol.errors import ConfigError
from kestrel.settings import _PARTIAL, ENV_PREFIX, Settings, _none_word
from kestrel.settings_limits import check_limits_source
from kestrel.settings_mcp import PROJECT_FILE, USER_FILE, json_layer_data, project_mcp_file
from kestrel.settings_sandbox import check_view_source
from kestrel.settings_trust import check_trusted, digest
from kestrel.settings_trust_store import STORE_NAME, TrustStore

_TOP_LEVEL = (
    *("model", "base_url", "permission_mode", "data_dir", "store_url", "archive_url"),
    *("archive_idle_days", "redis_url", "redis_prefix", "response_cache_ttl_s"),
    *("max_output_tokens", "sandbox", "network", "workspace", "workspace_share_url"),
)

_FLAT: Mapping[str, tuple[str, ...]] = {
    **{name: (name,) for name in _TOP_LEVEL},
    "max_turns": ("limits", "max_turns"),
    "turn_grace": ("limits", "turn_grace"),
    "max_tokens": ("limits", "max_tokens"),
    "max_cost_usd": ("limits", "max_cost_usd"),
    "max_wall_s": ("limits", "max_wall_s"),
    "max_cost_usd_per_day": ("limits", "max_cost_usd_per_day"),
    "max_tokens_per_day": ("limits", "max_tokens_per_day"),
    "bash_timeout_s": ("tools", "bash_timeout_s"),
    "max_output_chars": ("tools", "max_output_chars"),
    "loop_warn_after": ("loop_detection", "warn_after"),
    "loop_stop_after": ("loop_detection", "stop_after"),
    "endpoint_kind": ("endpoint", "kind"),
    "max_tokens_field": ("endpoint", "max_tokens_field"),
    "stream_tool_calls": ("endpoint", "stream_tool_calls"),
    "tool_choice": ("endpoint", "tool_choice"),
    "expect_usage": ("endpoint", "usage"),
    "endpoint_probe": ("endpoint", "probe"),
    "window_tokens": ("compaction", "window_tokens"),
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


@dataclass(frozen=True, slots=True)
class LayerReport:
    """What the loader found in one settings layer: where it came from and every problem."""

    origin: str
    """The file's path, `environment`, `command line`, or `combined settings`."""
    file: Path | None
    problems: tuple[str, ...]
    """One line each, naming the file (or variable, or flag) and the setting; empty when fine."""


def load_settings(
    cwd: Path, *, env: Mapping[str, str], flags: Mapping[str, Any], home: Path
) -> Settings:
    """Read every settings layer for a run in `cwd` and merge them; raises `ConfigError`.

    The error lists every problem of every layer, one per line. The result's `model_fields_set`
    names the top-level settings some layer set, so a caller can tell a chosen value from a
    default (a resume keeps the session's model unless one was chosen).
    """
    settings, reports = _load(cwd.resolve(), env, flags, home)
    problems = [line for report in reports for line in report.problems]
    if settings is None or problems:
        raise ConfigError("\n".join(problems))
    return settings


def check_settings(
    cwd: Path, *, env: Mapping[str, str], flags: Mapping[str, Any], home: Path
) -> tuple[list[LayerReport], Settings | None]:
    """Every layer `load_settings` would read for `cwd`, in order, each with all its problems,
    and the settings the layers without problems make (None when even those are invalid)."""
    settings, reports = _load(cwd.resolve(), env, flags, home)
    return reports, settings


def settings_files(cwd: Path, *, env: Mapping[str, str], home: Path) -> list[Path]:
    """The settings files a run in `cwd` reads where they exist: the user's (TOML, then its MCP
    servers' JSON), the repository's (its `.mcp.json`, then its TOML)."""
    user = user_settings_path(env=env, home=home)
    mcp = [found] if (found := project_mcp_file(cwd.resolve())) else []
    return [user, user.parent / USER_FILE, *mcp, *_project_files(cwd.resolve())]


def _load(
    cwd: Path, env: Mapping[str, str], flags: Mapping[str, Any], home: Path
) -> tuple[Settings | None, list[LayerReport]]:
    files = settings_files(cwd, env=env, home=home)
    sources: list[_Layer | LayerReport] = [
        _read_file(path, home) for path in files if path.is_file()
    ]
    sources += [_env_layer(env, cwd, home), _flag_layer(flags, cwd, home)]
    store = TrustStore(trust_store_path(files[0]))
    reports: list[LayerReport] = []
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    skipped: list[str] = []
    for layer in sources:
        if isinstance(layer, LayerReport):
            reports.append(layer)
            continue
        if not_trusted := _untrusted_servers(layer, store):
            skipped.append(not_trusted)  # its servers wait for trust; the rest of Kestrel runs
            continue
        candidate = _merge(merged, layer.data)
        problems = _layer_problems(
            layer, candidate, own=layer.file in (None, *files[:2]), store=store
        )
        reports.append(LayerReport(layer.origin, layer.file, tuple(problems)))
        if problems:
            continue  # The next layers are checked over the good ones, not over this one.
        for rules in dict(layer.data.get("permissions") or {}).values():
            for rule in rules if isinstance(rules, list) else ():
                if isinstance(rule, str):
                    origins.setdefault(rule, layer.origin)
        merged = candidate
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        if not any(report.problems for report in reports):
            combined = _Layer("combined settings", merged, {})
            reports.append(LayerReport(combined.origin, None, tuple(_describe(exc, combined))))
        return None, reports
    settings._sources = tuple(r.file for r in reports if r.file is not None and not r.problems)
    settings._rule_origins = origins
    settings._skipped = tuple(skipped)
    return settings, reports


def _untrusted_servers(layer: _Layer, store: TrustStore) -> str:
    """Why a repository's `.mcp.json` is left out (it is not trusted as it is now), or ''."""
    if layer.file is None or layer.file.name != PROJECT_FILE:
        return ""
    try:
        check_trusted(layer.file, layer.sha256, layer.data, store)
    except ConfigError:
        names = ", ".join(sorted(layer.data.get("mcp_servers", {})))
        return (
            f"{layer.file} names MCP servers ({names}) that are not started until you trust "
            f"the file: review it, then run `kestrel trust` in {layer.file.parent}"
        )
    return ""


def _layer_problems(
    layer: _Layer, candidate: dict[str, Any], *, own: bool, store: TrustStore
) -> list[str]:
    """Every problem of one layer, merged over the good layers below it as `candidate`."""
    problems: list[str] = []
    checks: tuple[Callable[[], None], ...] = (
        lambda: _check_flag_only(layer),
        lambda: check_view_source(layer.origin, layer.data, trusted=own),
        lambda: check_limits_source(layer.origin, layer.data, trusted=own),
    )
    for check in checks:
        try:
            check()
        except ConfigError as exc:
            problems.append(str(exc))
    # Validating after each layer blames the layer that made the settings invalid.
    try:
        Settings.model_validate(candidate, context=_PARTIAL)
    except ValidationError as exc:
        problems += _describe(exc, layer)
    if layer.file is not None and not own:
        # A repository's file: what could turn Kestrel against its user needs trust first.
        try:
            check_trusted(layer.file, layer.sha256, layer.data, store)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


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


def _read_file(path: Path, home: Path) -> _Layer | LayerReport:
    """The file's layer, or its report when it cannot be read or parsed."""
    try:
        return _file_layer(path, home)
    except ConfigError as exc:
        return LayerReport(str(path), path, (str(exc),))


def _file_layer(path: Path, home: Path) -> _Layer:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        return _Layer(
            origin=str(path),
            data=json_layer_data(path, raw),
            names={},
            file=path,
            sha256=digest(raw),
        )
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


def _describe(exc: ValidationError, layer: _Layer) -> list[str]:
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
    return lines


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
