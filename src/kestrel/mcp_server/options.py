"""What `kestrel mcp serve` was started with, and how far its `run_task` may go."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events_base import PermissionMode

MODE_ORDER: tuple[PermissionMode, ...] = ("plan", "default", "accept-edits", "bypass")
"""Permission modes from the narrowest (read only) to the widest."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """One server: the repository it works on and what its tools may do there."""

    root: Path
    """The repository: every path a tool takes is inside it."""
    read_only: bool = False
    """No `apply_edit`, and `run_task` held to plan mode."""
    mode_cap: PermissionMode = "default"
    """The widest permission mode a `run_task` may ask for (and the one it gets by default)."""
    model: str | None = None
    """The model of `run_task` sessions; None: the settings' model."""
    max_output_chars: int = 30_000
    """Longest result a tool gives back; longer ones are cut with a note saying so."""


def permission_cap(
    flag: PermissionMode | None, settings_mode: PermissionMode, *, read_only: bool
) -> tuple[PermissionMode, str | None]:
    """The widest mode `run_task` may use, and a note for the log when it is not what the
    settings say: `--read-only` holds it to plan, and bypass must be named on the command line."""
    if read_only:
        if flag not in (None, "plan"):
            raise ConfigError(
                f"--read-only and --permission-mode {flag} disagree: a read-only server runs "
                "tasks in plan mode only; drop one of the two"
            )
        return "plan", None
    if flag is not None:
        return flag, None
    if settings_mode == "bypass":
        note = (
            "the settings' permission mode is bypass, but run_task is held to accept-edits; "
            "start the server with --permission-mode bypass to allow more"
        )
        return "accept-edits", note
    return settings_mode, None


def within_cap(requested: PermissionMode | None, cap: PermissionMode) -> PermissionMode:
    """The mode a task runs in: `requested` if the cap allows it, the cap when none is asked."""
    if requested is None:
        return cap
    if MODE_ORDER.index(requested) > MODE_ORDER.index(cap):
        allowed = ", ".join(MODE_ORDER[: MODE_ORDER.index(cap) + 1])
        raise ConfigError(
            f"permission_mode {requested} is wider than this server allows ({cap}); ask for "
            f"one of: {allowed}, or have the server restarted with "
            f"--permission-mode {requested}"
        )
    return requested
