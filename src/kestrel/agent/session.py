"""Starting a session, and reconciling an interrupted one with the files before it resumes."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from pathlib import Path

from kestrel.agent.ports import Checkpointer
from kestrel.agent.state import SessionState
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    Event,
    FileChanged,
    Limits,
    PermissionMode,
    Record,
    Rewound,
    SessionResumed,
    SessionStarted,
    ToolFinished,
    ToolKind,
    UserMessage,
)
from kestrel.protocol.messages import ToolCall
from kestrel.store.base import EventStore
from kestrel.tools.paths import (
    read_bytes_if_file,
    remove_leftover_temps,
    sha256_hex,
    staged_write,
    write_atomically,
)


class CheckpointNotFound(KestrelError):
    """No checkpoint of the session, or more than one, matches the id given."""


def new_session_id() -> str:
    """A fresh session id; any unique prefix of it works on the command line."""
    return uuid.uuid4().hex[:20]


def start_session(
    store: EventStore,
    *,
    task: str,
    cwd: Path,
    model: str,
    permission_mode: PermissionMode,
    limits: Limits,
    version: str,
) -> str:
    """Log the session's first events (its id first of all, then the task) and return its id."""
    session_id = new_session_id()
    store.append(
        session_id,
        SessionStarted(
            session_id=session_id,
            task=task,
            cwd=str(cwd),
            model=model,
            permission_mode=permission_mode,
            limits=limits,
            kestrel_version=version,
        ),
    )
    store.append(session_id, UserMessage(text=task))
    return session_id


def reconcile(
    state: SessionState,
    emit: Callable[[Event], Record],
    kind_of: Callable[[str], ToolKind | None],
    root: Path | None = None,
    artifacts_dir: Path | None = None,
) -> SessionResumed:
    """Mark the session resumed and settle each tool call that started but has no result.

    Reads are left pending, to be run again. An edit whose announced writes all landed is
    reported done; one whose writes all did not land is run again; one caught halfway, and any
    command, is reported to the model as interrupted, because its effects cannot be known.
    """
    unfinished = state.unfinished
    where = root or Path(state.cwd)  # The session's view of the files: an overlay may move it.
    settled = {c.id: _settle(state, c, kind_of(c.name), where, artifacts_dir) for c in unfinished}
    interrupted = tuple(cid for cid, result in settled.items() if result is not None)
    resumed = SessionResumed(from_seq=state.last_seq, interrupted_calls=interrupted)
    emit(resumed)
    for result in settled.values():
        if result is not None:
            emit(result)
    return resumed


def _settle(
    state: SessionState,
    call: ToolCall,
    kind: ToolKind | None,
    root: Path,
    artifacts_dir: Path | None,
) -> ToolFinished | None:
    """The result to record for an unfinished call, or None to run it again."""
    decided = state.decisions.get(call.id)
    if kind == "read" or kind is None or decided is None or decided.decision == "deny":
        return None  # Nothing ran: reads are safe to repeat, the rest never started.
    if call.id not in state.started:
        return None
    if kind == "edit":
        writes = state.writes.get(call.id, [])
        for write in writes:
            remove_leftover_temps(_resolve(root, write.path))
        current = [file_hash(_resolve(root, w.path)) for w in writes]
        if all(h == w.before_hash for h, w in zip(current, writes, strict=True)):
            return None
        if all(h == w.after_hash for h, w in zip(current, writes, strict=True)):
            paths = ", ".join(w.path for w in writes)
            return _result(
                call,
                f"Done: the change to {paths} was written before the session was interrupted.",
                error=False,
            )
        if artifacts_dir is not None and _finish_writes(root, writes, current, artifacts_dir):
            paths = ", ".join(w.path for w in writes)
            return _result(
                call,
                f"Done: the change to {paths} was cut short by an interruption and has been "
                "finished as announced.",
                error=False,
            )
        return _result(
            call,
            "[kestrel] Interrupted while writing files; some writes may not "
            "have landed. Read the files before editing them again.",
        )
    return _result(
        call,
        "[kestrel] Interrupted: the session stopped while this command was "
        "running, so its effects are unknown. Check the state, and run it "
        "again if it is still needed.",
    )


def _finish_writes(
    root: Path, writes: list[FileChanged], current: list[str | None], artifacts_dir: Path
) -> bool:
    """Finish an edit caught halfway: each write is either landed or not started, and every one
    not started has its announced content kept. False (nothing touched) otherwise."""
    todo: list[tuple[FileChanged, bytes | None]] = []
    for write, now in zip(writes, current, strict=True):
        if now == write.after_hash:
            continue
        if now != write.before_hash:
            return False  # Changed by something else: its state is not the tool's to decide.
        if write.after_hash is None:
            todo.append((write, None))
            continue
        kept = read_bytes_if_file(staged_write(artifacts_dir, write.after_hash))
        if kept is None or sha256_hex(kept) != write.after_hash:
            return False
        todo.append((write, kept))
    for write, data in todo:
        target = _resolve(root, write.path)
        if data is None:
            target.unlink(missing_ok=True)
        else:
            write_atomically(target, data)
    return True


def _result(call: ToolCall, content: str, *, error: bool = True) -> ToolFinished:
    return ToolFinished(
        call_id=call.id, name=call.name, content=content, is_error=error, interrupted=error
    )


def _resolve(root: Path, path: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else root / candidate


def file_hash(path: Path) -> str | None:
    """SHA-256 of the file's bytes, or None when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def find_checkpoint(state: SessionState, id_or_prefix: str) -> str:
    """The one checkpoint of the session whose id starts with the argument."""
    matches = [cid for cid in state.checkpoints if cid.startswith(id_or_prefix)]
    if len(matches) != 1:
        known = ", ".join(cid[:12] for cid in state.checkpoints) or "none yet"
        what = "no" if not matches else "more than one"
        raise CheckpointNotFound(
            f"{what} checkpoint of session {state.session_id} matches {id_or_prefix!r} "
            f"(checkpoints: {known})"
        )
    return matches[0]


async def rewind(
    state: SessionState,
    emit: Callable[[Event], Record],
    checkpointer: Checkpointer,
    id_or_prefix: str,
) -> Rewound:
    """Restore the files of a checkpoint, then log that the conversation goes back there too.

    The files come first: if the process dies in between, running the rewind again is harmless,
    while a logged rewind whose files were never restored would mislead the model.
    """
    checkpoint_id = find_checkpoint(state, id_or_prefix)
    await checkpointer.restore(checkpoint_id)
    rewound = Rewound(checkpoint_id=checkpoint_id, to_seq=state.checkpoints[checkpoint_id].seq)
    emit(rewound)
    return rewound
