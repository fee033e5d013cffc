"""One real `kestrel serve` per test module: `server`, started as the module's optional
`SERVER_OPTIONS` (workers, plans) say and stopped after its last test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from server_kit import Server


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The module's server, in a folder named after the module."""
    options = getattr(request.module, "SERVER_OPTIONS", {})
    running = Server(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]), **options)
    running.start()
    yield running
    running.stop()
