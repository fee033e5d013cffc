"""Cold storage: how long archiving and restoring sessions takes, and how big the objects are.

Makes `--sessions` small sessions in a fresh data directory (each: a log of about 30 events with
three priced model calls and tool outputs, a worktree of 20 files with three real checkpoints
in a shared shadow repository, an overlay layer holding a change, and an artifact), then for
each place (a local folder; an S3-compatible server on loopback, moto's, when it is installed):
archives them all through `Archiver` (pack, upload, read back, tombstone, local copies
removed), then restores one by reading it, as opening it does, then the rest.

    python bench/archive.py [--sessions 100] [--no-s3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kestrel.archive import Archived, Archiver, Blobs, Restorer
from kestrel.archive.blobs import default_url, parse
from kestrel.protocol.events import (
    ChangesApplied,
    CheckpointCreated,
    Event,
    ModelCompleted,
    SessionFinished,
    SessionStarted,
    ToolFinished,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, Usage
from kestrel.store.sqlite import SQLiteStore
from kestrel.workspace.checkpoints import CheckpointStore

BUCKET = "kestrel-bench"


def make_sessions(data: Path, count: int) -> list[str]:
    """`count` sessions on one worktree, in the store and data directory `data`."""
    worktree = data.parent / "project"
    for n in range(20):
        (worktree / "src").mkdir(parents=True, exist_ok=True)
        (worktree / "src" / f"m{n}.py").write_text(f"VALUE = {n}\n" + "# filler\n" * 40)
    key = hashlib.sha256(str(worktree.resolve()).encode()).hexdigest()[:16]
    ids = []
    with SQLiteStore(data / "sessions.db") as store:
        for _ in range(count):
            sid = secrets.token_hex(10)
            checkpoints = CheckpointStore(worktree, data / "checkpoints" / key, session=sid)
            for event in _events(sid, worktree, checkpoints):
                store.append(sid, event)
            _layer(data / "overlays" / sid, data / "artifacts" / sid)
            ids.append(sid)
    return ids


def _events(sid: str, worktree: Path, checkpoints: CheckpointStore) -> Iterator[Event]:
    yield SessionStarted(session_id=sid, task="tidy the modules", cwd=str(worktree), model="m")
    yield UserMessage(text="tidy the modules")
    last = None
    for step in range(3):
        usage = Usage(model="m", input_tokens=2000, output_tokens=150, cost_usd=0.01)
        reply = AssistantTurn(text=f"Step {step}: editing m{step}.py. " * 4)
        yield ModelCompleted(request_id=f"r{step}", message=reply, usage=usage)
        for n in range(6):
            yield ToolFinished(call_id=f"c{step}-{n}", name="bash", content="output\n" * 40)
        if step:
            path = worktree / "src" / f"m{step}.py"
            path.write_text(path.read_text() + f"# step {step} of {sid}\n")
        last = checkpoints.snapshot(f"step {step}")
        assert last is not None
        yield CheckpointCreated(checkpoint_id=last.id, label=f"step {step}", tree=last.tree)
    assert last is not None
    yield ChangesApplied(outcome="applied", checkpoint_id=last.id)
    yield SessionFinished(reason="done", final_text="tidied")


def _layer(layer: Path, artifacts: Path) -> None:
    (layer / "upper" / "src").mkdir(parents=True)
    (layer / "upper" / "src" / "m1.py").write_text("VALUE = 'changed'\n" + "# filler\n" * 40)
    (layer / "upper" / "NOTES.md").write_text("What was tidied, and why.\n" * 10)
    (artifacts / "outputs").mkdir(parents=True)
    (artifacts / "outputs" / "c0-0.txt").write_text("a long tool output line\n" * 400)


def measure(data: Path, ids: list[str], url: str, env: dict[str, str]) -> dict[str, float]:
    """Archive every session, restore one as opening does, then the rest; the figures."""
    os.environ.update(env)
    figures: dict[str, float] = {}
    with SQLiteStore(data / "sessions.db", restorer=Restorer(data)) as store:
        archiver = Archiver(store, data, Blobs(parse(url)))
        summaries = [s for s in store.sessions() if s.session_id in set(ids)]
        local = _size(data)
        started = time.perf_counter()
        done = [archiver.archive(s) for s in summaries]
        figures["archive_s"] = time.perf_counter() - started
        sizes = [d.size for d in done if isinstance(d, Archived)]
        assert len(sizes) == len(ids), [d for d in done if not isinstance(d, Archived)]
        figures["objects_bytes"] = float(sum(sizes))
        figures["object_mean_bytes"] = sum(sizes) / len(sizes)
        figures["local_freed_bytes"] = float(local - _size(data))
        started = time.perf_counter()
        store.read(ids[0])
        figures["restore_one_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for sid in ids[1:]:
            store.read(sid)
        figures["restore_rest_s"] = time.perf_counter() - started
    return figures


def _size(data: Path) -> int:
    """Bytes of the sessions' folders and checkpoints (the SQLite file keeps its pages for
    reuse: it shrinks only by `VACUUM`)."""
    parts = [data / "overlays", data / "artifacts", data / "checkpoints"]
    return sum(
        p.lstat().st_size
        for part in parts
        if part.exists()
        for p in part.rglob("*")
        if p.is_file() and not p.is_symlink()
    )


@contextmanager
def s3_server() -> Iterator[tuple[str, dict[str, str]] | None]:
    """An S3-compatible server (moto's) on a free loopback port with a bucket; None without moto."""
    try:
        import boto3
    except ImportError:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    try:
        _wait(port)
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}/sessions", env
    finally:
        server.terminate()
        server.wait(timeout=10)


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the S3 server did not start")


def report(place: str, count: int, figures: dict[str, float]) -> None:
    """One table row of figures."""
    f = figures
    print(
        f"| {place} | {count} | {f['archive_s']:.2f} s ({f['archive_s'] / count * 1000:.0f} ms "
        f"each) | {f['objects_bytes'] / 1024:.0f} KiB ({f['object_mean_bytes'] / 1024:.1f} KiB "
        f"each) | {f['local_freed_bytes'] / 1024:.0f} KiB | {f['restore_one_s'] * 1000:.0f} ms "
        f"| {f['restore_rest_s']:.2f} s |"
    )


def main() -> None:
    """Parse the arguments, run each place in a data directory of its own, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--no-s3", action="store_true", help="Only the local folder.")
    args = parser.parse_args()
    print(
        "| place | sessions | archive all | objects | folders and checkpoints freed"
        " | restore one on open | restore the rest |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, s3_server() as s3:
        places = [("local folder", None)]
        if s3 is not None and not args.no_s3:
            places.append(("S3 (moto, loopback)", s3))
        for name, where in places:
            data = Path(tmp) / name.split()[0] / "data"
            ids = make_sessions(data, args.sessions)
            url, env = where if where is not None else (default_url(data), {})
            report(name, args.sessions, measure(data, ids, url, env))
            shutil.rmtree(data.parent)


if __name__ == "__main__":
    main()
