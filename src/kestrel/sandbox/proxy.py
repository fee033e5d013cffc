"""Network by allow-list: a proxy outside the sandbox that only reaches the hosts a person listed.

A sandboxed command has an empty network namespace. With `network = "allowlist"` it gets one way
out: a Unix socket bound into the sandbox, behind which this proxy runs on the host. Inside, a
small relay listens on the sandbox's own loopback and passes connections to that socket, and
`HTTP_PROXY`/`HTTPS_PROXY` point programs at it. The proxy speaks HTTP `CONNECT` (for HTTPS and
anything else tunnelled) and plain `http://` requests, and refuses every host not on the list
with a `403` that says why. Names are resolved here, not in the sandbox; a listed name that
resolves to a loopback, private or link-local address is refused too (a DNS answer must not
turn an allowed name into the host's own services), unless the entry is that address or
`localhost` itself.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import socketserver
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

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
    """Whether `host` is an entry of `allowed` or a subdomain of one (`*.x` means subdomains)."""
    host = host.lower().strip("[]").rstrip(".")
    for entry in allowed:
        entry = entry.lower().strip().rstrip(".")
        if entry.startswith("*."):
            if host.endswith(entry[1:]):
                return True
        elif host == entry or host.endswith("." + entry):
            return True
    return False


def _internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified


@dataclass
class AllowlistProxy:
    """An HTTP proxy on a Unix socket that reaches only `allowed` hosts; runs in threads."""

    allowed: tuple[str, ...]
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
        if not host or not port.isdigit() or not host_allowed(host, self.allowed):
            self.denied.append(host or "(none)")
            _reply(client, 403, f"kestrel: {host or 'that host'} is not in the network allow-list")
            return None
        explicit = host.lower() == "localhost" or any(
            host.lower() == entry.lower() for entry in self.allowed if _is_ip(entry)
        )
        try:
            infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except OSError as exc:
            _reply(client, 502, f"kestrel: cannot resolve {host}: {exc}")
            return None
        for family, kind, proto, _, address in infos:
            if _internal(str(address[0])) and not explicit:
                self.denied.append(host)
                _reply(client, 403, f"kestrel: {host} resolves to an internal address")
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


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


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
