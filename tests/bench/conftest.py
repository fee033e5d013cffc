"""The replay harness lives in bench/replay/ as scripts; its tests import its modules by name."""

from __future__ import annotations

import sys
from pathlib import Path

REPLAY = Path(__file__).resolve().parents[2] / "bench" / "replay"
if str(REPLAY) not in sys.path:
    sys.path.insert(0, str(REPLAY))
