"""The web panel's tests drive a real `kestrel serve` (the API tests' kit) from a real Chromium."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER_KIT = Path(__file__).resolve().parents[1] / "server"
if str(SERVER_KIT) not in sys.path:
    sys.path.append(str(SERVER_KIT))

from panel_kit import launch_or_skip  # noqa: E402
from server_kit import Server  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for a module's tests, with its tenants made by each test."""
    running = Server(tmp_path_factory.mktemp("panel"))
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="session", autouse=True)
def patient_expectations() -> None:
    """Expectations wait up to 20 s for the page (not Playwright's 5): the machines that run
    these tests are shared, and a loaded one is slow, not wrong."""
    if importlib.util.find_spec("playwright") is not None:
        from playwright.sync_api import expect

        expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for a module's tests (skipped where there is none)."""
    with launch_or_skip() as launched:
        yield launched
