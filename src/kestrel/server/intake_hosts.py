"""Which hosts a hosted session may clone from: public ones, unless the operator allows more.

A git URL is a request the server makes on a tenant's behalf, so without this check a tenant
could point it at the server's own loopback services, the cloud's metadata address or the
private network behind it. Every address the host name resolves to must be a global one; the
operator can allow named hosts (globs) with `kestrel serve --allow-git-host`. git resolves the
name again when it connects, so a name whose answers change between the two lookups could
still reach a private address: a network policy on the server is the stronger guard.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from kestrel.server.intake_sources import IntakeError

Resolve = Callable[[str], list[str]]


def _resolve(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def git_host(url: str) -> str:
    """The host a (checked) git URL names, lower-cased, without brackets or port."""
    if "://" in url:
        return (urlsplit(url).hostname or "").lower()
    rest = url.partition("@")[2] or url  # user@host:path, checked already
    if rest.startswith("["):
        return rest[1:].partition("]")[0].lower()
    return rest.partition(":")[0].lower()


def check_git_host(url: str, allowed: Sequence[str], resolve: Resolve = _resolve) -> None:
    """`IntakeError` unless the URL's host is allowed by name or resolves to public addresses."""
    host = git_host(url)
    if not host:
        raise IntakeError("git_url names no host")
    if any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in allowed):
        return
    try:
        addresses = resolve(host)
    except (OSError, UnicodeError):
        raise IntakeError(f"the host {host!r} of git_url cannot be resolved") from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if not ip.is_global:
            raise IntakeError(
                f"the host {host!r} of git_url is a private or local address ({ip}); this "
                "server clones only from public hosts unless its operator allows this one"
            )
