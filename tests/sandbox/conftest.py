"""Shared fixtures of the sandbox tests."""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

HELLO = "hello from the host"  # tests look for these words in what a command printed
"""What the host's HTTP server answers every GET with."""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{HELLO}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    """An HTTP server on the host's loopback; yields its port."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder; skips without bubblewrap, except in CI, where it fails."""
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
        pytest.skip("bubblewrap is not installed")
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"
