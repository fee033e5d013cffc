"""What a person decides on a server's session from the terminal: a follow-up, an answer to a
permission question, a stop, the change (see it, apply, discard or send it back) and the plan.
Each maps to one route of the API; `--server URL` (or KESTREL_SERVER_URL) names the server."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kestrel.cli.exit_codes import EXIT_ERROR, EXIT_USAGE
from kestrel.cli.remote_sessions import (
    FollowOption,
    InsecureOption,
    ServerOption,
    SessionId,
    fail,
    follow_session,
    hint_server,
    talking,
)

if TYPE_CHECKING:
    from kestrel.cli.remote_client import Remote

Message = Annotated[str, typer.Option("--message", "-m", help="Words for the model: why.")]


def _path(session_id: str, *rest: str) -> str:
    from kestrel.cli.remote_client import quoted

    return "/".join([f"/sessions/{quoted(session_id)}", *(quoted(part) for part in rest)])


def _one(choices: dict[str, bool], what: str) -> str:
    """The one option given of `choices`, else a usage error naming them."""
    given = [name for name, on in choices.items() if on]
    if len(given) != 1:
        raise fail(f"{what}: give one of {', '.join(choices)}")
    return given[0]


def _last_seq(remote: Remote, session_id: str) -> int:
    """The number of the session's last event, to follow what comes after it."""
    items = remote.events(session_id)
    return int(items[-1]["seq"]) if items else 0


def send_command(
    session_id: SessionId,
    message: Annotated[str, typer.Argument(help="The follow-up: what to do next.")],
    server: ServerOption = None,
    follow: FollowOption = False,
    insecure: InsecureOption = False,
) -> None:
    """Send a follow-up to a session that has stopped; it runs again with it."""
    from kestrel.cli.remote_client import RemoteSession

    with talking(server, insecure) as remote:
        after = _last_seq(remote, session_id) if follow else 0
        answer = remote.json("POST", _path(session_id, "messages"), json={"text": message})
        session = RemoteSession.from_json(answer)
        print(f"Sent to session {session.id}; it is {session.status}.", file=sys.stderr)
        if follow:
            follow_session(remote, session_id, insecure, after=after)


def approve_command(
    session_id: SessionId,
    call_id: Annotated[
        str | None,
        typer.Argument(help="The call asked about (or a prefix), when several questions wait."),
    ] = None,
    server: ServerOption = None,
    deny: Annotated[bool, typer.Option("--deny", help="Refuse the call instead.")] = False,
    always: Annotated[
        bool,
        typer.Option("--always", help="Allow this tool for the rest of the session, unasked."),
    ] = False,
    message: Message = "",
    list_only: Annotated[
        bool, typer.Option("--list", help="Only list the open questions, as JSON lines.")
    ] = False,
    insecure: InsecureOption = False,
) -> None:
    """Answer the permission question a session waits on; with --list, show what waits."""
    if deny and always:
        raise fail("--always allows a tool; it cannot go with --deny")
    with talking(server, insecure) as remote:
        pending = remote.json("GET", _path(session_id, "approvals"))
        if list_only:
            for question in pending:
                print(json.dumps(question, ensure_ascii=False))
            return
        chosen = _question(remote, insecure, session_id, pending, call_id)
        scope = "session" if always else "once"
        body = {"allow": not deny, "scope": scope, "message": message}
        remote.json("POST", _path(session_id, "approvals", str(chosen["call_id"])), json=body)
    from kestrel.cli.frontends import shorten

    verdict = "Denied" if deny else "Allowed"
    rest = ""
    if always:
        rest = (
            " (and for the rest of it)"
            if chosen.get("repeatable", True)
            else (" (this call only: it is asked about every time)")
        )
    print(
        f"{verdict} {chosen.get('tool', '')} {shorten(str(chosen.get('arguments', '')))} "
        f"in session {session_id}{rest}"
    )


def _question(
    remote: Remote, insecure: bool, session_id: str, pending: Any, call_id: str | None
) -> dict[str, Any]:
    """The open question `call_id` names (a prefix will do), or the only one there is."""
    from kestrel.cli.remote_client import RemoteError

    if not isinstance(pending, list) or not all(isinstance(p, dict) for p in pending):
        raise RemoteError("the server's answer is not what the Kestrel API sends")
    found = [p for p in pending if str(p.get("call_id", "")).startswith(call_id or "")]
    if not found:
        which = f" for call {call_id}" if call_id else ""
        raise RemoteError(
            f"session {session_id} waits on no permission question{which}", EXIT_USAGE
        )
    if len(found) > 1:
        listed = ", ".join(f"{p.get('call_id')} ({p.get('tool')})" for p in found)
        hint = hint_server(remote, insecure)
        raise RemoteError(
            f"session {session_id} waits on {len(found)} questions; name one: kestrel sessions "
            f"approve {session_id} CALL{hint} (open: {listed})",
            EXIT_USAGE,
        )
    chosen: dict[str, Any] = found[0]
    return chosen


def cancel_command(
    session_id: SessionId, server: ServerOption = None, insecure: InsecureOption = False
) -> None:
    """Stop a session: out of the queue, or stopped where it runs (it can go on later with
    a follow-up)."""
    from kestrel.cli.remote_client import RemoteSession

    with talking(server, insecure) as remote:
        session = RemoteSession.from_json(remote.json("POST", _path(session_id, "cancel")))
        hint = hint_server(remote, insecure)
    if session.status == "idle":
        print(f"Took session {session_id} out of the queue.")
    else:
        print(
            f"Asked session {session_id} to stop; it settles as cancelled. Go on with: "
            f"kestrel sessions send {session_id} MESSAGE{hint}"
        )


def diff_command(
    session_id: SessionId, server: ServerOption = None, insecure: InsecureOption = False
) -> None:
    """The change a session left waiting for review, as a unified diff."""
    with talking(server, insecure) as remote:
        text = remote.request("GET", _path(session_id, "diff")).text
    if not text.strip():
        print(f"session {session_id} has no change waiting for review", file=sys.stderr)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def review_command(
    session_id: SessionId,
    server: ServerOption = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Apply the change to the server's checkout.")
    ] = False,
    discard: Annotated[bool, typer.Option("--discard", help="Drop the change.")] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Send it back with -m WHAT to change.")
    ] = False,
    message: Message = "",
    insecure: InsecureOption = False,
) -> None:
    """Decide on the change a session left for review: apply, discard, or send it back."""
    action = _one({"--apply": apply, "--discard": discard, "--reject": reject}, "review")
    if action == "--reject" and not message.strip():
        raise fail("--reject needs -m WHAT: what the session is to change")
    body = {"action": action.removeprefix("--"), "feedback": message}
    with talking(server, insecure) as remote:
        done = remote.json("POST", _path(session_id, "review"), json=body)
    said = str(done.get("output", "")) if isinstance(done, dict) else ""
    if said:
        print(said)
    if not (isinstance(done, dict) and done.get("ok")):
        raise typer.Exit(EXIT_ERROR)


def plan_command(
    session_id: SessionId,
    server: ServerOption = None,
    approve: Annotated[bool, typer.Option("--approve", help="Go ahead with the plan.")] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Ask for another plan, saying why with -m.")
    ] = False,
    message: Message = "",
    follow: FollowOption = False,
    insecure: InsecureOption = False,
) -> None:
    """Decide on the plan a session waits on (created with --plan-first); it runs again."""
    decision = _one({"--approve": approve, "--reject": reject}, "plan")
    if decision == "--reject" and not message.strip():
        raise fail("--reject needs -m WHY: what is wrong with the plan")
    body = {"decision": decision.removeprefix("--"), "feedback": message}
    with talking(server, insecure) as remote:
        after = _last_seq(remote, session_id) if follow else 0
        remote.json("POST", _path(session_id, "plan"), json=body)
        verb = "Approved" if decision == "--approve" else "Rejected"
        print(f"{verb} the plan of session {session_id}; it runs again.", file=sys.stderr)
        if follow:
            follow_session(remote, session_id, insecure, after=after)
