"""The sandbox a session's commands run in, chosen from the settings, and the data directory
it hides from them: what `kestrel.app` and the frontends ask before and while a session runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kestrel.app_store import data_dir as data_dir
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import PermissionMode
from kestrel.sandbox.base import Executor
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.local import LocalExecutor
from kestrel.sandbox.orphans import sweep
from kestrel.sandbox.probe import probe
from kestrel.sandbox.usability import SandboxState
from kestrel.settings import Settings
from kestrel.workspace.overlay import layer_for

__all__ = [
    "BYPASS_NEEDS_SANDBOX",
    "check_sandbox",
    "data_dir",
    "executor_for",
    "masked_data",
    "outside_reach",
]


def executor_for(settings: Settings, root: Path, session_id: str | None = None) -> Executor:
    """The command executor the settings ask for. A session's sandbox keeps its /tmp and
    installed packages in the session's layer folder, deleted with the layer."""
    if settings.sandbox == "none":
        return LocalExecutor()
    sweep()  # Sandboxes an earlier Kestrel, killed at their start, left stuck.
    masked = masked_data(data_dir(settings), root)
    layer = layer_for(data_dir(settings), session_id) if session_id else None
    return BwrapExecutor(
        root,
        network=settings.network,
        allowed_hosts=settings.network_allow,
        config=SandboxConfig(
            masked_paths=masked,
            state=SandboxState(layer.root / "sandbox") if layer else None,
            view=settings.sandbox_view.options(data_dir(settings)),
            limits=settings.sandbox_limits.limits(),
            quota_dir=layer.upper if layer and layer.upper.is_dir() else None,
        ),
    )


def masked_data(data: Path, root: Path) -> tuple[Path, ...]:
    """What of the data directory commands must not see: all of it (sessions' logs, other
    sessions' overlays), except the way down to `root` when the workspace is a copy in there."""
    data, root = data.resolve(), root.resolve()
    if not root.is_relative_to(data):
        return (data,)
    hidden: list[Path] = []
    here = data
    for part in root.relative_to(data).parts:
        hidden += [p for p in here.iterdir() if p.name != part]
        here = here / part
    return tuple(hidden)


def check_sandbox(settings: Settings, mode: PermissionMode | None = None) -> None:
    """Fail before a session starts when the sandbox it asks for cannot run here, or when it
    would run commands unasked with nothing to confine them."""
    if (mode or settings.permission_mode) == "bypass" and settings.sandbox == "none":
        raise ConfigError(BYPASS_NEEDS_SANDBOX)
    if settings.sandbox == "bwrap":
        report = asyncio.run(probe())
        if not report.ok:
            raise ConfigError(
                "the sandbox cannot start here, so Kestrel will not run commands: "
                + "; ".join(report.fixes())
                + ". `kestrel doctor` shows the details. To run commands without a sandbox, "
                "as yourself, pass --sandbox none (each command is then asked about unless a "
                "rule allows it)."
            )


BYPASS_NEEDS_SANDBOX = (
    "bypass mode runs every command without asking, so it only runs inside the sandbox: drop "
    "--sandbox none (the sandbox is the default; `kestrel doctor` checks this machine), or use "
    "--permission-mode accept-edits with --allow rules for the commands the task needs, e.g. "
    '--allow "Bash(pytest:*)"'
)


def outside_reach(settings: Settings) -> str:
    """What a command could reach outside the workspace, which no rollback undoes: anything,
    without a sandbox; the network, when the sandbox lets commands out; else nothing ("")."""
    if settings.sandbox == "none":
        return "files outside the workspace and the network (commands run unsandboxed)"
    if settings.network == "host":
        return "the network"
    if settings.network == "allowlist":
        return "the network hosts " + ", ".join(settings.network_allow)
    return ""
