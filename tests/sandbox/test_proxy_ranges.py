"""The egress proxy reaches only public addresses, and looks up only the names it was given.

Lookups go through a resolver that answers from a fixed table and records every name it is
asked, so the tests see exactly which names would have reached the host's resolver; nothing
leaves this machine (every answer is a loopback or an unroutable address).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from kestrel.sandbox.addresses import NON_PUBLIC_V4, NON_PUBLIC_V6, is_public
from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.sandbox.proxy import AddressInfo, AllowlistProxy, host_allowed

PYTHON = os.path.realpath(sys.executable)

NON_PUBLIC = [
    # IPv4: every block of the special-purpose registry the proxy must not reach.
    "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.100.100.200",
    "100.127.255.254", "127.0.0.1", "127.8.9.10", "169.254.169.254", "169.254.0.1",
    "172.16.0.1", "172.31.255.254", "192.0.0.8", "192.0.0.170", "192.0.2.1", "192.88.99.1",
    "192.168.0.1", "192.168.255.255", "198.18.0.1", "198.19.255.254", "198.51.100.7",
    "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.254",
    "255.255.255.255",
    # IPv6.
    "::", "::1", "100::1", "100::ffff:ffff:ffff:ffff", "2001::1", "2001:0:4136:e378::1",
    "2001:1ff:ffff::1", "2001:db8::1", "2001:db8:ffff::42", "fc00::1", "fd12:3456::1",
    "fe80::1", "fe80::1%eth0", "febf::1", "ff02::1", "ff05::1:3", "fec0::1",
    # IPv6 that carries a non-public IPv4 address.
    "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::ffff:100.64.0.1",
    "::127.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe",
    "64:ff9b::100.64.0.1", "64:ff9b:1::1", "64:ff9b:1::8.8.8.8", "2002:7f00:1::",
    "2002:a00:1::1", "2002:a9fe:a9fe::", "2002:c0a8:101::", "[::1]", "not-an-address",
]  # fmt: skip

PUBLIC = [
    "1.1.1.1", "8.8.8.8", "9.9.9.9", "100.63.255.255", "100.128.0.1", "172.15.255.255",
    "172.32.0.1", "192.0.1.1", "192.169.0.1", "198.17.255.255", "198.20.0.1", "223.255.255.254",
    "2606:4700:4700::1111", "2a00:1450:4001::200e", "2001:200::1", "::ffff:8.8.8.8",
    "64:ff9b::8.8.8.8", "64:ff9b::101:101", "2002:808:808::1",
]  # fmt: skip


@pytest.mark.parametrize("address", NON_PUBLIC)
def test_special_purpose_addresses_are_not_public(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_ordinary_addresses_are_public(address: str) -> None:
    assert is_public(address)


def test_the_first_and_last_address_of_every_block_are_not_public() -> None:
    for v4 in NON_PUBLIC_V4:
        assert not is_public(v4[0]) and not is_public(v4[-1]), v4
    for v6 in NON_PUBLIC_V6:
        assert not is_public(v6[0]) and not is_public(v6[-1]), v6
    # Just outside the blocks an address is public again (where it is in no other block).
    assert is_public(ipaddress.ip_address("100.64.0.0") - 1)
    assert is_public(ipaddress.ip_address("100.127.255.255") + 1)


def test_only_exact_names_match_unless_a_wildcard_was_written() -> None:
    allowed = ["pypi.org", "*.pythonhosted.org"]
    assert host_allowed("pypi.org", allowed) and host_allowed("PyPI.Org.", allowed)
    for name in ("x.pypi.org", "secret-data.pypi.org", "a.b.pypi.org", "pypi.org.evil.test"):
        assert not host_allowed(name, allowed), name
    assert host_allowed("files.pythonhosted.org", allowed)
    assert host_allowed("leak.files.pythonhosted.org", allowed)  # the wildcard's known cost
    assert not host_allowed("pythonhosted.org", allowed)
    assert not host_allowed("evilpythonhosted.org", allowed)


class Resolver:
    """Answers from a table and records each name asked: the names a real lookup would leak."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[AddressInfo]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown name")
        ip = ipaddress.ip_address(self.table[host])
        if ip.version == 6:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 0, "", (str(ip), port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 0, "", (str(ip), port))]


def _ask(proxy: AllowlistProxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(proxy.socket_dir / "proxy.sock"))
        sock.sendall(request)
        return sock.recv(400)


def test_a_subdomain_of_a_listed_name_is_refused_without_a_lookup() -> None:
    resolver = Resolver({"allowed.test": "127.0.0.1"})
    proxy = AllowlistProxy(("allowed.test",), resolve=resolver)
    try:
        for name in ("c2VjcmV0.allowed.test", "x.y.allowed.test", "allowed.test.evil.test"):
            assert b" 403 " in _ask(proxy, f"CONNECT {name}:443 HTTP/1.1\r\n\r\n".encode())
            request = f"GET http://{name}/ HTTP/1.1\r\nHost: {name}\r\n\r\n".encode()
            assert b" 403 " in _ask(proxy, request)
        assert resolver.asked == []
        # The listed name itself is looked up (so the recorder would have seen a leak) and,
        # since it leads to loopback that the list does not name, refused after the lookup.
        reply = _ask(proxy, b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
        assert b" 403 " in reply and b"non-public" in reply
        assert resolver.asked == ["allowed.test"]
    finally:
        proxy.close()


@pytest.mark.parametrize(
    "answer",
    ["10.0.0.1", "100.64.0.1", "169.254.169.254", "192.0.0.1", "198.18.0.1", "::ffff:127.0.0.1",
     "64:ff9b::a9fe:a9fe", "2002:a00:1::", "fd00::1", "fe80::1"],
)  # fmt: skip
def test_a_listed_name_that_resolves_to_a_non_public_address_is_refused(answer: str) -> None:
    proxy = AllowlistProxy(("mirror.test",), resolve=Resolver({"mirror.test": answer}))
    try:
        reply = _ask(proxy, b"CONNECT mirror.test:443 HTTP/1.1\r\n\r\n")
        assert b" 403 " in reply and b"non-public" in reply
        assert proxy.denied == ["mirror.test"]
    finally:
        proxy.close()


def test_a_wildcard_the_person_wrote_does_look_subdomains_up() -> None:
    resolver = Resolver({})
    proxy = AllowlistProxy(("*.allowed.test",), resolve=resolver)
    try:
        assert b" 502 " in _ask(proxy, b"CONNECT leak.allowed.test:443 HTTP/1.1\r\n\r\n")
        assert resolver.asked == ["leak.allowed.test"]
    finally:
        proxy.close()


async def test_from_the_sandbox_a_subdomain_is_refused_and_never_looked_up(
    tmp_path: Path, server: int
) -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must run the sandbox tests")
        pytest.skip("bubblewrap is not installed")
    sandbox = BwrapExecutor(
        tmp_path, network="allowlist", allowed_hosts=["allowed.test", "127.0.0.1"]
    )
    assert sandbox.proxy is not None
    resolver = Resolver({"allowed.test": "127.0.0.1"})
    sandbox.proxy.resolve = resolver
    fetch = (
        "import sys, urllib.request\n"
        "for url in sys.argv[1:]:\n"
        "    try: print(urllib.request.urlopen(url, timeout=10).read().decode().strip())\n"
        "    except Exception as exc: print('refused', url, exc)\n"
    )
    (tmp_path / "fetch.py").write_text(fetch)
    urls = [f"http://{name}:{server}/" for name in ("bWFzdGVyLWtleQ.allowed.test", "allowed.test")]
    try:
        result = await sandbox.run(
            f"{PYTHON} fetch.py {' '.join(urls)}", cwd=tmp_path, timeout_s=60
        )
    finally:
        sandbox.proxy.close()
    assert f"refused {urls[0]}" in result.output, result.output
    assert "hello from the host" in result.output, result.output
    assert resolver.asked == ["allowed.test"]
    assert "bWFzdGVyLWtleQ.allowed.test" in result.output  # the note names what was refused
