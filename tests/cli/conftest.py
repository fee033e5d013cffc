from pathlib import Path

import pytest
from cli_kit import Env


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """A project with a real bug, a fix script, and an isolated home and data directory."""
    return Env(tmp_path)
