"""Exit codes and output formats of the `kestrel` command, apart from the session driver so that
light commands (`--help`, `sessions list`) do not import it."""

from __future__ import annotations

import sys
from typing import Literal

OutputFormat = Literal["text", "json", "stream-json"]

EXIT_DONE = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_CANCELLED = 130
"""Ctrl-C (SIGINT), as shells report a program that SIGINT stopped: 128 + 2."""
EXIT_TERMINATED = 143
"""SIGTERM: 128 + 15."""


def report_error(exc: Exception) -> None:
    """Print an error for the person on stderr, unwrapped so paths stay whole."""
    print(f"kestrel: {exc}", file=sys.stderr)
