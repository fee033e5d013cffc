"""Bare repositories served over smart HTTP on loopback by git's own `git http-backend`.

Every request must carry the token the way git sends `http.extraHeader` for a forge:
`Authorization: Basic base64("x-access-token:TOKEN")`; anything else is answered 401. Request
bodies are streamed to the backend: a chunked body (git sends one when a push outgrows
`http.postBuffer`) is de-chunked here, and a gzip body (git compresses large fetch requests) is
handed over with `HTTP_CONTENT_ENCODING` for the backend to inflate. Each request is logged
without the header's value.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, TypedDict
from urllib.parse import urlsplit

_CHUNK = 64 * 1024
# Request headers the backend must not see: the credential, and those this server handles.
_WITHHELD = {"authorization", "content-type", "content-length", "transfer-encoding"}


class GitRequest(TypedDict):
    """One request as the server saw it; never the credential itself."""

    method: str
    path: str
    query: str
    authorized: bool
    status: int
    chunked: bool
    content_encoding: str


class GitHttpServer:
    """Smart-HTTP git for the bare repositories under `root` (`owner/name.git`); with
    `public_reads`, fetches and clones need no token (a public repository), pushes still do."""

    def __init__(self, root: Path, *, token: str, public_reads: bool = False) -> None:
        self.root = root
        self.public_reads = public_reads
        self.requests: list[GitRequest] = []
        self.backend_errors: list[str] = []
        self._expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GitHttpServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Create `root` and listen on a free loopback port in a background thread."""
        self.root.mkdir(parents=True, exist_ok=True)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and wait for the serving thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        if self._server is None:
            raise RuntimeError("the git server is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url_for(self, repository: str) -> str:
        """The clone URL of `owner/name`."""
        return f"{self.base_url}/{repository}.git"

    def path_of(self, repository: str) -> Path:
        """The bare repository's folder for `owner/name`."""
        return self.root / f"{repository}.git"

    def create_repository(self, repository: str, source: Path, branch: str = "main") -> Path:
        """A bare `owner/name.git` that accepts pushes, holding `branch` of work tree `source`."""
        bare = self.path_of(repository)
        bare.parent.mkdir(parents=True, exist_ok=True)
        _git(None, "init", "-q", "--bare", "-b", branch, str(bare))
        _git(bare, "config", "http.receivepack", "true")
        _git(None, "-C", str(source), "push", "-q", str(bare), f"{branch}:refs/heads/{branch}")
        return bare

    def rev_parse(self, repository: str, ref: str) -> str:
        """The commit `ref` (a branch name or any revision) names in the bare repository."""
        bare = self.path_of(repository)
        full = f"refs/heads/{ref}"
        known = _git(bare, "rev-parse", "--verify", "-q", full, check=False)
        return _git(bare, "rev-parse", "--verify", f"{full if known else ref}^{{commit}}")

    def commit_message(self, repository: str, sha: str) -> str:
        """The full message of commit `sha`."""
        return _git(self.path_of(repository), "log", "-1", "--format=%B", sha)

    def show_file(self, repository: str, sha: str, path: str) -> str:
        """The text of `path` at commit `sha`."""
        return _git(self.path_of(repository), "show", f"{sha}:{path}", strip=False)

    def is_ancestor(self, repository: str, older: str, newer: str) -> bool:
        """Whether commit `older` is an ancestor of (or is) `newer`."""
        bare = self.path_of(repository)
        done = subprocess.run(
            ["git", "--git-dir", str(bare), "merge-base", "--is-ancestor", older, newer],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def authorized(self, header: str | None) -> bool:
        """Whether an `Authorization` header value carries the expected token."""
        return header is not None and hmac.compare_digest(header.encode(), self._expected.encode())

    def record(self, entry: GitRequest) -> None:
        """Log one request (called by the handler threads)."""
        with self._lock:
            self.requests.append(entry)

    def record_backend_error(self, text: str) -> None:
        """Keep what the backend wrote on its standard error."""
        with self._lock:
            self.backend_errors.append(text)


def _git(git_dir: Path | None, *args: str, check: bool = True, strip: bool = True) -> str:
    prefix = ["git"] if git_dir is None else ["git", "--git-dir", str(git_dir)]
    done = subprocess.run([*prefix, *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    if not check and done.returncode != 0:
        return ""
    return done.stdout.strip() if strip else done.stdout


def _handler_for(server: GitHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_GitHandler):
        owner = server

    return Handler


class _GitHandler(BaseHTTPRequestHandler):
    # HTTP/1.1: curl refuses a chunked upload to a server it has heard speak HTTP/1.0.
    protocol_version = "HTTP/1.1"
    owner: GitHttpServer

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet; the request log is `GitHttpServer.requests`."""

    def _serve(self) -> None:
        url = urlsplit(self.path)
        entry = GitRequest(
            method=self.command,
            path=url.path,
            query=url.query,
            authorized=self.owner.authorized(self.headers.get("Authorization")),
            status=0,
            chunked="chunked" in self.headers.get("Transfer-Encoding", "").lower(),
            content_encoding=self.headers.get("Content-Encoding", ""),
        )
        self.close_connection = True
        reading = url.query == "service=git-upload-pack" or url.path.endswith("/git-upload-pack")
        if not entry["authorized"] and not (self.owner.public_reads and reading):
            entry["status"] = 401
            self.owner.record(entry)
            self._refuse()
            return
        entry["status"] = self._run_backend(url.path, url.query, entry["chunked"])
        self.owner.record(entry)

    def _refuse(self) -> None:
        body = b"Authentication required\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _run_backend(self, path: str, query: str, chunked: bool) -> int:
        """Run `git http-backend` for this request, streaming both bodies; the answer's status."""
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                ["git", "http-backend"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=self._cgi_env(path, query, chunked),
            )
            assert proc.stdin is not None and proc.stdout is not None
            feeder = threading.Thread(target=self._feed, args=(proc.stdin, chunked), daemon=True)
            feeder.start()
            try:
                status = self._relay(proc.stdout)
            finally:
                proc.stdout.close()
                feeder.join(timeout=60)
                proc.wait(timeout=60)
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip()
        if said:
            self.owner.record_backend_error(said)
        return status

    def _cgi_env(self, path: str, query: str, chunked: bool) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.owner.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": str(self.owner.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": self.client_address[0],
        }
        length = self.headers.get("Content-Length")
        if length is not None and not chunked:
            env["CONTENT_LENGTH"] = length
        for name, value in self.headers.items():
            if name.lower() not in _WITHHELD:
                env["HTTP_" + name.upper().replace("-", "_")] = value
        return env

    def _feed(self, sink: IO[bytes], chunked: bool) -> None:
        """Copy the request body to the backend; a chunked one de-chunked."""
        try:
            pieces = self._chunks() if chunked else self._sized(self.headers.get("Content-Length"))
            for piece in pieces:
                sink.write(piece)
        except (BrokenPipeError, ConnectionError, ValueError):
            pass  # the backend stopped reading or the client went away: its answer says which
        finally:
            with contextlib.suppress(BrokenPipeError):
                sink.close()

    def _sized(self, length: str | None) -> Iterator[bytes]:
        left = int(length or 0)
        while left > 0:
            piece = self.rfile.read(min(left, _CHUNK))
            if not piece:
                return
            left -= len(piece)
            yield piece

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield from self._sized(str(size))
            self.rfile.readline()

    def _relay(self, source: IO[bytes]) -> int:
        """Send the backend's CGI answer: its headers (with `Status:`) and then its body."""
        status, reason, headers = 200, "OK", []
        for raw in iter(source.readline, b""):
            line = raw.decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            if name.strip().lower() == "status":
                code, _, reason = value.strip().partition(" ")
                status = int(code)
            else:
                headers.append((name.strip(), value.strip()))
        self.send_response(status, reason or None)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        shutil.copyfileobj(source, self.wfile, _CHUNK)
        return status
