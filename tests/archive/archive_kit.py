"""Sessions to archive, made cheaply, and what to compare before and after.

One real session is run through the command line; the others are copies of it: its event rows
appended again under a new id (so the log numbers and dates them itself), its overlay layer and
artifacts copied, and its checkpoint ref and index duplicated in the shadow repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

from cli_kit import Env

from kestrel.protocol.codec import record_from_json
from kestrel.store.tombstones import ArchiveLog

REFS = "refs/kestrel/checkpoints"


def data_of(env: Env) -> Path:
    """The data directory the environment's commands use."""
    return Path(env.vars["KESTREL_DATA_DIR"])


def open_log(env: Env) -> ArchiveLog:
    """The environment's event log, opened in this process (no restorer: tests look at it)."""
    if url := env.vars.get("KESTREL_STORE_URL"):
        from kestrel.store.postgres import PostgresStore

        return PostgresStore(url)
    from kestrel.store.sqlite import SQLiteStore

    return SQLiteStore(data_of(env) / "sessions.db")


def run_session(env: Env) -> str:
    """Run the scripted fix task to its end (its change applied); the session's id."""
    done = env.run(*env.headless("--output-format", "json"))
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session_id"])


def clone(store: ArchiveLog, data: Path, source: str) -> str:
    """A copy of session `source` under a new id: rows, layer, artifacts, checkpoints."""
    new = secrets.token_hex(10)
    for row in store.rows(source):
        store.append(new, record_from_json(row.json.replace(source, new)).event)
    layer = data / "overlays" / source
    for part in ("upper", "tree", "journal"):
        if (layer / part).exists():
            _copy(layer / part, data / "overlays" / new / part)
    if (data / "artifacts" / source).exists():
        _copy(data / "artifacts" / source, data / "artifacts" / new)
    for repo in sorted((data / "checkpoints").iterdir()):
        head = git(repo, "rev-parse", "--verify", "--quiet", f"{REFS}/{source}", check=False)
        if head:
            git(repo, "update-ref", f"{REFS}/{new}", head)
            index = repo / "kestrel-index" / source
            if index.exists():
                shutil.copyfile(index, repo / "kestrel-index" / new)
    return new


def _copy(source: Path, target: Path) -> None:
    """Copy a folder whole, whiteouts (character devices) included."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run git on a shadow repository; its output, stripped."""
    env = {"PATH": os.environ["PATH"], "GIT_DIR": str(repo), "GIT_CONFIG_GLOBAL": "/dev/null"}
    done = subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=check)
    return done.stdout.strip()


def local_copy(data: Path, session_id: str) -> dict[str, str]:
    """What the data directory holds of a session: each file's kind, mode and content, its
    checkpoint refs and indexes."""
    seen: dict[str, str] = {}
    for top in (data / "overlays" / session_id, data / "artifacts" / session_id):
        for path in sorted(top.rglob("*")) if top.exists() else ():
            rel = path.relative_to(data).as_posix()
            if rel.startswith(f"overlays/{session_id}/work") or "/lower" in rel:
                continue
            seen[rel] = _describe(path)
    for repo in sorted((data / "checkpoints").iterdir()) if (data / "checkpoints").exists() else ():
        head = git(repo, "rev-parse", "--verify", "--quiet", f"{REFS}/{session_id}", check=False)
        if head:
            seen[f"{repo.name}:ref"] = head
            index = repo / "kestrel-index" / session_id
            seen[f"{repo.name}:index"] = _digest(index) if index.exists() else "none"
    return seen


def _describe(path: Path) -> str:
    info = path.lstat()
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return f"link {os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        xattrs = sorted(os.listxattr(path, follow_symlinks=False))
        return f"dir {mode:o} {xattrs}"
    if stat.S_ISCHR(info.st_mode):
        return f"char {os.major(info.st_rdev)},{os.minor(info.st_rdev)}"
    return f"file {mode:o} {_digest(path)}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def views(env: Env, session_id: str) -> dict[str, str]:
    """What a person sees of a session: its diff (asked first), log, checkpoints and listing."""
    seen: dict[str, str] = {}
    for name, args in (
        ("diff", ("diff", session_id)),
        ("export", ("sessions", "export", session_id)),
        ("checkpoints", ("checkpoints", session_id)),
    ):
        done = env.run(*args)
        assert done.returncode == 0, done.stderr
        seen[name] = done.stdout
    seen["listed"] = json.dumps(listed(env)[session_id], sort_keys=True)
    return seen


def listed(env: Env) -> dict[str, dict[str, object]]:
    """Every session `kestrel sessions list --all --json` shows, by id."""
    done = env.run("sessions", "list", "--all", "--json", "--limit", "1000")
    assert done.returncode == 0, done.stderr
    return {row["session_id"]: row for row in json.loads(done.stdout)}


def checkpoint_ids(env: Env, session_id: str) -> list[str]:
    """The session's checkpoint ids (short), oldest first."""
    done = env.run("checkpoints", session_id)
    assert done.returncode == 0, done.stderr
    return [line.split()[0] for line in done.stdout.splitlines() if line and line[0] != " "]
