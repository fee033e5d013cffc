"""Start, find and open sessions for a run: everything a run needs that no terminal does.

Frontends decide how a person is asked and what is shown; this module decides which session a
request means, with which settings, and builds the loop that runs it: a new session is checked
(credentials, sandbox, model) before its log exists, and a resumed one keeps its workspace mode
and model and has the calls a crash cut short settled before anything else runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from kestrel import app, app_share, app_workspace, memory_store
from kestrel.agent.loop import AgentLoop
from kestrel.agent.planning import PLAN_MODE_NOTE
from kestrel.agent.prompt import repository_root
from kestrel.agent.rollback import ResumePolicy
from kestrel.agent.session import ResumeEnvironment, resume, rewind, start_session
from kestrel.agent.subagents import close_lost
from kestrel.app_sandbox import outside_reach
from kestrel.protocol.errors import ConfigError, KestrelError, SessionNotFound
from kestrel.protocol.events import (
    ChangesApplied,
    CheckpointCreated,
    ContextAdded,
    Record,
    Rewound,
    SessionFinished,
    SessionStarted,
)
from kestrel.settings import Settings
from kestrel.settings_load import load_settings, user_settings_path
from kestrel.store.base import EventStore
from kestrel.workspace.overlay import View, layer_for

WorkspaceMode = Literal["overlay", "direct"]


def settings_for(cwd: Path, flags: Mapping[str, object]) -> Settings:
    """The settings of a run in `cwd`: files, environment, then the request's own flags."""
    return load_settings(cwd, env=os.environ, flags=dict(flags), home=Path.home())


@dataclass(frozen=True, slots=True, kw_only=True)
class NewSession:
    """What a new session is: its task, where it works, and how."""

    task: str
    cwd: Path
    plan_first: bool = False
    """Start in plan mode: explore read-only and propose a plan before changing anything."""
    session_id: str | None = None
    """The id to log it under, when the frontend named the session before its task (an IDE's
    `session/new`); a fresh one when None."""
    user_memory: bool = True
    """Start with the user's learned conventions too, not only the repository's; a hosted
    session must not (the server's user is every tenant's)."""


def create_session(store: EventStore, settings: Settings, new: NewSession) -> str:
    """Check that the session can run, then log its start; return its id."""
    if not new.task.strip():
        raise ConfigError('no task given: kestrel "what to do" (see kestrel --help)')
    app.check_credentials(settings, os.environ)  # Fail before the session starts.
    app.check_sandbox(settings)  # Before the session exists: refuse loudly, lose nothing.
    app.build_provider(settings.model, base_url=settings.base_url, cwd=new.cwd)
    session_id = start_session(
        store,
        task=new.task,
        cwd=new.cwd,
        model=settings.model,
        permission_mode="plan" if new.plan_first else settings.permission_mode,
        limits=settings.limits.as_limits(),
        version=app.version(),
        workspace=settings.workspace,
        session_id=new.session_id,
    )
    learned = memory_store.as_context(
        repository_root(new.cwd.resolve()), _user_dir() if new.user_memory else None
    )
    if learned:
        store.append(session_id, ContextAdded(source="memory", text=learned))
    if new.plan_first:
        store.append(session_id, ContextAdded(source="plan mode", text=PLAN_MODE_NOTE))
    return session_id


def _user_dir() -> Path:
    """The folder of the user's settings file, where their memory file is."""
    return user_settings_path(env=os.environ, home=Path.home()).parent


def latest_in(store: EventStore, cwd: Path) -> str:
    """The most recent session that worked in `cwd`."""
    for summary in store.sessions():
        if Path(summary.cwd) == cwd:
            return summary.session_id
    raise SessionNotFound(f"no earlier session in {cwd} to continue")


@dataclass(frozen=True, slots=True, kw_only=True)
class Existing:
    """A session to resume: its log so far, where it worked and in which workspace mode."""

    session_id: str
    records: Sequence[Record]
    started: SessionStarted
    cwd: Path


def existing(store: EventStore, session_id: str) -> Existing:
    """A session's log and directory, or a `ConfigError` saying why it cannot be resumed."""
    records = store.read(session_id)
    started = records[0].event if records else None
    if not isinstance(started, SessionStarted):
        raise ConfigError(f"session {session_id}: its log does not begin with session_started")
    cwd = Path(started.cwd)
    if not cwd.is_dir():
        raise ConfigError(f"session {session_id} worked in {cwd}, which no longer exists")
    return Existing(session_id=session_id, records=records, started=started, cwd=cwd)


def same_workspace(found: Existing, asked: WorkspaceMode | None) -> WorkspaceMode | None:
    """Where the session's changes went (a request may only agree): a direct session resumed
    over an overlay, or the reverse, would lose track of its change. None: as the settings say
    (a log written before the mode was recorded)."""
    recorded = found.started.workspace
    if not recorded:
        return asked
    if asked is not None and asked != recorded:
        raise ConfigError(
            f"session {found.session_id} works in the {recorded} workspace; resume it "
            f"without --workspace {asked} (or with --workspace {recorded})"
        )
    return recorded


def change_left_over(settings: Settings, session_id: str, records: Sequence[Record]) -> bool:
    """Whether the session's last run ended without its change being handed over."""
    if settings.workspace != "overlay":
        return False
    kinds = [type(r.event) for r in records]
    here = layer_for(app.data_dir(settings), session_id).exists()
    # With shared checkpoints the change may lie on another machine: it is made here first.
    marks = [r.event for r in records if isinstance(r.event, CheckpointCreated)]
    elsewhere = settings.workspace_share_url is not None and bool(marks)
    elsewhere = elsewhere and marks[-1].label != app_share.DISCARDED
    if not (here or elsewhere):
        return False
    last_finish = max(i for i, kind in enumerate(kinds) if kind is SessionFinished)
    return ChangesApplied not in kinds[last_finish:]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """A run's own budget overrides (None: the session's)."""

    max_turns: int | None = None
    max_cost: float | None = None


@dataclass(slots=True)
class Run:
    """A session opened for a run: its loop, and its overlay view when it has one."""

    loop: AgentLoop
    view: View | None
    settings: Settings


def open_run(
    store: EventStore,
    session_id: str,
    settings: Settings,
    cwd: Path,
    parts: app.LoopParts,
    limits: Limits | None = None,
) -> Run:
    """Open the session's workspace and build its loop, with the run's budget overrides."""
    view = app_workspace.open_workspace(settings, session_id, cwd)
    # Another machine ran the session last: its files come from the checkpoint its log names.
    caught_up = view is not None and app_share.catch_up(store, session_id, settings, view.root)
    loop = app.build_loop(store, session_id, settings, view.root if view else cwd, parts)
    if view is not None and not caught_up:
        asyncio.run(app_workspace.mark_baseline(loop.emit, settings, view, session_id))
    if limits is not None and (limits.max_turns is not None or limits.max_cost is not None):
        loop.config = replace(
            loop.config,
            limits=replace(
                loop.state.limits,
                max_turns=limits.max_turns or loop.state.limits.max_turns,
                max_cost_usd=limits.max_cost or loop.state.limits.max_cost_usd,
            ),
        )
    return Run(loop=loop, view=view, settings=settings)


def resume_policy(settings: Settings) -> ResumePolicy:
    """How a resume settles cut-short calls, and what commands could reach that no rollback
    undoes (see `outside_reach`)."""
    outside = outside_reach(settings)
    return ResumePolicy(rerun_idempotent=settings.tools.rerun_interrupted, outside=outside)


def settle_interrupted(loop: AgentLoop, settings: Settings) -> None:
    """Before anything else on resume: roll back each call that may change files and that a
    crash cut short, and log how every unfinished call is settled."""
    env = loop.environment
    where = ResumeEnvironment(
        root=env.root,
        artifacts_dir=env.artifacts_dir,
        checkpointer=loop.checkpointer,
        policy=resume_policy(settings),
    )
    try:
        asyncio.run(resume(loop.state, loop.emit, loop.tools.kind, where))
    except KestrelError as exc:  # A checkpoint that cannot be read or restored, say.
        raise ConfigError(
            f"session {loop.session_id}: the call a crash cut short could not be rolled back "
            f"({exc}); nothing else was run, and its files may hold part of that call"
        ) from exc
    close_lost(loop)  # The subagent of a rolled-back `task` call ends with it.


def rewind_to(loop: AgentLoop, checkpoint: str) -> Rewound:
    """Restore the files of a checkpoint and log the rewind."""
    if loop.checkpointer is None:
        raise ConfigError("checkpoints are off for this session; nothing to rewind")
    return asyncio.run(rewind(loop.state, loop.emit, loop.checkpointer, checkpoint))
