"""The cluster's tests use the store tests' throwaway PostgreSQL databases and the cluster kit
the benchmarks share."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for kit in (ROOT / "tests" / "store", ROOT / "bench"):
    if str(kit) not in sys.path:
        sys.path.append(str(kit))
