"""Plan-mode tests reuse the loop and command-line kits that live beside the agent and CLI tests."""

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for kit in (TESTS / "agent", TESTS / "cli"):
    if str(kit) not in sys.path:
        sys.path.append(str(kit))

from cli_kit import Env  # noqa: E402


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """A project with a real bug, an isolated home and data directory, and a script file."""
    return Env(tmp_path)
