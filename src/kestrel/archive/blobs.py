"""Where archived sessions go: a local folder or an S3-compatible bucket, through `obstore`.

An archive URL names a place for objects:

- none: the folder `archive/objects` in the data directory;
- `file:///srv/kestrel-archive` (or a plain absolute path): a folder on this machine;
- `s3://bucket/prefix`, optionally `?endpoint=http://host:9000&region=eu-west-1`: a bucket of
  any S3-compatible store. Credentials come from the standard AWS environment variables
  (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), as do the endpoint and
  region when the URL does not name them (`AWS_ENDPOINT_URL`, `AWS_REGION`); never from the URL,
  which the log keeps in each tombstone.

Each object's location is a URL of the same form, so a restore needs nothing but the location.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from kestrel.archive.errors import ArchiveUnavailable

if TYPE_CHECKING:
    from obstore.store import ObjectStore

_CHUNK = 1 << 20
_TIMEOUTS = {"connect_timeout": timedelta(seconds=5), "timeout": timedelta(seconds=120)}
_RETRIES = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=20),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "base": 2.0},
}
_QUERY_KEYS = ("endpoint", "region")


def default_url(data_dir: Path) -> str:
    """The archive URL used when none is set: a folder in the data directory."""
    return (data_dir / "archive" / "objects").resolve().as_uri()


@dataclass(frozen=True, slots=True)
class Place:
    """A parsed archive URL: `file` with a folder, or `s3` with a bucket and key prefix."""

    scheme: str
    root: str
    """The folder (file) or the bucket (s3)."""
    prefix: str
    """Key prefix inside the bucket, without slashes at either end; empty for a folder."""
    options: tuple[tuple[str, str], ...] = ()
    """`endpoint` and `region` from the URL's query."""

    def location(self, key: str) -> str:
        """The URL of the object `key` (relative to this place)."""
        if self.scheme == "file":
            return Path(self.root, key).as_uri()
        path = "/".join(p for p in (self.prefix, key) if p)
        query = f"?{urlencode(self.options)}" if self.options else ""
        return f"s3://{self.root}/{quote(path)}{query}"


def parse(url: str) -> Place:
    """The place an archive URL names; `ValueError` for anything else."""
    if url.startswith("/"):
        url = Path(url).as_uri()
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"{url}: expected file:///absolute/folder")
        return Place("file", unquote(parts.path).rstrip("/") or "/", "")
    if parts.scheme == "s3":
        if not parts.netloc or "@" in parts.netloc:
            raise ValueError(f"{url}: expected s3://bucket/prefix, with no credentials in it")
        query = parse_qs(parts.query)
        unknown = sorted(set(query) - set(_QUERY_KEYS))
        if unknown:
            raise ValueError(f"{url}: unknown option {unknown[0]!r} (endpoint, region)")
        options = tuple((key, query[key][-1]) for key in _QUERY_KEYS if key in query)
        return Place("s3", parts.netloc, unquote(parts.path).strip("/"), options)
    raise ValueError(f"{url}: an archive URL is file:///folder or s3://bucket/prefix")


def split_location(location: str) -> tuple[Place, str]:
    """The place holding the object at `location`, and its key there."""
    place = parse(location)
    if place.scheme == "file":
        folder, _, name = place.root.rpartition("/")
        return Place("file", folder or "/", ""), name
    prefix, _, name = place.prefix.rpartition("/")
    return Place("s3", place.root, prefix, place.options), name


class Blobs:
    """Objects at one place: put a file, read one back (with its digest), delete one."""

    def __init__(self, place: Place, env: Mapping[str, str] | None = None) -> None:
        self.place = place
        self._store = _open(place, os.environ if env is None else env)

    def put(self, key: str, source: Path) -> None:
        """Store the file `source` as `key`, whole or not at all."""
        import obstore

        with _unavailable(self.place.location(key), "store"):
            obstore.put(self._store, self._key(key), source)

    def fetch(self, key: str, into: Path | None = None) -> tuple[str, int]:
        """Read `key` (into the file `into`, when given); its SHA-256 (hex) and size."""
        import obstore

        digest, size = hashlib.sha256(), 0
        with _unavailable(self.place.location(key), "read"), contextlib.ExitStack() as stack:
            out = stack.enter_context(open(into, "wb")) if into is not None else None
            got = obstore.get(self._store, self._key(key))
            for chunk in got.stream(min_chunk_size=_CHUNK):
                data = bytes(chunk)
                digest.update(data)
                size += len(data)
                if out is not None:
                    out.write(data)
        return digest.hexdigest(), size

    def keys(self, prefix: str) -> list[str]:
        """The keys under `prefix` (relative to this place), sorted."""
        import obstore

        start = self._key(prefix)
        with _unavailable(self.place.location(prefix), "list"):
            found = obstore.list(self._store, prefix=start).collect()
        cut = len(self._key("")) + 1 if self.place.prefix else 0
        return sorted(str(meta["path"])[cut:] for meta in found)

    def delete(self, key: str) -> None:
        """Remove `key` (no error when it is already gone)."""
        import obstore

        with _unavailable(self.place.location(key), "delete"):
            try:
                obstore.delete(self._store, self._key(key))
            except FileNotFoundError:
                return

    def _key(self, key: str) -> str:
        return "/".join(p for p in (self.place.prefix, key) if p)


def _open(place: Place, env: Mapping[str, str]) -> ObjectStore:
    try:
        from obstore.store import LocalStore, S3Store
    except ImportError:
        raise ArchiveUnavailable(
            "cold storage needs the obstore package: pip install 'kestrel[archive]'"
        ) from None

    if place.scheme == "file":
        try:
            return LocalStore(place.root, mkdir=True)
        except Exception as exc:  # obstore raises its own error types, and OSError
            raise ArchiveUnavailable(f"cannot use {place.root}: {_first_line(exc)}") from None
    options = dict(place.options)
    endpoint = options.get("endpoint") or env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT")
    client: dict[str, Any] = dict(_TIMEOUTS)
    if endpoint and endpoint.startswith("http://"):
        client["allow_http"] = True  # a store on this machine or a private network
    extra: dict[str, Any] = {"endpoint": endpoint} if endpoint else {}
    if "region" in options:
        extra["region"] = options["region"]
    try:
        return S3Store(place.root, client_options=client, retry_config=_RETRIES, **extra)  # type: ignore[arg-type]
    except Exception as exc:
        raise ArchiveUnavailable(f"cannot use s3://{place.root}: {_first_line(exc)}") from None


@contextlib.contextmanager
def _unavailable(location: str, doing: str) -> Iterator[None]:
    """Turn whatever the object store raises into `ArchiveUnavailable`, naming the object."""
    try:
        yield
    except ArchiveUnavailable:
        raise
    except Exception as exc:  # obstore raises its own error types, and OSError
        raise ArchiveUnavailable(f"cannot {doing} {location}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    """The first line of an error's text: obstore appends a long debug dump after it."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
