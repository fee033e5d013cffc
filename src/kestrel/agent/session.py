"""Starting a session, and reconciling an interrupted one with the files before it resumes."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kestrel.agent.ports import Checkpointer
from kestrel.agent.rollback import (
    KnowsHead,
    ResumePolicy,
    Settled,
    interrupted,
    is_idempotent,
    logged_kind,
    roll_back_command,
    roll_back_edit,
    rollback_point,
)
from kestrel.agent.state import SessionState
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import (
    CheckpointCreated,
    Event,
    FileChanged,
    Limits,
    PermissionMode,
    Record,
    Rewound,
    SessionResumed,
    SessionStarted,
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
    workspace: Literal["overlay", "direct", ""] = "",
    session_id: str | None = None,
) -> str:
    """Log the session's first events (its id first of all, then the task) and return its id;
    `session_id`: an id the caller chose with `new_session_id` (a fresh one when None)."""
    session_id = session_id or new_session_id()
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
            workspace=workspace,
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
    """Mark the session resumed and settle each tool call that started but has no result,
    without checkpoints to roll back to (see `resume` for the whole guarantee).

    Reads are left pending, to be run again. An edit none of whose announced writes landed is
    run again; one whose writes all landed is reported done; one caught between its writes is
    finished from the content it kept. A command is reported as interrupted with its effects
    unknown, as is an edit whose files something else changed.
    """
    settled = _plan(state, kind_of, root, artifacts_dir, None, ResumePolicy())
    return _log(state, emit, settled)


async def resume(
    state: SessionState,
    emit: Callable[[Event], Record],
    kind_of: Callable[[str], ToolKind | None],
    env: ResumeEnvironment,
) -> SessionResumed:
    """Mark the session resumed and settle every call a crash cut short, each all or nothing.

    As `reconcile`, except that a command that started and has no result is rolled back: the
    files are restored to the checkpoint taken just before it, and only then is anything
    logged, so a process killed in between rolls back again. The model is told so (and what
    the command could reach outside the workspace); with `policy.rerun_idempotent`, a call that
    only checks is run again instead. An edit caught between its writes that cannot be
    finished is rolled back the same way.
    """
    point = rollback_point(state) if env.checkpointer is not None else None
    settled = _plan(state, kind_of, env.root, env.artifacts_dir, point, env.policy)
    targets = list(dict.fromkeys(s.restore for s in settled.values() if s.restore is not None))
    kept = None
    if env.checkpointer is not None and targets:
        # The files as the crash left them (yours too, in direct mode), before they go.
        kept = await env.checkpointer.snapshot("before the rollback")
        for target in targets:
            await env.checkpointer.restore(target)
    resumed = _log(state, emit, settled)
    if kept is not None:
        emit(CheckpointCreated(checkpoint_id=kept.checkpoint_id, label=KEPT_LABEL))
    await catch_up(state, emit, env.checkpointer)
    return resumed


KEPT_LABEL = "the files as the crash left them, before the rollback"


async def catch_up(
    state: SessionState,
    emit: Callable[[Event], Record],
    checkpointer: Checkpointer | None,
    label: str = "the files as the resume leaves them",
) -> None:
    """Log the newest recorded checkpoint when the log does not end with it (a process killed
    between recording and logging one, or a rollback's own record), so that the log's newest
    checkpoint, each later call's rollback point, holds the files as they are."""
    if not isinstance(checkpointer, KnowsHead):
        return
    head = await checkpointer.head_id()
    if head is not None and head != state.marks.files:
        emit(CheckpointCreated(checkpoint_id=head, label=label))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeEnvironment:
    """Where a resume settles interrupted calls: the files, kept writes and checkpoints."""

    root: Path
    artifacts_dir: Path | None = None
    checkpointer: Checkpointer | None = None
    policy: ResumePolicy = field(default_factory=ResumePolicy)


def _plan(
    state: SessionState,
    kind_of: Callable[[str], ToolKind | None],
    root: Path | None,
    artifacts_dir: Path | None,
    point: str | None,
    policy: ResumePolicy,
) -> dict[str, Settled]:
    where = root or Path(state.cwd)  # The session's view of the files: an overlay may move it.
    return {
        c.id: _settle(state, c, logged_kind(state, c, kind_of), where, artifacts_dir, point, policy)
        for c in state.unfinished
    }


def _log(
    state: SessionState, emit: Callable[[Event], Record], settled: dict[str, Settled]
) -> SessionResumed:
    results = [s.result for s in settled.values() if s.result is not None]
    interrupted = tuple(result.call_id for result in results)
    resumed = SessionResumed(from_seq=state.last_seq, interrupted_calls=interrupted)
    emit(resumed)
    for result in results:
        emit(result)
    return resumed


def _settle(
    state: SessionState,
    call: ToolCall,
    kind: ToolKind | None,
    root: Path,
    artifacts_dir: Path | None,
    point: str | None,
    policy: ResumePolicy,
) -> Settled:
    """What to do with an unfinished call: log a result (after a restore), or run it again."""
    decided = state.decisions.get(call.id)
    if kind == "read" or kind is None or decided is None or decided.decision == "deny":
        return Settled(None)  # Nothing ran: reads are safe to repeat, the rest never started.
    if call.id not in state.started:
        return Settled(None)
    if kind == "edit":
        return _settle_edit(call, state.writes.get(call.id, []), root, artifacts_dir, point)
    return roll_back_command(call, point, policy, idempotent=is_idempotent(call, kind))


def _settle_edit(
    call: ToolCall,
    writes: list[FileChanged],
    root: Path,
    artifacts_dir: Path | None,
    point: str | None,
) -> Settled:
    """An edit cut short: run again when none of its writes landed, done when all did,
    finished from its kept content when caught between two, else rolled back."""
    for write in writes:
        remove_leftover_temps(_resolve(root, write.path))
    current = [file_hash(_resolve(root, w.path)) for w in writes]
    if all(h == w.before_hash for h, w in zip(current, writes, strict=True)):
        return Settled(None)
    paths = ", ".join(w.path for w in writes)
    if all(h == w.after_hash for h, w in zip(current, writes, strict=True)):
        return Settled(
            interrupted(
                call,
                f"Done: the change to {paths} was written before the session was interrupted.",
                error=False,
            )
        )
    if artifacts_dir is not None and _finish_writes(root, writes, current, artifacts_dir):
        return Settled(
            interrupted(
                call,
                f"Done: the change to {paths} was cut short by an interruption and has been "
                "finished as announced.",
                error=False,
            )
        )
    ours = all(h in (w.before_hash, w.after_hash) for h, w in zip(current, writes, strict=True))
    if point is not None and ours:
        return roll_back_edit(call, point, paths)
    return Settled(
        interrupted(
            call,
            "[kestrel] Interrupted while writing files; some writes may not "
            "have landed. Read the files before editing them again.",
        )
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
