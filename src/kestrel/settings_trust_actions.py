"""Trusting and revoking repository settings files: what `kestrel trust` does, as functions."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.protocol.errors import ConfigError
from kestrel.settings_load import project_settings_dir, trust_store_path, user_settings_path
from kestrel.settings_mcp import PROJECT_FILE, json_layer_data, project_mcp_file
from kestrel.settings_trust import Finding, digest, findings, trust_key
from kestrel.settings_trust_store import TrustRecord, TrustStore, now

PROJECT_FILES = ("settings.toml", "settings.local.toml")
"""The repository settings files in a `.kestrel/` folder, in the order they apply."""


@dataclass(frozen=True, slots=True)
class Review:
    """One repository settings file as read once: its trust key, hash, and what needs trust."""

    path: Path
    sha256: str
    findings: tuple[Finding, ...]


def store_for(*, env: Mapping[str, str], home: Path) -> TrustStore:
    """The user's trust store, beside their settings file."""
    return TrustStore(trust_store_path(user_settings_path(env=env, home=home)))


def project_files(where: Path) -> list[Path]:
    """The repository settings files that apply in `where` (a folder, or one such file)."""
    if where.is_file():
        return [where.absolute()]
    mcp = project_mcp_file(where.resolve())
    mcp_files = [mcp] if mcp is not None else []
    found = project_settings_dir(where.resolve())
    if found is None:
        return mcp_files
    return mcp_files + [found / name for name in PROJECT_FILES if (found / name).is_file()]


def review(path: Path) -> Review:
    """Read `path` once and say what in it needs trust; ConfigError if it is not TOML."""
    try:
        raw = path.read_bytes()
        if path.name == PROJECT_FILE:
            return Review(
                Path(trust_key(path.absolute())),
                digest(raw),
                tuple(findings(json_layer_data(path, raw))),
            )
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return Review(Path(trust_key(path.absolute())), digest(raw), tuple(findings(data)))


def trust(reviews: Sequence[Review], store: TrustStore) -> None:
    """Record each reviewed file that needs trust, with the hash of the content reviewed."""
    needing = [r for r in reviews if r.findings]
    if not needing:
        return
    when = now()

    def add(records: dict[str, TrustRecord]) -> None:
        for r in needing:
            records[str(r.path)] = TrustRecord(r.sha256, when)

    store.update(add)


def revoke(where: Path, store: TrustStore) -> list[str]:
    """Forget the trust of the settings files `where` names (a file, a `.kestrel/` folder or a
    project folder, existing or not); returns the paths forgotten."""
    target = where.expanduser().absolute()
    names = {str(target), *(str(p) for p in _candidates(target))}
    if target.exists():
        names |= {str(target.resolve()), *(str(p) for p in _candidates(target.resolve()))}
    if target.is_file() or not target.exists():
        names.add(trust_key(target))
    gone: list[str] = []

    def drop(records: dict[str, TrustRecord]) -> None:
        for name in sorted(names & records.keys()):
            del records[name]
            gone.append(name)

    if names & store.read().keys():
        store.update(drop)
    return gone


def _candidates(folder: Path) -> list[Path]:
    kestrel = folder if folder.name == ".kestrel" else folder / ".kestrel"
    mcp = [] if folder.name == ".kestrel" else [folder / PROJECT_FILE]
    return [kestrel / name for name in PROJECT_FILES] + mcp
