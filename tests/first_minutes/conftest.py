from pathlib import Path

import pytest
from kit import NewUser


@pytest.fixture
def user(tmp_path: Path) -> NewUser:
    """A new user: fresh HOME and data, a small project under git as the current directory."""
    return NewUser(tmp_path)
