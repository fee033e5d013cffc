"""Subagent tests reuse the command-line kit that lives beside the CLI tests."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS / "cli") not in sys.path:
    sys.path.append(str(TESTS / "cli"))

import pytest  # noqa: E402
from cli_kit import Env  # noqa: E402


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """A project, an isolated home and data directory (the kit's fix script is not used)."""
    return Env(tmp_path)
