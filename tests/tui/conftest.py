from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_kit import Project, isolate


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """A git project, a scripted model, and home, settings and data in a temporary folder."""
    isolate(monkeypatch, tmp_path)
    made = Project(tmp_path)
    yield made
    made.close()
