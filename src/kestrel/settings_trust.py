"""Which settings a repository's own files may set only once the user trusts the file.

A `.kestrel/settings.toml` (or `settings.local.toml`, or a `.mcp.json`) arrives with the
repository. Settings in it
that run commands on this machine (`hooks`), loosen the sandbox (`sandbox`, `network`,
`network_allow`), answer questions in advance (`permissions.allow`, `permission_mode`), send the
conversation and the API key somewhere (`base_url`, a `models` entry's `base_url`), start MCP
servers (`mcp_servers`, every server of a `.mcp.json`), or choose where Kestrel writes
(`data_dir`, `store_url`, `redis_url`, `archive_url`, `workspace_share_url`) are refused until
the user has run `kestrel trust` on that file's exact content. Settings that only narrow or
tune (deny and ask rules, budgets, the model's name, ...) never need trust.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kestrel.protocol.errors import ConfigError
from kestrel.settings_mcp import PROJECT_FILE, server_findings
from kestrel.settings_trust_store import TrustStore

_SAFE_VALUES: Mapping[str, tuple[object, ...]] = {
    "sandbox": ("bwrap",),
    "network": ("none",),
    "permission_mode": ("default", "plan"),
}
"""Keys that need trust unless their value is one of these (the strictest choices)."""
_VALUED = ("base_url", "data_dir", "store_url", "redis_url", "archive_url", "workspace_share_url")
"""Keys that need trust whenever they name something ("none" resets them to the default)."""
_LISTS = ("network_allow",)
"""Keys that need trust whenever their list is not empty."""
_ROLES = ("main", "plan", "fast", "edit")


@dataclass(frozen=True, slots=True)
class Finding:
    """One setting of a file that needs trust: its dotted name and its value as text."""

    key: str
    value: str

    def line(self) -> str:
        """`key = value`, as `kestrel trust` and errors show it."""
        return f"{self.key} = {self.value}"


def shown(value: object) -> str:
    """A value as one line of plain ASCII: escapes hide nothing from a terminal."""
    try:
        return json.dumps(value, ensure_ascii=True, default=str)
    except (TypeError, ValueError):
        return ascii(value)


def digest(raw: bytes) -> str:
    """The SHA-256 of a file's bytes, as trust records it."""
    return hashlib.sha256(raw).hexdigest()


def findings(data: Mapping[str, Any]) -> list[Finding]:
    """Every setting in one file's `data` that needs trust, in a stable order."""
    found: list[Finding] = []
    for key, safe in _SAFE_VALUES.items():
        if key in data and data[key] not in safe:
            found.append(Finding(key, shown(data[key])))
    for key in _VALUED:
        if key in data and not _none(data[key]):
            found.append(Finding(key, shown(data[key])))
    for key in _LISTS:
        if key in data and data[key] != []:
            found.append(Finding(key, shown(data[key])))
    permissions = data.get("permissions")
    if isinstance(permissions, Mapping) and permissions.get("allow", []) != []:
        found.append(Finding("permissions.allow", shown(permissions["allow"])))
    elif "permissions" in data and not isinstance(permissions, Mapping):
        found.append(Finding("permissions", shown(permissions)))
    found += _hook_findings(data.get("hooks"))
    found += _model_findings(data.get("models"))
    found += [Finding(key, value) for key, value in server_findings(data.get("mcp_servers"))]
    return found


def _none(value: object) -> bool:
    return value is None or (
        isinstance(value, str) and value.strip().lower() in ("none", "unlimited")
    )


def _hook_findings(hooks: object) -> Iterator[Finding]:
    if hooks is None or hooks == {}:
        return
    if not isinstance(hooks, Mapping):
        yield Finding("hooks", shown(hooks))
        return
    for event, matchers in hooks.items():
        if matchers == []:
            continue
        # The name comes from the file: shown escaped like any value.
        key = "hooks." + shown(event).strip('"')
        commands = list(_hook_commands(matchers))
        if commands:
            yield from (Finding(key, command) for command in commands)
        else:
            yield Finding(key, shown(matchers))


def _hook_commands(matchers: object) -> Iterator[str]:
    if not isinstance(matchers, list):
        return
    for matcher in matchers:
        hooks = matcher.get("hooks") if isinstance(matcher, Mapping) else None
        if not isinstance(hooks, list):
            yield shown(matcher)
            continue
        pattern = matcher.get("matcher", "")
        suffix = f" (for tools matching {shown(pattern)})" if pattern not in ("", "*") else ""
        for hook in hooks:
            command = hook.get("command") if isinstance(hook, Mapping) else hook
            yield shown(command) + suffix


def _model_findings(models: object) -> Iterator[Finding]:
    if not isinstance(models, Mapping):
        return
    for role in _ROLES:
        entries = models.get(role)
        entries = [entries] if isinstance(entries, Mapping) else entries
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if isinstance(entry, Mapping) and not _none(entry.get("base_url")):
                yield Finding(f"models.{role}[{index}].base_url", shown(entry["base_url"]))


def check_trusted(file: Path, sha256: str, data: Mapping[str, Any], store: TrustStore) -> None:
    """Refuse a repository's settings `file` that needs trust and is not trusted as it is now."""
    found = findings(data)
    if not found:
        return
    recorded = store.read().get(trust_key(file))
    if recorded is not None and recorded.sha256 == sha256:
        return
    keys = ", ".join(dict.fromkeys(f.key for f in found))
    state = "has changed since you trusted it and sets" if recorded else "sets"
    raise ConfigError(
        f"{file}: {state} {keys}, which a repository's settings may not set until you trust "
        f"the file: review it, then run `kestrel trust` in {project_root(file)}"
    )


def trust_key(file: Path) -> str:
    """The name trust records `file` under: the file's own name in its project's resolved folder.

    The file itself (and its `.kestrel/` folder) is not resolved: a repository whose settings file
    is a symlink to a file trusted for another repository must not inherit that trust.
    """
    if file.name == PROJECT_FILE:
        return str(project_root(file).resolve() / file.name)
    return str(project_root(file).resolve() / file.parent.name / file.name)


def project_root(file: Path) -> Path:
    """The directory holding the `.kestrel/` folder `file` is in (or the `.mcp.json`)."""
    return file.parent if file.name == PROJECT_FILE else file.parent.parent
