"""Network by allow-list: a proxy outside the sandbox that only reaches the hosts a person listed.

A sandboxed command has an empty network namespace. With `network = "allowlist"` it gets one way
out: a Unix socket bound into the sandbox, behind which this proxy runs on the host. Inside, a
small relay listens on the sandbox's own loopback and passes connections to that socket, and
`HTTP_PROXY`/`HTTPS_PROXY` point programs at it. The proxy speaks HTTP `CONNECT` (for HTTPS and
anything else tunnelled) and plain `http://` requests, and refuses every host not on the list
with a `403` that says why. Only names on the list are ever looked up, and only exactly:
`pypi.org` allows `pypi.org`, not `x.pypi.org`, since a lookup of `<data>.pypi.org` would carry
data out through the host's resolver; an entry `*.pythonhosted.org` allows the names under it,
and with them that channel. Names are resolved here, not in the sandbox; a listed name that
resolves to an address that is not public (`kestrel.sandbox.addresses`) is refused too (a DNS
answer must not turn an allowed name into the host's own services or its network), unless the
list names that address itself. `localhost`, when listed, leads to loopback without a lookup.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import socketserver
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kestrel.protocol.oserrors import os_error_text
from kestrel.sandbox.addresses import is_public, parse

MAX_HEADER_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 15.0
SOCKET_NAME = "proxy.sock"
RELAY_PORT = 3128
"""Where the relay listens on the sandbox's own loopback."""

RELAY_SCRIPT = r"""
import os, socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
os.write(1, b"ready\n")
os.close(1)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    pipe(upstream, client)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
"""The relay that runs inside the sandbox: TCP on its loopback to the proxy's Unix socket."""


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether `host` is an entry of `allowed`, exactly; only an entry `*.x` allows the names
    under `x` (and then any of them, which lets a command leak data through DNS lookups)."""
    host = _normal(host)
    for entry in allowed:
        entry = _normal(entry)
        if entry.startswith("*.") and host.endswith(entry[1:]) and len(host) > len(entry) - 1:
            return True
        if host == entry:
            return True
    return False


def _normal(name: str) -> str:
    return name.strip().lower().strip("[]").rstrip(".")


AddressInfo = tuple[int, int, int, str, tuple[Any, ...]]
"""One answer of `socket.getaddrinfo`: family, type, protocol, canonical name, address."""
Resolver = Callable[[str, int], list[AddressInfo]]
"""Looks a name up: `resolve_tcp`, or a stand-in that records its calls."""


def resolve_tcp(host: str, port: int) -> list[AddressInfo]:
    """The addresses of `host` from the system's resolver, for a TCP connection to `port`."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(family, kind, proto, name, tuple(addr)) for family, kind, proto, name, addr in answers]


LOOPBACK = ("127.0.0.1", "::1")
"""Where a listed `localhost` leads; the name itself is never looked up."""


@dataclass
class AllowlistProxy:
    """An HTTP proxy on a Unix socket that reaches only `allowed` hosts; runs in threads."""

    allowed: tuple[str, ...]
    resolve: Resolver = resolve_tcp
    """How listed names are looked up (only listed names ever are)."""
    denied: list[str] = field(default_factory=list)
    """Hosts refused so far, in order, for telling the person and the model."""
    _server: socketserver.ThreadingUnixStreamServer | None = None
    _dir: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def socket_dir(self) -> Path:
        """The folder holding the socket; it is bound into the sandbox."""
        self.start()
        assert self._dir is not None
        return Path(self._dir)

    def start(self) -> None:
        """Listen (once); the server thread lives as long as the process or until `close`."""
        with self._lock:
            if self._server is not None:
                return
            self._dir = tempfile.mkdtemp(prefix="kestrel-proxy-")
            path = os.path.join(self._dir, SOCKET_NAME)
            proxy = self

            class Handler(socketserver.BaseRequestHandler):
                def handle(self) -> None:
                    proxy._handle(self.request)

            server = socketserver.ThreadingUnixStreamServer(path, Handler)
            server.daemon_threads = True
            # The sandbox's user maps to ours, but be explicit: only we and it may connect.
            os.chmod(path, 0o600)
            threading.Thread(target=server.serve_forever, daemon=True, name="kestrel-proxy").start()
            self._server = server

    def close(self) -> None:
        """Stop listening and remove the socket."""
        with self._lock:
            if self._server is None:
                return
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            if self._dir is not None:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self._dir, SOCKET_NAME))
                    os.rmdir(self._dir)

    def denied_since(self, mark: int) -> list[str]:
        """Hosts refused after `len(denied)` was `mark`, each once."""
        return list(dict.fromkeys(self.denied[mark:]))

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(CONNECT_TIMEOUT_S)
        try:
            head, rest = _read_head(client)
        except (OSError, ValueError):
            client.close()
            return
        try:
            method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except ValueError:
            _reply(client, 400, "not an HTTP request")
            return
        if method.upper() == "CONNECT":
            host, _, port = target.rpartition(":")
            request = b""
        else:
            if not target.lower().startswith("http://"):
                _reply(client, 400, "only CONNECT and absolute http:// URLs are proxied")
                return
            authority, _, path = target[7:].partition("/")
            host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
            port = port or "80"
            first = f"{method} /{path} {version}".encode("latin-1")
            request = first + b"\r\n" + head.split(b"\r\n", 1)[1] + rest
        host = host.strip("[]")
        upstream = self._connect(client, host, port)
        if upstream is None:
            return
        if request:
            upstream.sendall(request)
        else:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + b"")
            if rest:
                upstream.sendall(rest)
        _relay(client, upstream)

    def _connect(self, client: socket.socket, host: str, port: str) -> socket.socket | None:
        # An unlisted name is refused before any lookup: a lookup alone can carry data out.
        if not host or not port.isdigit() or not host_allowed(host, self.allowed):
            self.denied.append(host or "(none)")
            _reply(client, 403, f"kestrel: {host or 'that host'} is not in the network allow-list")
            return None
        try:
            infos = self._addresses(host, int(port))
        except OSError as exc:
            _reply(client, 502, f"kestrel: cannot resolve {host}: {os_error_text(exc)}")
            return None
        literal = {ip for entry in self.allowed if (ip := parse(entry)) is not None}
        for family, kind, proto, _, address in infos:
            ip = parse(str(address[0]))
            if ip is None or not (is_public(ip) or ip in literal):
                self.denied.append(host)
                _reply(client, 403, f"kestrel: {host} resolves to a non-public address ({ip})")
                return None
            try:
                upstream = socket.socket(family, kind, proto)
                upstream.settimeout(CONNECT_TIMEOUT_S)
                upstream.connect(address)
            except OSError:
                continue
            upstream.settimeout(None)
            return upstream
        _reply(client, 502, f"kestrel: cannot connect to {host}:{port}")
        return None

    def _addresses(self, host: str, port: int) -> list[AddressInfo]:
        if _normal(host) != "localhost":
            return self.resolve(host, port)
        # Listed by name: loopback, as the person meant, without asking any resolver.
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 0, "", (LOOPBACK[0], port)),
            (socket.AF_INET6, socket.SOCK_STREAM, 0, "", (LOOPBACK[1], port, 0, 0)),
        ]


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("the client closed before the request ended")
        data += chunk
        if len(data) > MAX_HEADER_BYTES:
            raise ValueError("request head too large")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _reply(client: socket.socket, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(OSError):
        client.sendall(head + body)
    client.close()


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both sides are done."""
    a.settimeout(None)
    open_ends = {a: b, b: a}
    try:
        while open_ends:
            readable, _, _ = select.select(list(open_ends), [], [], 300)
            if not readable:
                break
            for src in readable:
                data = b""
                with contextlib.suppress(OSError):
                    data = src.recv(65536)
                dst = open_ends[src]
                if data:
                    dst.sendall(data)
                    continue
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                del open_ends[src]
    except OSError:
        pass
    finally:
        a.close()
        b.close()
