"""The `[sandbox_limits]` settings table: what one sandboxed command may use.

    [sandbox_limits]
    cpus = 1.5              # CPU time per second of wall time; "auto": half the cores, at least 1
    memory_mib = 2048       # memory of the command and all its children
    max_processes = 512
    file_size_mib = 1024    # the largest file one process may write
    open_files = 1024
    disk_mib = 10240        # how much the workspace may grow during one command

`"none"` (or `"unlimited"`) lifts `cpus` or `disk_mib`. Only the user's own settings file may set
this table: a file in a repository must not loosen the limits of the sandbox it runs in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PositiveInt

from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.limits import Limits, MiB

TABLE = "sandbox_limits"
"""The table's name in a settings file."""


def _none_word(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in ("none", "unlimited"):
        return None
    return value


_NoneWord = BeforeValidator(_none_word)


class SandboxLimitSettings(BaseModel):
    """Limits of each sandboxed command; see docs/sandbox.md ("Limits")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: Annotated[float | Literal["auto"] | None, Field(gt=0), _NoneWord] = "auto"
    """CPUs' worth of time per wall-clock second (cgroup CPU quota); "auto": half the cores."""
    memory_mib: PositiveInt = 2048
    max_processes: PositiveInt = 512
    file_size_mib: PositiveInt = 1024
    open_files: PositiveInt = 1024
    disk_mib: Annotated[PositiveInt | None, _NoneWord] = 10240
    """How many MiB the workspace may grow while one command runs; None: no quota."""

    def limits(self, cores: int | None = None) -> Limits:
        """The sandbox's `Limits`; `cores` (default: this machine's) sizes `cpus = "auto"`."""
        cpus = self.cpus
        if cpus == "auto":
            cpus = max(1.0, (cores or os.cpu_count() or 2) / 2)
        return Limits(
            memory_bytes=self.memory_mib * MiB,
            max_processes=self.max_processes,
            file_size_bytes=self.file_size_mib * MiB,
            open_files=self.open_files,
            cpus=cpus,
            disk_bytes=None if self.disk_mib is None else self.disk_mib * MiB,
        )


def check_limits_source(origin: str, data: Mapping[str, Any], *, trusted: bool) -> None:
    """Refuse `[sandbox_limits]` in a layer the user did not write (a repository's files)."""
    if trusted or TABLE not in data:
        return
    raise ConfigError(
        f"{origin}: [{TABLE}] can only be set in your own settings file "
        "(~/.config/kestrel/settings.toml): a repository's settings must not loosen the sandbox"
    )
