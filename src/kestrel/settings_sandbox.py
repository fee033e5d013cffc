"""The `[sandbox_view]` settings table: what of the host sandboxed commands may see.

    [sandbox_view]
    read_only = ["/opt/android-sdk"]        # shown read-only, at the same path
    writable = ["~/.cache/pip"]             # shown read-write (never /usr, /etc, ...)
    toolchains = [".pyenv", ".cargo/bin"]   # folders of the home shown read-only (replaces the
                                            # default list)
    path_dirs = true                        # show the folders on PATH that hold programs

Only the user's own settings file may set this table: a file in a repository (its
`.kestrel/settings.toml` or `settings.local.toml`) must not widen the sandbox it runs in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.hostpaths import ViewError, check_view_path
from kestrel.sandbox.view import HOME_TOOLCHAINS, ViewOptions

TABLE = "sandbox_view"
"""The table's name in a settings file."""


class SandboxViewSettings(BaseModel):
    """Paths added to the sandbox's view of the host; see docs/sandbox.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    toolchains: list[str] = list(HOME_TOOLCHAINS)
    """Folders under the home (relative to it) shown read-only where they exist."""
    read_only: list[str] = []
    """Absolute (or `~/`) paths shown read-only."""
    writable: list[str] = []
    """Absolute (or `~/`) paths shown read-write."""
    path_dirs: bool = True
    """Show the folders on PATH (read-only) that the view would otherwise hide."""

    @field_validator("toolchains")
    @classmethod
    def _check_toolchains(cls, names: list[str]) -> list[str]:
        for name in names:
            relative = Path(name)
            if not name.strip() or relative.is_absolute() or ".." in relative.parts:
                raise ValueError(f"{name!r}: give a folder relative to the home, e.g. .pyenv")
            _check(Path("~") / relative, writable=False)
        return list(dict.fromkeys(names))

    @field_validator("read_only")
    @classmethod
    def _check_read_only(cls, paths: list[str]) -> list[str]:
        for path in paths:
            _check(Path(path), writable=False)
        return list(dict.fromkeys(paths))

    @field_validator("writable")
    @classmethod
    def _check_writable(cls, paths: list[str]) -> list[str]:
        for path in paths:
            _check(Path(path), writable=True)
        return list(dict.fromkeys(paths))

    def options(self, data: Path | None = None) -> ViewOptions:
        """The view these settings ask for; ConfigError if a path holds Kestrel's `data` dir."""
        home = Path.home()
        try:
            read_only = [
                check_view_path(Path(p), home=home, writable=False, data=data)
                for p in self.read_only
            ]
            writable = [
                check_view_path(Path(p), home=home, writable=True, data=data) for p in self.writable
            ]
        except ViewError as exc:
            raise ConfigError(f"{TABLE}: {exc}") from None
        return ViewOptions(
            toolchains=tuple(self.toolchains),
            read_only=tuple(read_only),
            writable=tuple(writable),
            path_dirs=self.path_dirs,
        )


def _check(path: Path, *, writable: bool) -> None:
    try:
        check_view_path(path, home=Path.home(), writable=writable)
    except ViewError as exc:
        raise ValueError(str(exc)) from None


def check_view_source(origin: str, data: Mapping[str, Any], *, trusted: bool) -> None:
    """Refuse `[sandbox_view]` in a layer the user did not write (a repository's files)."""
    if trusted or TABLE not in data:
        return
    raise ConfigError(
        f"{origin}: [{TABLE}] can only be set in your own settings file "
        "(~/.config/kestrel/settings.toml): a repository's settings must not widen the sandbox"
    )
