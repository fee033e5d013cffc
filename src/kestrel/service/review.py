"""Review a session's change: see it as a diff, apply it to the checkout, or discard it.

Apply and discard open the session's overlay: call them from a process that entered its private
mount namespace while it had a single thread (`app_workspace.prepare`), as the command line does,
or run them as a process of their own (a server's worker does).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kestrel import app, app_share, app_workspace
from kestrel.app_workspace import Handoff
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import Event, SessionStarted
from kestrel.settings import Settings
from kestrel.settings_load import load_settings
from kestrel.store.base import EventStore
from kestrel.workspace.apply import Flag, Refusal, check
from kestrel.workspace.changes import ChangeSet
from kestrel.workspace.handoff import pending_change
from kestrel.workspace.overlay import layer_for
from kestrel.workspace.verify.security import GateReport, gate_change_set


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDir:
    """A session's id, the checkout it works on, and its log's events."""

    session_id: str
    cwd: Path
    events: Sequence[Event]


def session_dir(store: EventStore, raw_id: str) -> SessionDir:
    """The session an id (or prefix) names, with the checkout its log records."""
    session_id = store.resolve(raw_id)
    events = [record.event for record in store.read(session_id)]
    started = events[0] if events else None
    if not isinstance(started, SessionStarted):
        raise ConfigError(f"session {session_id}: its log does not begin with session_started")
    return SessionDir(session_id=session_id, cwd=Path(started.cwd), events=events)


def existing(found: SessionDir) -> Path:
    """The session's checkout, or a `ConfigError` saying it is gone (a demo's, say)."""
    if not found.cwd.is_dir():
        raise ConfigError(
            f"session {found.session_id} worked in {found.cwd}, which no longer exists"
        )
    return found.cwd


def settings_at(cwd: Path) -> Settings:
    """The settings that apply in `cwd` (project, user, environment)."""
    return load_settings(cwd, env=os.environ, flags={}, home=Path.home())


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingDiff:
    """A change waiting for review: what changed, what apply would refuse or flag, the diff."""

    changes: ChangeSet
    refusals: Sequence[Refusal]
    flags: Sequence[Flag]
    diff: str
    security: GateReport = field(default_factory=GateReport)
    """What the security gate finds in the change; `blocking` ones stop its apply."""


def pending_diff(store: EventStore, raw_id: str) -> tuple[str, PendingDiff | None]:
    """The session's id and the change it left waiting (None when there is none)."""
    found = session_dir(store, raw_id)
    sid = found.session_id
    app_workspace.refuse_cut_short(store, sid, app_workspace.tool_kinds())
    settings = settings_at(found.cwd)
    layer = layer_for(app.data_dir(settings), sid)
    root = layer.tree if layer.tree.is_dir() else existing(found)
    wanted = app_share.logged_files(store, sid) if settings.workspace_share_url else None
    if wanted is not None:  # Recorded on another machine, perhaps.
        app_share.bring(settings, root, sid, wanted)
    checkpoints = app.checkpointer_for(settings, root, sid).store
    pending = pending_change(checkpoints, found.events)
    if pending is None:
        return sid, None
    refusals, flags = check(pending.changes)
    base = pending.base or checkpoints.list()[0].id
    text = checkpoints.diff(base, pending.head)
    gate = gate_change_set(pending.changes)
    waiting = PendingDiff(
        changes=pending.changes, refusals=refusals, flags=flags, diff=text, security=gate
    )
    return sid, waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """What `decide_change` did: applied (with its hand-off), discarded, or nothing to do."""

    session_id: str
    outcome: str
    """`applied`, `discarded`, `already applied` or `nothing`."""
    handoff: Handoff | None = None
    discarded: ChangeSet | None = None


def decide_change(
    store: EventStore, raw_id: str, *, apply: bool, accept_security_findings: bool = False
) -> Decided:
    """Apply the session's waiting change to its checkout (all or nothing) or discard it.

    A change the security gate blocks (a secret, a high-severity finding) is refused unless
    `accept_security_findings` says the person read and accepted its findings."""
    found = session_dir(store, raw_id)
    sid = found.session_id
    if apply:
        app_workspace.refuse_cut_short(store, sid, app_workspace.tool_kinds())
    settings = settings_at(existing(found))
    if settings.workspace != "overlay":
        settings = settings.model_copy(update={"workspace": "overlay"})
    app_workspace.prepare(settings)
    # One apply or discard per session at a time: a second one waits for the first, then finds
    # its result, instead of opening an overlay the first is taking away.
    with app_workspace.apply_lock(settings, sid):
        if app_workspace.already_applied(store, sid, settings):
            return Decided(session_id=sid, outcome="already applied")
        view = app_workspace.open_workspace(settings, sid, found.cwd)
        assert view is not None  # The settings ask for an overlay.
        if not apply:
            dropped = app_workspace.discard(store, sid, settings, view)
            changes = dropped.changes if dropped else None
            return Decided(session_id=sid, outcome="discarded", discarded=changes)
        handoff = app_workspace.apply_now(
            store, sid, settings, view, accept_security_findings=accept_security_findings
        )
    if handoff.ready is None:
        return Decided(session_id=sid, outcome="nothing")
    return Decided(session_id=sid, outcome="applied", handoff=handoff)
