"""The composition root's half for workspaces: open a session's overlay, hand its change over.

A session in `overlay` mode works on an overlay of the checkout (kernel overlayfs in a private
namespace, or a copy) and leaves the checkout untouched. When a run ends, its change is recorded
as a final checkpoint and announced as `changes_ready`; it is then applied through the journal
(`changes_applied`) when the session may edit on its own, or left for `kestrel diff` and
`kestrel apply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kestrel.agent.rollback import cut_short
from kestrel.agent.state import replay
from kestrel.agent.task_tool import TaskTool
from kestrel.app import checkpointer_for, data_dir
from kestrel.protocol.codec import event_to_dict
from kestrel.protocol.errors import ConfigError, KestrelError
from kestrel.protocol.events import (
    ChangesApplied,
    ChangesReady,
    CheckpointCreated,
    ErrorOccurred,
    Event,
    ToolKind,
)
from kestrel.settings import Settings
from kestrel.store.base import EventStore
from kestrel.tools.code import FindReferences, FindSymbol, Outline, RepoMapTool, SearchCode
from kestrel.tools.plan import ProposePlan
from kestrel.tools.registry import default_tools
from kestrel.tools.todo import Todo
from kestrel.tools.verify import Verify
from kestrel.workspace.apply import ApplyError, ApplyResult, apply_changes, recover
from kestrel.workspace.apply_lock import (
    ApplyBusy,
    Marker,
    remove_marker,
    session_lock,
    write_marker,
)
from kestrel.workspace.checkpoints import CheckpointStore
from kestrel.workspace.handoff import (
    Pending,
    applied_event,
    discarded_event,
    pending_change,
    ready_event,
    security_refused,
)
from kestrel.workspace.overlay import View, discard_layer, layer_for, open_view, prepare_namespace
from kestrel.workspace.verify.security import finding_lines, gate_change_set


def prepare(settings: Settings) -> None:
    """Enter the private namespace early, before anything starts a thread; no-op if direct."""
    if settings.workspace == "overlay":
        prepare_namespace()


def open_workspace(settings: Settings, session_id: str, checkout: Path) -> View | None:
    """The session's overlay of `checkout` (None in direct mode), after finishing any apply
    that an earlier process left half done."""
    if settings.workspace != "overlay":
        return None
    if shutil.which("git") is None:
        # The change is read from checkpoints, which need git: without it the session could
        # never hand its work over, so it works on the checkout itself.
        return None
    view = open_view(checkout, layer_for(data_dir(settings), session_id))
    # A journal in the layer names the checkout as the apply reached it (through the overlay's
    # bind of the real checkout, in the kernel kind), so it is recovered through the same path.
    for journal in dict.fromkeys((view.journal, view.layer.journal)):
        recover(view.real, journal)
    return view


def checkpoints_of(settings: Settings, view: View, session_id: str) -> CheckpointStore:
    """The checkpoint store that records the view's files."""
    return checkpointer_for(settings, view.root, session_id).store


@dataclass(frozen=True, slots=True)
class Handoff:
    """What became of a run's change: the review, and the apply when there was one."""

    ready: ChangesReady | None
    applied: ChangesApplied | None


Emit = Callable[[Event], object]
"""Appends an event to the session's log (the loop's `emit`, or the store's `append`)."""
Decide = Callable[[ChangesReady], Awaitable[bool]]
"""Says whether a ready change should be applied now."""


def _events(store: EventStore, session_id: str) -> list[Event]:
    return [record.event for record in store.read(session_id)]


async def record_final(emit: Emit, checkpoints: CheckpointStore) -> None:
    """Record what commands left behind since the last checkpoint (a cut-short run, say)."""
    if checkpoints.head_id() is None:
        return  # Nothing ever changed: no baseline, no change.
    checkpoint = await asyncio.to_thread(checkpoints.snapshot, "end of run")
    if checkpoint is not None:
        emit(CheckpointCreated(checkpoint_id=checkpoint.id, label=checkpoint.label))


async def hand_off(
    store: EventStore,
    session_id: str,
    settings: Settings,
    view: View,
    *,
    emit: Emit,
    decide: Decide,
    accept_security_findings: bool = False,
) -> Handoff:
    """Announce the run's change, and apply it to the checkout when `decide` says so.

    The security gate checks the final change first: one that adds a secret or a
    high-severity finding is refused (`changes_applied`, outcome `refused`) unless the person
    accepted its findings, which the applied event then records. After a successful apply the
    overlay is closed and its layer deleted, so a later resume starts from the checkout as it
    now is.
    """
    checkpoints = checkpoints_of(settings, view, session_id)
    try:
        await record_final(emit, checkpoints)
        pending = await asyncio.to_thread(pending_change, checkpoints, _events(store, session_id))
    except KestrelError as exc:
        emit(ErrorOccurred(error_kind=type(exc).__name__, message=_stuck(exc, view)))
        return Handoff(None, None)
    if pending is None:
        return Handoff(None, None)
    gate = await asyncio.to_thread(gate_change_set, pending.changes)
    ready = ready_event(pending, gate)
    emit(ready)
    if not await decide(ready):
        return Handoff(ready, None)
    if gate.blocking and not accept_security_findings:
        refused = security_refused(gate, pending.head, session_id)
        emit(refused)
        return Handoff(ready, refused)
    accepted = finding_lines(gate.blocking)
    data = data_dir(settings)
    try:
        with session_lock(data, session_id):  # held already by `kestrel apply`: taken again
            applied = await asyncio.to_thread(
                _apply_marked, data, session_id, pending, view, accepted
            )
            emit(applied)
            if applied.outcome == "applied":
                _drop(view)
            remove_marker(data, session_id)  # logged and cleaned up: nothing left to repair
    except ApplyBusy as exc:  # `kestrel apply` of this session from elsewhere, right now
        emit(ErrorOccurred(error_kind=type(exc).__name__, message=str(exc)))
        return Handoff(ready, None)
    return Handoff(ready, applied)


TEST_HOOK = "KESTREL_TEST_APPLY_HOOK"
"""For tests and benchmarks only: `kill:STEP` makes the apply SIGKILL its own process just before
the journal step STEP ("journaled", "op:N", "done", ...), `hold:STEP@PATH` makes it create PATH
there and wait while PATH exists (at most a minute)."""


def _test_hook(step: str) -> None:
    action, _, rest = os.environ.get(TEST_HOOK, "").partition(":")
    if action == "kill" and rest == step:
        os.kill(os.getpid(), signal.SIGKILL)
    where, _, path = rest.partition("@")
    if action == "hold" and where == step and path:
        Path(path).touch()
        deadline = time.monotonic() + 60
        while Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)


def _apply_marked(
    data: Path, session_id: str, pending: Pending, view: View, accepted: tuple[str, ...]
) -> ChangesApplied:
    """Apply the change, with a marker in the data directory from just before the journal
    commits until the caller removes it, which says what to log if this process dies.
    `accepted` names the security findings the person accepted, for the applied event."""
    journal, real = view.journal.resolve(), view.real.resolve()
    seen, named = journal, None
    if real != view.checkout and journal.is_relative_to(real):
        seen = view.checkout / journal.relative_to(real)  # the path outside the namespace
    elif real != view.checkout:
        named = str(real)  # a journal in the layer names the checkout as the apply reached it
    base = Marker(
        session_id=session_id,
        checkout=str(view.checkout),
        journal=str(seen),
        named=named,
        phase="applying",
        event={},
    )
    marked: list[Marker] = []

    def on_commit(result: ApplyResult) -> None:
        event = applied_event(result, pending.head, accepted)
        marked.append(dataclasses.replace(base, event=event_to_dict(event)))
        write_marker(data, marked[-1])

    def hook(step: str) -> None:
        _test_hook(step)
        if step == "done" and marked:
            write_marker(data, dataclasses.replace(marked[-1], phase="performed"))

    try:
        result = apply_changes(
            view.real, pending.changes, view.journal, fault=hook, on_commit=on_commit
        )
    except ApplyError:
        if marked:
            remove_marker(data, session_id)  # undone: the checkout is as it was
        raise
    return applied_event(result, pending.head, accepted)


@contextlib.contextmanager
def apply_lock(settings: Settings, session_id: str) -> Iterator[bool]:
    """Hold the session's apply lock (`kestrel apply` and `discard` take it before opening the
    overlay); yields whether another process held it first. Raises `ApplyBusy` after a wait."""
    with session_lock(data_dir(settings), session_id) as waited:
        yield waited


def already_applied(store: EventStore, session_id: str, settings: Settings) -> bool:
    """Whether the session's last change was applied and nothing has been left since."""
    if layer_for(data_dir(settings), session_id).exists():
        return False
    for event in reversed(_events(store, session_id)):
        if isinstance(event, ChangesApplied):
            return event.outcome == "applied"
        if isinstance(event, CheckpointCreated) and event.baseline:
            return False
    return False


def _stuck(exc: KestrelError, view: View) -> str:
    where = view.layer.upper if view.kind == "kernel" else view.layer.tree
    return f"the session's change could not be read ({exc}); its files are still in {where}"


async def mark_baseline(emit: Emit, settings: Settings, view: View, session_id: str) -> None:
    """When a session that already has checkpoints opens a new overlay (its earlier change was
    applied or discarded), record the checkout as the base its next change counts from."""
    if not view.fresh:
        return
    checkpoints = checkpoints_of(settings, view, session_id)
    if checkpoints.head_id() is None:
        return  # The first change's own baseline comes before it, as usual.
    checkpoint = await asyncio.to_thread(checkpoints.snapshot, "a new overlay of the checkout")
    head = checkpoint.id if checkpoint is not None else checkpoints.head_id()
    assert head is not None
    emit(
        CheckpointCreated(checkpoint_id=head, label="a new overlay of the checkout", baseline=True)
    )


def _drop(view: View) -> None:
    view.close()
    discard_layer(view.layer)


def apply_now(
    store: EventStore,
    session_id: str,
    settings: Settings,
    view: View,
    *,
    accept_security_findings: bool = False,
) -> Handoff:
    """`kestrel apply`: apply the pending change of a session that is not running; with
    `accept_security_findings`, even one the security gate blocks."""
    if view.fresh:  # Nothing was left in an overlay.
        _drop(view)
        return Handoff(None, None)

    async def yes(_: ChangesReady) -> bool:
        return True

    def emit(event: Event) -> None:
        store.append(session_id, event)

    handing = hand_off(
        store,
        session_id,
        settings,
        view,
        emit=emit,
        decide=yes,
        accept_security_findings=accept_security_findings,
    )
    return asyncio.run(handing)


def discard(store: EventStore, session_id: str, settings: Settings, view: View) -> Pending | None:
    """`kestrel discard`: bring the view back to the change's base and drop the layer."""
    checkpoints = checkpoints_of(settings, view, session_id)
    pending = None if view.fresh else pending_change(checkpoints, _events(store, session_id))
    if pending is not None:
        base = pending.base or checkpoints.list()[0].id
        restored = checkpoints.restore(base, label="discarded")
        head = restored.id if restored is not None else base
        store.append(session_id, CheckpointCreated(checkpoint_id=head, label="discarded"))
        store.append(session_id, discarded_event(head))
    _drop(view)
    return pending


def tool_kinds() -> dict[str, ToolKind]:
    """The kind of each tool a session built by `app.build_loop` may call, by name."""
    classes: list[Any] = [
        *(type(tool) for tool in default_tools()),
        Verify,
        SearchCode,
        FindSymbol,
        FindReferences,
        Outline,
        RepoMapTool,
        Todo,
        ProposePlan,
        TaskTool,
    ]
    return {tool.name: tool.kind for tool in classes}


def refuse_cut_short(store: EventStore, session_id: str, kinds: dict[str, ToolKind]) -> None:
    """Refuse to show or apply the change of a session a crash stopped inside a call that may
    change files: its files may hold part of that call until a resume rolls it back.
    `kinds` names each tool's kind; a tool it does not name counts as changing files."""
    call = cut_short(replay(store.read(session_id)), kinds.get)
    if call is not None:
        raise ConfigError(
            f"session {session_id} stopped in the middle of its {call.name} call, so its files "
            f"may hold part of it; `kestrel resume {session_id}` rolls that call back first, "
            "then diff or apply the change"
        )
