"""A client of a `kestrel serve` server's HTTP API, for `kestrel sessions … --server URL`.

The API token comes from the environment (`KESTREL_API_TOKEN`) only, and goes to the server
named and nowhere else: a redirect is followed only within the same origin (or from http to
https on the same host), and plain http is refused for a host that is not this machine unless
the person passes `--insecure`. Every failure is a `RemoteError`: one sentence and an exit code.
"""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from kestrel.cli.exit_codes import EXIT_ERROR, EXIT_LIMIT, EXIT_USAGE

TOKEN_ENV = "KESTREL_API_TOKEN"  # noqa: S105 - where the token is found, not a token
TOKEN_HINT = "create one on the server with `kestrel serve tokens create`"  # noqa: S105
PAGE = 5000
"""Events asked for per request when a whole log is read."""
MAX_REDIRECTS = 5
STREAM_READ_S = 45.0
"""How long a live stream may stay silent (the server sends a keep-alive every 15 s) before the
connection is taken for dropped and made again."""
RECONNECTS = 8
"""Failed reconnections in a row after which following gives up."""


class RemoteError(Exception):
    """What went wrong talking to the server, as one sentence, with the exit code it ends in."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Unreachable(RemoteError):
    """The server could not be reached, or the connection broke: worth another try."""


@dataclass(frozen=True, slots=True)
class RemoteSession:
    """A session as the server shows it."""

    id: str
    task: str
    model: str
    status: str
    finished: str | None
    waiting_on: str
    tokens: int
    cost_usd: float
    created_at: float

    @classmethod
    def from_json(cls, data: object) -> RemoteSession:
        """Read the API's session view; a `RemoteError` when it is not one."""
        if not isinstance(data, dict):
            raise RemoteError(_NOT_THE_API)
        try:
            return cls(
                id=str(data["id"]),
                task=str(data["task"]),
                model=str(data["model"]),
                status=str(data["status"]),
                finished=None if data["finished"] is None else str(data["finished"]),
                waiting_on=str(data["waiting_on"] or ""),
                tokens=int(data["tokens"]),
                cost_usd=float(data["cost_usd"]),
                created_at=float(data["created_at"]),
            )
        except (KeyError, TypeError, ValueError):
            raise RemoteError(_NOT_THE_API) from None


_NOT_THE_API = "the server's answer is not what the Kestrel API sends: is it `kestrel serve`?"


def server_url(raw: str, *, insecure: bool = False) -> str:
    """The server's base URL, checked: http or https, a host, no user name, query or fragment;
    plain http only to this machine unless `insecure`."""
    text = raw.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise RemoteError(f"--server {text!r} is not a URL ({exc})", EXIT_USAGE) from None
    if parts.username or parts.password:
        raise RemoteError(
            f"--server must not hold a user name or password; the API token comes from {TOKEN_ENV}",
            EXIT_USAGE,
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(
            f"--server {text!r} is not a server's address; give one like "
            "https://kestrel.example.com or http://127.0.0.1:8420",
            EXIT_USAGE,
        )
    if parts.query or parts.fragment:
        raise RemoteError(f"--server {text!r} must not have a query or fragment", EXIT_USAGE)
    if parts.scheme == "http" and not insecure and not is_loopback(parts.hostname):
        raise RemoteError(
            f"refusing to send the API token over plain http to {parts.hostname}: use https://, "
            "or pass --insecure if the network between here and the server is trusted",
            EXIT_USAGE,
        )
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine: localhost, 127.0.0.0/8 or ::1."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def quoted(session_id: str) -> str:
    """A session id as one path segment, whatever it holds."""
    return urllib.parse.quote(session_id, safe="")


def read_token(environ: Mapping[str, str], base: str) -> str:
    """The API token from `KESTREL_API_TOKEN`; never printed, not even in an error."""
    token = environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise RemoteError(f"set {TOKEN_ENV} to an API token of {base}; {TOKEN_HINT}", EXIT_USAGE)
    if not token.isascii() or not token.isprintable() or " " in token:
        raise RemoteError(
            f"{TOKEN_ENV} holds characters no API token has; set it to the token that "
            "`kestrel serve tokens create` printed",
            EXIT_USAGE,
        )
    return token


class Remote:
    """The API of one server, called with one token."""

    def __init__(self, base: str, token: str, *, user_agent: str = "kestrel") -> None:
        self.base = base
        self._token = token
        self._http = httpx.Client(
            timeout=httpx.Timeout(60.0, connect=10.0),
            follow_redirects=False,
            headers={"User-Agent": user_agent},
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer to a request of the API (`path` under /v1)."""
        answer = self.request(method, path, **kwargs)
        try:
            return answer.json()
        except ValueError:
            raise RemoteError(_NOT_THE_API) from None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send a request of the API; an error answer becomes a `RemoteError`."""
        answer = self._send(method, path, stream=False, **kwargs)
        raise_for(answer, self.base, method, path)
        return answer

    def _send(
        self,
        method: str,
        path: str,
        *,
        stream: bool,
        headers: dict[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send one request, following redirects within the server's origin only."""
        url = self.base + "/v1" + path
        sent = {**(headers or {}), "Authorization": f"Bearer {self._token}"}
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        for _ in range(MAX_REDIRECTS + 1):
            request = self._http.build_request(method, url, headers=sent, **kwargs, **extra)
            try:
                answer = self._http.send(request, stream=stream)
            except httpx.TimeoutException:
                raise Unreachable(f"the server at {self.base} did not answer in time") from None
            except httpx.TransportError as exc:
                raise Unreachable(
                    f"cannot reach the server at {self.base} ({exc or type(exc).__name__}): is "
                    "`kestrel serve` running there, and is the address right?"
                ) from None
            if not answer.is_redirect:
                return answer
            answer.close()
            url = self._redirect_target(answer, method)
            kwargs.pop("params", None)  # The new address carries its own query.
        raise RemoteError(f"the server at {self.base} redirected more than {MAX_REDIRECTS} times")

    def _redirect_target(self, answer: httpx.Response, method: str) -> str:
        """Where a redirect points, if the token may go there; else a `RemoteError`."""
        target = answer.request.url.join(answer.headers.get("location", ""))
        here = answer.request.url
        upgrade = here.scheme == "http" and target.scheme == "https" and here.host == target.host
        same = (target.scheme, target.host, target.port) == (here.scheme, here.host, here.port)
        if not (same or upgrade):
            shown = f"{target.scheme}://{target.netloc.decode()}"
            raise RemoteError(
                f"the server at {self.base} redirected to {shown}, another host; the API token "
                f"is not sent there (if you trust it, use --server {shown})",
                EXIT_USAGE,
            )
        if method != "GET" and answer.status_code not in (307, 308):
            raise RemoteError(
                f"the server at {self.base} answered {method} with a redirect to {target}; "
                "give the address it redirects to with --server",
                EXIT_USAGE,
            )
        return str(target)

    def stream(
        self,
        path: str,
        after: int,
        on_reconnect: Callable[[str], None] | None = None,
    ) -> Iterator[dict[str, Any] | None]:
        """The records of a Server-Sent Events stream after `after`, and None for each
        keep-alive; a dropped connection is made again with `Last-Event-ID`, so nothing is
        lost or repeated. Gives up after `RECONNECTS` failed tries in a row."""
        last, failures = after, 0
        timeout = httpx.Timeout(60.0, connect=10.0, read=STREAM_READ_S)
        while True:
            try:
                answer = self._send(
                    "GET",
                    path,
                    stream=True,
                    params={"after": last},
                    headers={"Last-Event-ID": str(last), "Accept": "text/event-stream"},
                    timeout=timeout,
                )
                try:
                    if answer.is_error:
                        answer.read()
                    raise_for(answer, self.base, "GET", path)
                    if not answer.headers.get("content-type", "").startswith("text/event-stream"):
                        raise RemoteError(_NOT_THE_API)
                    for item in sse_records(answer.iter_lines()):
                        if item is not None and "seq" in item:
                            last, failures = int(item["seq"]), 0
                        yield item
                finally:
                    answer.close()
                why = "the server closed the stream"
            except (Unreachable, httpx.TransportError) as exc:
                why = f"the connection dropped ({exc or type(exc).__name__})"
            failures += 1
            if failures > RECONNECTS:
                raise Unreachable(f"lost the server at {self.base}: {why}")
            if on_reconnect is not None:
                on_reconnect(f"{why}; reconnecting after event {last}")
            time.sleep(min(0.25 * 2 ** (failures - 1), 5.0))

    def sessions(self) -> list[RemoteSession]:
        """The tenant's sessions, newest first."""
        listed = self.json("GET", "/sessions")
        if not isinstance(listed, list):
            raise RemoteError(_NOT_THE_API)
        return [RemoteSession.from_json(item) for item in listed]

    def session(self, session_id: str) -> RemoteSession:
        """One session."""
        return RemoteSession.from_json(self.json("GET", f"/sessions/{quoted(session_id)}"))

    def events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Any]:
        """The session's records after `after`, in the log's JSON form (every one: pages are
        asked for until the log ends, unless `limit` caps them)."""
        found: list[Any] = []
        while limit is None or len(found) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(found))
            params = {"after": after, "limit": size}
            page = self.json("GET", f"/sessions/{quoted(session_id)}/events", params=params)
            if not isinstance(page, list) or not all(isinstance(r, dict) for r in page):
                raise RemoteError(_NOT_THE_API)
            found += page
            if len(page) < size:
                break
            after = int(page[-1]["seq"])
        return found


def sse_records(lines: Iterable[str]) -> Iterator[dict[str, Any] | None]:
    """The JSON records of a Server-Sent Events stream's `data:` fields, `{"status": ...}` for
    each status event (the session was queued, runs or is idle), and None for each comment
    (the server's keep-alive)."""
    data: list[str] = []
    kind = ""
    for line in lines:
        if line.startswith(":"):
            yield None
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            try:
                item = json.loads("\n".join(data))
            except ValueError:
                raise RemoteError(_NOT_THE_API) from None
            data, was = [], kind
            kind = ""
            if was == "status" and isinstance(item, dict) and isinstance(item.get("status"), str):
                yield {"status": item["status"]}
                continue
            if not isinstance(item, dict) or not isinstance(item.get("seq"), int):
                raise RemoteError(_NOT_THE_API)
            yield item


def raise_for(answer: httpx.Response, base: str, method: str, path: str) -> None:
    """A `RemoteError` saying what the server refused and what to do, for an error answer."""
    status = answer.status_code
    if status < 400:
        return
    said = server_message(answer)
    if status == 401:
        raise RemoteError(
            f"the server refused the API token ({said or 'HTTP 401'}): set {TOKEN_ENV} to a "
            f"valid token; {TOKEN_HINT}",
            EXIT_USAGE,
        )
    if said is None:
        raise RemoteError(
            f"the server at {base} answered HTTP {status} ({answer.reason_phrase}) to {method} "
            f"/v1{path}: is it `kestrel serve`, and is the address right?",
            EXIT_USAGE if status < 500 else EXIT_ERROR,
        )
    if status == 429:
        retry = answer.headers.get("Retry-After")
        when = f"; try again in {retry} s" if retry else "; try again later"
        raise RemoteError(f"{said} (HTTP 429){when}", EXIT_LIMIT)
    if status == 413:
        said += "; send a smaller repository, or give one the server can clone (--git-url)"
    if status == 404:
        said += " (HTTP 404; ids are given in full, and `kestrel sessions list --server URL` lists"
        raise RemoteError(said + " the token's sessions)", EXIT_USAGE)
    if status >= 500:
        raise RemoteError(f"the server failed (HTTP {status}): {said}", EXIT_ERROR)
    raise RemoteError(f"{said} (HTTP {status})", EXIT_USAGE)


def server_message(answer: httpx.Response) -> str | None:
    """The `error.message` of an error answer, or None when it has none (not the API)."""
    try:
        body = answer.json()
        message = body["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(message) if message else None
