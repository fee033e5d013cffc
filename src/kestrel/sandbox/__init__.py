"""Where commands run: the `Executor` interface and its implementations."""

from kestrel.sandbox.base import ExecResult, Executor, OutputSink
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.limits import Limits
from kestrel.sandbox.local import DEFAULT_ENV_ALLOWLIST, LocalExecutor

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "BwrapExecutor",
    "ExecResult",
    "Executor",
    "Limits",
    "LocalExecutor",
    "OutputSink",
    "SandboxConfig",
]
