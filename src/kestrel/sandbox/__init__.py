"""Where commands run: the `Executor` interface and its implementations.

The names below are imported when first used, so that a light command that needs one small
module of this package (`kestrel sessions list` reads the limits' settings) does not load
bubblewrap's command builder, the seccomp filter and the guards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.lazy_names import lazy_attributes

if TYPE_CHECKING:
    from kestrel.sandbox.base import (
        ExecResult as ExecResult,
    )
    from kestrel.sandbox.base import (
        Executor as Executor,
    )
    from kestrel.sandbox.base import (
        OutputSink as OutputSink,
    )
    from kestrel.sandbox.bwrap import BwrapExecutor as BwrapExecutor
    from kestrel.sandbox.bwrap import SandboxConfig as SandboxConfig
    from kestrel.sandbox.limits import Limits as Limits
    from kestrel.sandbox.local import (
        DEFAULT_ENV_ALLOWLIST as DEFAULT_ENV_ALLOWLIST,
    )
    from kestrel.sandbox.local import (
        LocalExecutor as LocalExecutor,
    )

_WHERE = {
    "DEFAULT_ENV_ALLOWLIST": "local",
    "BwrapExecutor": "bwrap",
    "ExecResult": "base",
    "Executor": "base",
    "Limits": "limits",
    "LocalExecutor": "local",
    "OutputSink": "base",
    "SandboxConfig": "bwrap",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_attributes(__name__, _WHERE)
