"""The checks `kestrel doctor` runs, each a function returning `DoctorCheck` lines.

Every check reports what it finds instead of raising: a broken settings file, a missing tool or
an unwritable folder is a line of the report, never a traceback.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from kestrel.cli.doctor_model import DoctorCheck, model_checks
from kestrel.context.index_store import MIGRATED_SCHEMAS, SCHEMA_VERSION, index_path_for
from kestrel.gitsafe import GitUnavailable, NotARepository, UnsafeRepository, open_repository
from kestrel.models.router import ROLES
from kestrel.sandbox.probe import ProbeReport
from kestrel.settings import Settings
from kestrel.settings_load import LayerReport, user_settings_path
from kestrel.tools.base import ToolFailed
from kestrel.tools.search import find_rg

LOW_DISK_BYTES = 1 << 30
"""Below this much free space where sessions are kept, the doctor warns."""
_TOOL_TIMEOUT_S = 10


def settings_checks(
    reports: list[LayerReport], *, env: Mapping[str, str], home: Path
) -> list[DoctorCheck]:
    """One line per settings file read (the user's even when absent), and one per other
    layer with problems, each with every problem it has."""
    user = user_settings_path(env=env, home=home)
    checks: list[DoctorCheck] = []
    if not any(report.file == user for report in reports):
        checks.append(DoctorCheck("settings", "ok", f"{user}: none yet; the defaults apply"))
    for report in reports:
        if report.file is None and not report.problems:
            continue
        if not report.problems:
            checks.append(DoctorCheck("settings", "ok", f"{report.origin}: valid"))
            continue
        count = len(report.problems)
        fix = {
            "environment": "correct or unset the KESTREL_ variables named above",
            "command line": "correct the options named above",
        }.get(report.origin, f"edit {report.origin} ({count} problem{'s' * (count > 1)})")
        checks.append(DoctorCheck("settings", "fail", "\n".join(report.problems), fix=fix))
    return checks


def credential_checks(
    settings: Settings, env: Mapping[str, str], model: str | None = None
) -> list[DoctorCheck]:
    """Whether each model the settings use (or just `model`) can be reached as configured.

    Without `model` nothing goes over the network; with it, the endpoint may be probed where
    the model checks can do so.
    """
    if model is not None:
        probing: dict[str, Any] = {"probe": True} if _accepts_probe() else {}
        return _labelled(model, ["chosen"], model_checks(model, settings, env, **probing))
    # The configured models are checked offline: the doctor makes no network call unasked.
    offline: dict[str, Any] = {"probe": False} if _accepts_probe() else {}
    roles: dict[tuple[str, str | None], list[str]] = {}
    for role in ROLES:
        for choice in settings.role_models(role):
            roles.setdefault((choice.model, choice.base_url), []).append(role)
    checks: list[DoctorCheck] = []
    for (spec, base_url), used_by in roles.items():
        reached = settings.model_copy(update={"model": spec, "base_url": base_url})
        checks += _labelled(spec, used_by, model_checks(spec, reached, env, **offline))
    return checks


def _accepts_probe() -> bool:
    try:
        return "probe" in inspect.signature(model_checks).parameters
    except (TypeError, ValueError):
        return False


def _labelled(spec: str, roles: list[str], checks: list[DoctorCheck]) -> list[DoctorCheck]:
    label = f"{spec} ({', '.join(roles)})"
    return [
        DoctorCheck(c.name, c.status, f"{label}: {c.detail}" if c.detail else label, c.fix)
        for c in checks
    ]


def sandbox_checks(report: ProbeReport, configured: str) -> list[DoctorCheck]:
    """The sandbox probe as lines; a sandbox the settings do not use cannot fail the run."""
    if report.ok:
        cgroups = (
            f"cgroups v{report.cgroup_version} ({', '.join(report.cgroup_controllers) or 'none'})"
            if report.cgroup_version
            else "no cgroups"
        )
        landlock = "landlock" if report.landlock else "no landlock"
        detail = (
            f"bubblewrap {report.bwrap_version or '(unknown version)'} starts, user namespaces "
            f"and the seccomp filter in force; {cgroups}, {landlock}"
        )
        checks = [DoctorCheck("sandbox", "ok", detail)]
    else:
        failed = _sandbox_failure(report)
        fix = "; ".join(report.fixes())
        if configured == "none":
            checks = [DoctorCheck("sandbox", "warn", f"{failed} (not used: sandbox = none)", fix)]
        else:
            checks = [DoctorCheck("sandbox", "fail", failed, fix)]
    return checks + [DoctorCheck("sandbox", "info", note) for note in report.notes()]


def _sandbox_failure(report: ProbeReport) -> str:
    if report.bwrap_path is None:
        return "bubblewrap (bwrap) is not installed"
    if not report.userns:
        return f"bubblewrap at {report.bwrap_path} cannot create user namespaces"
    if not report.sandbox_starts:
        said = " ".join(report.trial_output.split())[:300]
        return "the sandbox did not start" + (f": {said}" if said else "")
    return "the sandbox starts, but the seccomp filter is not in force"


def git_checks(cwd: Path) -> list[DoctorCheck]:
    """git's version, and whether `cwd` is in a repository Kestrel will run git in."""
    found, version = _tool_version(["git", "--version"])
    if not found:
        fix = "install git: apt-get install git (dnf/pacman/brew: git)"
        return [DoctorCheck("git", "fail", "git is not installed", fix)]
    checks = [DoctorCheck("git", "ok", version.removeprefix("git version ").strip())]
    try:
        repo = open_repository(cwd)
    except NotARepository:
        fix = "git init here if this folder is a project, or cd into the repository"
        detail = f"{cwd} is not in a git repository; Kestrel treats this folder as the project"
        checks.append(DoctorCheck("repository", "warn", detail, fix))
    except UnsafeRepository as exc:
        checks.append(DoctorCheck("repository", "fail", str(exc), "fix the repository's layout"))
    except GitUnavailable as exc:
        checks.append(DoctorCheck("repository", "warn", f"cannot check {cwd}: {exc}"))
    except OSError as exc:
        reason = exc.strerror or "unknown error"
        checks.append(DoctorCheck("repository", "warn", f"cannot check {cwd}: {reason}"))
    else:
        checks.append(DoctorCheck("repository", "ok", f"{repo.work_tree}"))
    return checks


def _tool_version(argv: list[str]) -> tuple[bool, str]:
    """Whether the program runs, and the first line it prints."""
    if shutil.which(argv[0]) is None:
        return False, ""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False, ""
    return done.returncode == 0, (done.stdout.strip().splitlines() or [""])[0]


def data_checks(data: Path) -> list[DoctorCheck]:
    """Whether Kestrel can write its data directory, and how much room is left there."""
    existing = _nearest_existing(data)
    if not existing.is_dir():
        where = "" if existing == data else f"{existing} is "
        problem = f"{where}a file, not a folder"
        state = ""
    elif existing == data:
        problem = _cannot_write_in(data)
        state = "writable"
    else:
        problem = "" if os.access(existing, os.W_OK | os.X_OK) else f"{existing} is not writable"
        state = "not there yet; it will be created"
    if problem:
        fix = f"make {data} a writable folder, or choose another with KESTREL_DATA_DIR"
        checks = [DoctorCheck("data directory", "fail", f"{data}: {problem}", fix)]
    else:
        checks = [DoctorCheck("data directory", "ok", f"{data}: {state}")]
    try:
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        reason = exc.strerror or "unknown error"
        return [*checks, DoctorCheck("disk", "warn", f"cannot tell free space: {reason}")]
    detail = f"{_size(free)} free under {existing}"
    if free < LOW_DISK_BYTES:
        fix = "free some space: overlays and indexes need room"
        return [*checks, DoctorCheck("disk", "warn", detail + " (below 1 GiB)", fix)]
    return [*checks, DoctorCheck("disk", "ok", detail)]


def _nearest_existing(path: Path) -> Path:
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return Path(path.anchor or "/")


def _cannot_write_in(folder: Path) -> str:
    """'' when a file can be created in `folder`, else why not."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".kestrel-doctor-"):
            return ""
    except OSError as exc:
        return f"cannot write there ({exc.strerror or 'unknown error'})"


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def ripgrep_check() -> DoctorCheck:
    """Whether ripgrep, which the search tools run, can be found."""
    try:
        rg = find_rg()
    except ToolFailed:
        fix = "reinstall Kestrel (its ripgrep package provides rg), or apt-get install ripgrep"
        return DoctorCheck("ripgrep", "fail", "rg is not installed", fix)
    found, version = _tool_version([rg, "--version"])
    if not found:
        return DoctorCheck("ripgrep", "fail", f"{rg} does not run", "reinstall ripgrep")
    return DoctorCheck("ripgrep", "ok", f"{version or 'rg'} ({rg})")


def index_check(roots: list[Path], cache_dir: Path, now: float) -> DoctorCheck:
    """Whether the repository has an index yet, and how many files changed since it was made."""
    found = [(root, index_path_for(root, cache_dir)) for root in roots]
    existing = [(root, path) for root, path in found if path.is_file()]
    if not existing:
        detail = f"{roots[0]}: not indexed yet; the first session builds it"
        return DoctorCheck("index", "info", detail, fix="kestrel index (builds it now)")
    root, path = existing[0]
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1)) as db:
            version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            rows = db.execute("SELECT path, size, mtime_ns FROM files").fetchall()
    except sqlite3.Error as exc:
        return DoctorCheck("index", "warn", f"{path}: cannot be read ({exc})", "kestrel index")
    if version is not None and version[0] in MIGRATED_SCHEMAS:
        detail = f"{root}: made by an earlier Kestrel version; the next session updates it in place"
        return DoctorCheck("index", "info", detail, fix="kestrel index (updates it now)")
    if version is None or version[0] != SCHEMA_VERSION:
        detail = f"{root}: made by another Kestrel version; the next session rebuilds it"
        return DoctorCheck("index", "info", detail, fix="kestrel index (rebuilds it now)")
    changed = sum(not _unchanged(root / name, size, mtime) for name, size, mtime in rows)
    updated = max(_mtime(path), _mtime(path.with_name(path.name + "-wal")))
    files = f"{len(rows):,} file{'s' * (len(rows) != 1)}"
    detail = f"{root}: {files}, updated {_ago(now - updated)}"
    if not changed:
        return DoctorCheck("index", "ok", detail + "; up to date")
    detail += f"; {changed:,} changed or removed since (sessions refresh it as they start)"
    return DoctorCheck("index", "info", detail, fix="kestrel index (refreshes it now)")


def _unchanged(path: Path, size: int, mtime_ns: int) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_size == size and info.st_mtime_ns == mtime_ns


def _mtime(path: Path) -> float:
    """When `path` last changed; 0 for a missing or empty file (reading a database in WAL mode
    leaves an empty log behind, which is no change)."""
    try:
        info = path.stat()
    except OSError:
        return 0.0
    return info.st_mtime if info.st_size else 0.0


def _ago(seconds: float) -> str:
    if seconds < 90:
        return "just now"
    for unit, length in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= length * (1.5 if unit == "minute" else 1):
            count = round(seconds / length)
            return f"{count} {unit}{'s' * (count != 1)} ago"
    return "just now"
