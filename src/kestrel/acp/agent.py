"""Kestrel as an Agent Client Protocol agent: an editor's sessions are Kestrel sessions.

`session/new` names a session (its id is the Kestrel session's id, so the editor can load it
later, and so can `kestrel resume`); its first prompt logs it with that prompt as its task, and
each later prompt is a follow-up. Every prompt runs as the session's own process (`runs`);
this process renders the log and carries the editor's answers back to it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SetSessionModeResponse,
)

from kestrel import app
from kestrel.acp.modes import AUTH_METHOD_ID, auth_method, is_mode, mode_state
from kestrel.acp.prompt_text import PromptBlock, task_text
from kestrel.acp.runs import PromptRun, RunFailed, RunSpec
from kestrel.acp.updates import Renderer
from kestrel.agent.session import new_session_id
from kestrel.agent.state import replay
from kestrel.protocol.errors import ConfigError, KestrelError
from kestrel.protocol.events import PermissionMode
from kestrel.service import sessions
from kestrel.settings import Settings
from kestrel.store.base import EventStore

logger = logging.getLogger(__name__)

BUSY = -32001
"""The JSON-RPC error code of a prompt sent while the session runs one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcpOptions:
    """How `kestrel acp` was started: the model and permission mode its sessions begin with
    (None: the settings')."""

    model: str | None = None
    mode: PermissionMode | None = None


@dataclass(slots=True)
class EditorSession:
    """A session the editor opened: where it works, its mode, and its prompt now running."""

    session_id: str
    cwd: Path
    mode: PermissionMode
    logged: bool
    """Whether its log exists (its first prompt has been sent, or it was loaded)."""
    run: PromptRun | None = None


@dataclass(slots=True)
class KestrelAgent:
    """The protocol's agent side, over Kestrel's session service."""

    options: AcpOptions
    _client: Client | None = None
    _sessions: dict[str, EditorSession] = field(default_factory=dict)
    _stores: dict[Path, EventStore] = field(default_factory=dict)

    def on_connect(self, conn: Client) -> None:
        """Remember the editor's side of the connection, to send it updates and questions."""
        self._client = conn

    async def stop_runs(self) -> None:
        """Stop every running prompt (the editor went away); each settles as cancelled."""
        running = [s.run for s in self._sessions.values() if s.run is not None]
        for run in running:
            await run.cancel()
        for run in running:
            await run.finished()

    def close(self) -> None:
        """Close the session stores."""
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Kestrel's capabilities: loading sessions, and prompts with attached files."""
        prompts = PromptCapabilities(image=False, audio=False, embedded_context=True)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=True, prompt_capabilities=prompts),
            auth_methods=[auth_method()],
            agent_info=Implementation(name="kestrel", title="Kestrel", version=app.version()),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        """Succeeds when the model's key is in the environment (or it needs none)."""
        if method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params({"details": f"unknown auth method {method_id!r}"})
        self._credentials(self._settings(Path.cwd(), self.options.mode))
        return AuthenticateResponse()

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        """A session in the repository `cwd`; it is logged with its first prompt."""
        root = _directory(cwd)
        settings = self._settings(root, self.options.mode)
        self._credentials(settings)
        _ignore_servers(mcp_servers)
        session = EditorSession(
            session_id=new_session_id(), cwd=root, mode=settings.permission_mode, logged=False
        )
        self._sessions[session.session_id] = session
        return NewSessionResponse(session_id=session.session_id, modes=mode_state(session.mode))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """Replay a Kestrel session's history to the editor; later prompts follow it up."""
        _directory(cwd)
        open_now = self._sessions.get(session_id)
        if open_now is not None and open_now.run is not None:
            raise _busy(session_id)
        store = self._store(self._settings(Path(cwd), None))
        try:
            found = sessions.existing(store, session_id)
        except KestrelError as exc:
            logger.info("session/load %s: %s", session_id, exc)
            raise RequestError.resource_not_found(session_id) from None
        _ignore_servers(mcp_servers)
        renderer = Renderer(session_id, found.cwd, replaying=True)
        client = self._connected()
        for record in found.records:
            for update in renderer.render(record):
                await client.session_update(session_id=session_id, update=update)
        mode = self.options.mode or replay(found.records).permission_mode
        self._sessions[session_id] = EditorSession(
            session_id=session_id, cwd=found.cwd, mode=mode, logged=True
        )
        return LoadSessionResponse(modes=mode_state(mode))

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """The permission mode of the session's next prompts."""
        session = self._session(session_id)
        if not is_mode(mode_id):
            raise RequestError.invalid_params({"details": f"unknown mode {mode_id!r}"})
        mode: PermissionMode = mode_id  # type: ignore[assignment]  # Checked just above.
        try:  # The sandbox's probe runs its own event loop: in a thread of its own.
            await asyncio.to_thread(app.check_sandbox, self._settings(session.cwd, mode), mode)
        except ConfigError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None
        session.mode = mode
        return SetSessionModeResponse()

    async def prompt(
        self, session_id: str, prompt: list[PromptBlock], **kwargs: Any
    ) -> PromptResponse:
        """Run the prompt as the session's task or follow-up; its stop reason."""
        session = self._session(session_id)
        if session.run is not None:
            raise _busy(session_id)
        text = task_text(prompt, session.cwd)
        if not text.strip():
            raise RequestError.invalid_params({"details": "the prompt is empty"})
        spec = RunSpec(
            session_id=session_id,
            cwd=session.cwd,
            message=text if session.logged else None,
            mode=session.mode,
            model=self.options.model,
        )
        settings = self._settings(session.cwd, session.mode)
        store = self._store(settings)
        run = PromptRun(self._connected(), store, spec, after_seq=0)
        session.run = run  # From here on a second prompt is refused and a cancel reaches it.
        try:
            if not session.logged:
                await self._log_new(session, settings, store, text)
            records = store.read(session_id)
            run.after_seq = records[-1].seq if spec.message is not None and records else 0
            stopped = await run.run()
            session.mode = run.spec.mode  # An approved plan continues in another mode.
            return PromptResponse(stop_reason=stopped)
        except RunFailed as exc:
            raise RequestError.internal_error({"details": str(exc)}) from None
        finally:
            session.run = None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's running prompt, if any; the prompt answers `cancelled`."""
        session = self._sessions.get(session_id)
        if session is not None and session.run is not None:
            await session.run.cancel()

    async def _log_new(
        self, session: EditorSession, settings: Settings, store: EventStore, task: str
    ) -> None:
        """Log the session with its first prompt as its task (checked before, as any new
        session is: credentials, sandbox, model)."""
        new = sessions.NewSession(task=task, cwd=session.cwd, session_id=session.session_id)
        try:  # Its checks run their own event loops: in a thread of their own.
            await asyncio.to_thread(sessions.create_session, store, settings, new)
        except KestrelError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None
        session.logged = True

    def _settings(self, cwd: Path, mode: PermissionMode | None) -> Settings:
        flags: dict[str, object] = {"model": self.options.model, "permission_mode": mode}
        try:
            return sessions.settings_for(cwd, flags)
        except ConfigError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None

    def _credentials(self, settings: Settings) -> None:
        try:
            app.check_credentials(settings, os.environ)
        except ConfigError as exc:
            raise RequestError.auth_required({"details": str(exc)}) from None

    def _store(self, settings: Settings) -> EventStore:
        where = app.data_dir(settings)
        if where not in self._stores:
            try:
                self._stores[where] = app.open_store(settings)
            except ConfigError as exc:
                raise RequestError.internal_error({"details": str(exc)}) from None
        return self._stores[where]

    def _session(self, session_id: str) -> EditorSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        return session

    def _connected(self) -> Client:
        assert self._client is not None, "the connection sets the client first"
        return self._client


def _directory(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute() or not path.is_dir():
        raise RequestError.invalid_params({"details": f"cwd {cwd!r} is not an absolute folder"})
    return path.resolve()


def _ignore_servers(servers: list[Any] | None) -> None:
    if servers:
        names = ", ".join(str(getattr(s, "name", "?")) for s in servers)
        logger.info(
            "MCP servers from the editor are not used yet (%s); only those in Kestrel's "
            "settings are",
            names,
        )


def _busy(session_id: str) -> RequestError:
    return RequestError(
        BUSY,
        "a prompt is running in this session",
        {"details": f"session {session_id} is running a prompt; cancel it or wait for its end"},
    )
