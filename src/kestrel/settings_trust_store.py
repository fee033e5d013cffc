"""The user's record of trusted repository settings files: `trusted.json` beside their settings.

    {"version": 1, "files": {"/abs/repo/.kestrel/settings.toml":
                             {"sha256": "...", "trusted_at": "2026-11-25T18:40:00+00:00"}}}

Only the user may write it: a store (or its folder) that another user can write, or a group other
than the user's own private group, or one owned by someone else, is refused, since whoever writes
it decides which repositories may run commands here.
Writes go to a temporary file first and replace the store in one step, mode 0600.
"""

from __future__ import annotations

import fcntl
import grp
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kestrel.protocol.errors import ConfigError

STORE_NAME = "trusted.json"
"""The store's file name, in the folder of the user's settings file."""
_VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class TrustRecord:
    """One trusted file: its content's SHA-256 and when it was trusted (ISO 8601, UTC)."""

    sha256: str
    trusted_at: str


@dataclass(frozen=True, slots=True)
class TrustStore:
    """The trust store at `path`; nothing is read or written until asked."""

    path: Path

    def read(self) -> dict[str, TrustRecord]:
        """Trusted files by resolved path; empty if there is no store yet; ConfigError if it
        is corrupt or others may write it."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        self._check_owner()
        return _parse(self.path, raw)

    def update(self, change: Callable[[dict[str, TrustRecord]], None]) -> dict[str, TrustRecord]:
        """Apply `change` to the records and write them back atomically; returns them."""
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(folder / (STORE_NAME + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records = self.read()
            change(records)
            self._write(records)
            return records
        finally:
            os.close(lock)

    def _write(self, records: Mapping[str, TrustRecord]) -> None:
        files = {
            path: {"sha256": r.sha256, "trusted_at": r.trusted_at}
            for path, r in sorted(records.items())
        }
        text = json.dumps({"version": _VERSION, "files": files}, indent=2) + "\n"
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".trusted.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def _check_owner(self) -> None:
        for path in (self.path, self.path.parent):
            info = path.stat()
            if info.st_uid != os.geteuid():
                raise ConfigError(
                    f"{path}: owned by another user (uid {info.st_uid}); Kestrel trusts no "
                    "repository settings through it"
                )
            if _others_may_write(info):
                raise ConfigError(
                    f"{path}: others may write it, so Kestrel trusts no repository settings "
                    f"through it; run `chmod go-w {path}`"
                )


def _others_may_write(info: os.stat_result) -> bool:
    """World-writable, or group-writable for a group other than the user's own private one."""
    if info.st_mode & stat.S_IWOTH:
        return True
    if not info.st_mode & stat.S_IWGRP:
        return False
    try:
        members = grp.getgrgid(info.st_gid).gr_mem
    except KeyError:
        return True
    # With a umask of 002, folders are group-writable; harmless when the group is the user alone.
    return info.st_gid != os.getegid() or bool(members)


def now() -> str:
    """The current time as trust records it."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _parse(path: Path, raw: bytes) -> dict[str, TrustRecord]:
    fix = "fix or delete it (then trust your repositories again)"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: corrupt trust store, not JSON ({exc}); {fix}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(files, dict):
        raise ConfigError(
            f'{path}: corrupt trust store, expected {{"version": 1, "files": {{...}}}}; {fix}'
        )
    records: dict[str, TrustRecord] = {}
    for name, entry in files.items():
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise ConfigError(
                f"{path}: corrupt trust store, the entry for {json.dumps(name)} has no valid "
                f"sha256; {fix}"
            )
        when = entry.get("trusted_at")
        records[name] = TrustRecord(sha, when if isinstance(when, str) else "")
    return records
