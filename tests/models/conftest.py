"""Fixtures for the provider adapter tests: a loopback wire server and a recording sleep."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from wire_server import SleepRecorder, WireServer, serving


@pytest.fixture
def wire() -> Iterator[WireServer]:
    yield from serving()


@pytest.fixture
def sleep() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings from the developer's shell must not steer the SDKs away from the loopback server.
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
