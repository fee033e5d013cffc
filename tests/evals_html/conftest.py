import sys
from pathlib import Path

import pytest

# The scripted headless run comes from the command-line tests' kit, shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from report_kit import ScriptedSession, run_scripted_session


@pytest.fixture(scope="session")
def session(tmp_path_factory: pytest.TempPathFactory) -> ScriptedSession:
    """One real session, run headless with the scripted model, shared by these tests."""
    return run_scripted_session(tmp_path_factory.mktemp("session"))
