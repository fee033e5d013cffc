"""A small session made in this process: a log with a priced model call, a worktree with two
real checkpoints, an overlay layer holding a change (a file, a whiteout, an opaque folder, a
link) and an artifact; what the archive must carry and bring back."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from kestrel.protocol.events import (
    ChangesApplied,
    CheckpointCreated,
    ModelCompleted,
    SessionFinished,
    SessionStarted,
    UserMessage,
)
from kestrel.protocol.messages import AssistantTurn, Usage
from kestrel.store.base import EventStore
from kestrel.workspace.checkpoints import CheckpointStore

COST = 0.25


def make_session(store: EventStore, data: Path, worktree: Path, *, finish: bool = True) -> str:
    """Log and lay out one session in `data` that worked on `worktree`; its id."""
    sid = secrets.token_hex(10)
    worktree.mkdir(parents=True, exist_ok=True)
    (worktree / "a.txt").write_text("one\n")
    store.append(sid, SessionStarted(session_id=sid, task="tidy up", cwd=str(worktree), model="m"))
    store.append(sid, UserMessage(text="tidy up"))
    usage = Usage(model="m", input_tokens=100, output_tokens=20, cost_usd=COST)
    store.append(
        sid, ModelCompleted(request_id="r1", message=AssistantTurn(text="ok"), usage=usage)
    )
    checkpoints = checkpoints_of(data, worktree, sid)
    for label, text in (("baseline", None), ("after edit", "two\n")):
        if text is not None:
            (worktree / "a.txt").write_text(text)
        made = checkpoints.snapshot(label)
        assert made is not None
        store.append(sid, CheckpointCreated(checkpoint_id=made.id, label=label, tree=made.tree))
    # Handed over, then a new overlay opened on the checkout, as after an apply and a resume.
    store.append(sid, ChangesApplied(outcome="applied", checkpoint_id=made.id))
    store.append(
        sid, CheckpointCreated(checkpoint_id=made.id, label="a new overlay", baseline=True)
    )
    _layer(data / "overlays" / sid)
    artifacts = data / "artifacts" / sid / "outputs"
    artifacts.mkdir(parents=True)
    (artifacts / "call-1.txt").write_text("a long tool output\n" * 50)
    if finish:
        store.append(sid, SessionFinished(reason="done", final_text="tidied"))
    return sid


def checkpoints_of(data: Path, worktree: Path, sid: str) -> CheckpointStore:
    """The session's checkpoint store, where Kestrel keeps it for `worktree`."""
    key = hashlib.sha256(str(worktree.resolve()).encode()).hexdigest()[:16]
    return CheckpointStore(worktree, data / "checkpoints" / key, session=sid, seed=False)


def _layer(layer: Path) -> None:
    upper = layer / "upper"
    (upper / "src").mkdir(parents=True)
    (upper / "src" / "new.py").write_text("print('new')\n")
    (upper / "run.sh").write_text("#!/bin/sh\n")
    (upper / "run.sh").chmod(0o755)
    os.mknod(upper / "gone.txt", 0o600 | 0o020000, os.makedev(0, 0))  # a whiteout
    (upper / "remade").mkdir()
    os.setxattr(upper / "remade", "user.overlay.opaque", b"y")
    (upper / "link").symlink_to("/etc/hostname")
    (layer / "work" / "work").mkdir(parents=True)  # the kernel's scratch: left out
    (layer / "lower").mkdir()
