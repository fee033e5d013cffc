"""The store tests' throwaway PostgreSQL databases and loopback relay, for the server's tests of
cluster mode (skipped where no PostgreSQL server answers)."""

from __future__ import annotations

import sys
from pathlib import Path

_STORE_TESTS = Path(__file__).resolve().parents[1] / "store"
if str(_STORE_TESTS) not in sys.path:
    sys.path.append(str(_STORE_TESTS))

from pg_helpers import fresh_database  # noqa: E402
from tcp_proxy import Relay  # noqa: E402

__all__ = ["Relay", "fresh_database"]
