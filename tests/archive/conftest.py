"""Cold storage's tests: the command-line and store kits beside the CLI and store tests, a real
S3-compatible server on loopback, and PostgreSQL databases of their own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for kit in (TESTS / "cli", TESTS / "store"):
    if str(kit) not in sys.path:
        sys.path.append(str(kit))

from s3_server import S3Server  # noqa: E402


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """An S3-compatible server (moto's, a real HTTP server in its own process) with a bucket."""
    server = S3Server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_s3() -> Iterator[S3Server]:
    """A server of the test's own, which the test may stop."""
    server = S3Server.start()
    try:
        yield server
    finally:
        server.stop()
