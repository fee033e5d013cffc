"""The fault suite: a real `kestrel` on a real SQLite file, with faults injected from outside."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_kit import Kestrel


@pytest.fixture
def kestrel(tmp_path: Path) -> Kestrel:
    """An isolated home and data directory with one project whose test fails."""
    return Kestrel(tmp_path)
