"""Routes for the tenant's memory: conventions its new sessions on a repository start with.

Entries are the tenant's own, per repository (see `memory`); another tenant's entry answers 404
like one that does not exist, and its sessions never start with it.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from kestrel.memory_store import MemoryEntryError
from kestrel.protocol.events import PullRequestSynced
from kestrel.server.deps import ERRORS, Caller, Host
from kestrel.server.hosting import Hosting, Refusal
from kestrel.server.memory import HostedEntry
from kestrel.server.routes_sessions import Strict

router = APIRouter(responses=ERRORS)


class MemoryEntryView(BaseModel):
    """One convention the tenant keeps for a repository."""

    id: str
    repository: str
    """`HOST/PATH` of the git URL sessions were cloned from, or `path:FOLDER`."""
    text: str
    source: str
    created_at: float


class NewEntryBody(Strict):
    """A convention to keep for a repository."""

    repository: str = Field(min_length=1, max_length=2_000)
    text: str = Field(min_length=1, max_length=2_000)


class SessionMemoryView(BaseModel):
    """What new sessions on this session's repository start with, and what its review proposed
    that is not kept yet."""

    repository: str
    """Empty for an upload, which has no hosted memory."""
    entries: list[MemoryEntryView]
    proposed: list[str]


class AcceptBody(Strict):
    """Which of the session's proposed conventions to keep (all when absent)."""

    texts: list[str] | None = Field(default=None, max_length=100)


class AcceptedView(BaseModel):
    """What an accept kept, and what was kept already."""

    kept: list[MemoryEntryView]
    already: list[str]


def _shown(entry: HostedEntry) -> MemoryEntryView:
    return MemoryEntryView(
        id=entry.id,
        repository=entry.repository,
        text=entry.text,
        source=entry.source,
        created_at=entry.created_at,
    )


@router.get("/memory")
def list_memory(
    who: Caller, host: Host, repository: str | None = Query(default=None, max_length=2_000)
) -> list[MemoryEntryView]:
    """The tenant's entries, oldest first (one repository's with `repository`)."""
    return [_shown(e) for e in host.memory.entries(who.tenant_id, repository)]


@router.post("/memory", status_code=201)
def add_memory(body: NewEntryBody, who: Caller, host: Host) -> MemoryEntryView:
    """Keep a convention: every new session of the tenant on the repository starts with it
    (400 for an empty, too long or duplicate entry)."""
    try:
        return _shown(host.memory.add(who.tenant_id, body.repository, body.text, "added by hand"))
    except MemoryEntryError as exc:
        raise Refusal(400, str(exc)) from None


@router.delete("/memory/{entry_id}", status_code=204, response_class=Response)
def remove_memory(entry_id: str, who: Caller, host: Host) -> Response:
    """Forget an entry of the tenant's."""
    if host.memory.remove(who.tenant_id, entry_id) is None:
        raise Refusal(404, f"no memory entry {entry_id}")
    return Response(status_code=204)


@router.get("/sessions/{session_id}/memory")
def session_memory(session_id: str, who: Caller, host: Host) -> SessionMemoryView:
    """The entries new sessions on this session's repository start with, and the conventions
    its pull request's review proposed that are not kept yet."""
    host.session(who, session_id)
    repository = host.memory.repository_of(who.tenant_id, session_id)
    entries = host.memory.entries(who.tenant_id, repository) if repository else []
    known = {e.text for e in entries}
    return SessionMemoryView(
        repository=repository,
        entries=[_shown(e) for e in entries],
        proposed=[text for text in _proposed(host, session_id) if text not in known],
    )


@router.post("/sessions/{session_id}/memory/accept")
def accept_memory(
    session_id: str, who: Caller, host: Host, body: AcceptBody | None = None
) -> AcceptedView:
    """Keep conventions the session's review proposed, for its repository (400 for a text it
    did not propose, and for an upload, which has no hosted memory)."""
    host.session(who, session_id)
    repository = host.memory.repository_of(who.tenant_id, session_id)
    proposed = _proposed(host, session_id)
    chosen = list(proposed) if body is None or body.texts is None else body.texts
    unknown = [text for text in chosen if text not in proposed]
    if unknown:
        raise Refusal(400, f"session {session_id} did not propose {unknown[0]!r}")
    known = {e.text for e in host.memory.entries(who.tenant_id, repository)}
    kept: list[MemoryEntryView] = []
    already: list[str] = []
    for text in dict.fromkeys(chosen):
        if " ".join(text.split()) in known:
            already.append(text)
            continue
        try:
            entry = host.memory.add(who.tenant_id, repository, text, proposed[text])
        except MemoryEntryError as exc:
            raise Refusal(400, str(exc)) from None
        kept.append(_shown(entry))
    return AcceptedView(kept=kept, already=already)


def _proposed(host: Hosting, session_id: str) -> dict[str, str]:
    """The conventions the session's review proposed, each with where it came from."""
    found: dict[str, str] = {}
    for record in host.store.read(session_id):
        event = record.event
        if isinstance(event, PullRequestSynced):
            for text in event.proposed:
                found.setdefault(text, f"review of pull request #{event.number}")
    return found
