"""Network by allow-list: listed hosts are reachable through the proxy, nothing else is."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.sandbox.proxy import AllowlistProxy, host_allowed

# The interpreter itself, not a venv's link to it: a checkout under /tmp is hidden inside.
PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
        pytest.skip("bubblewrap is not installed")
    return tmp_path


def _fetch(url: str) -> str:
    code = (
        f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read().decode())"
    )
    return f'{PYTHON} -c "{code}"'


def _tunnel(port: int) -> str:
    """A client that reaches the server through a CONNECT tunnel, as HTTPS clients do."""
    code = (
        "import http.client; c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10); "
        f"c.set_tunnel('127.0.0.1', {port}); c.request('GET', '/'); "
        "print(c.getresponse().read().decode())"
    )
    return f'{PYTHON} -c "{code}"'


async def test_a_listed_host_is_reached_through_the_proxy(ws: Path, server: int) -> None:
    sandbox = BwrapExecutor(ws, network="allowlist", allowed_hosts=["127.0.0.1"])
    result = await sandbox.run(_fetch(f"http://127.0.0.1:{server}/"), cwd=ws, timeout_s=30)
    assert result.exit_code == 0, result.output
    assert "hello from the host" in result.output
    tunnelled = await sandbox.run(_tunnel(server), cwd=ws, timeout_s=30)
    assert tunnelled.exit_code == 0, tunnelled.output
    assert "hello from the host" in tunnelled.output


async def test_a_host_not_listed_is_refused_and_the_output_says_so(ws: Path, server: int) -> None:
    sandbox = BwrapExecutor(ws, network="allowlist", allowed_hosts=["pypi.org"])
    result = await sandbox.run(_fetch(f"http://127.0.0.1:{server}/"), cwd=ws, timeout_s=30)
    assert result.exit_code != 0
    assert "403" in result.output
    assert "allow-list refused: 127.0.0.1" in result.output
    tunnelled = await sandbox.run(_tunnel(server), cwd=ws, timeout_s=30)
    assert tunnelled.exit_code != 0 and "403" in tunnelled.output


async def test_going_around_the_proxy_reaches_nothing(ws: Path, server: int) -> None:
    sandbox = BwrapExecutor(ws, network="allowlist", allowed_hosts=["127.0.0.1"])
    code = (
        "import socket; s = socket.socket(); s.settimeout(3); "
        f"print('reached' if s.connect_ex(('127.0.0.1', {server})) == 0 else 'blocked')"
    )
    result = await sandbox.run(f'{PYTHON} -c "{code}"', cwd=ws, timeout_s=30)
    assert result.output.strip() == "blocked"
    udp = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        "s.sendto(b'x', ('1.1.1.1', 53)); print('sent')"
    )
    result = await sandbox.run(f'{PYTHON} -c "{udp}"', cwd=ws, timeout_s=30)
    assert "sent" not in result.output


def test_host_matching() -> None:
    allowed = ["pypi.org", "*.githubusercontent.com", "files.pythonhosted.org"]
    assert host_allowed("pypi.org", allowed)
    assert not host_allowed("test.pypi.org", allowed)  # exact names only: no DNS channel
    assert host_allowed("raw.githubusercontent.com", allowed)
    assert not host_allowed("githubusercontent.com", allowed)
    assert not host_allowed("pypi.org.evil.example", allowed)
    assert not host_allowed("evilpypi.org", allowed)
    assert host_allowed("PyPI.org.", allowed)


def test_the_proxy_refuses_unlisted_hosts_and_bad_requests() -> None:
    proxy = AllowlistProxy(("example.invalid",))
    path = proxy.socket_dir / "proxy.sock"
    try:
        for request, expected in (
            (b"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", b"403"),
            (b"GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n", b"403"),
            (b"GET /relative HTTP/1.1\r\n\r\n", b"400"),
            (b"CONNECT example.invalid:443 HTTP/1.1\r\n\r\n", b"502"),
        ):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(path))
                sock.sendall(request)
                assert expected in sock.recv(200), request
        assert proxy.denied_since(0) == ["127.0.0.1", "10.0.0.1"]
    finally:
        proxy.close()
    assert not path.exists()
