"""`kestrel sessions … --server URL`: the terminal as a client of a `kestrel serve` server.

`list` and `show` read the server's sessions as they read the local log; `create`, `follow`,
`send`, `approve`, `cancel`, `diff`, `review` and `plan` exist only against a server. The API
token comes from `KESTREL_API_TOKEN`. This module is light to import: the HTTP client is
imported when a command talks to a server, so the local `kestrel sessions list` never loads it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error

if TYPE_CHECKING:
    from kestrel.cli.remote_client import Remote
    from kestrel.cli.remote_view import RemoteView
    from kestrel.protocol.events import Record

SERVER_ENV = "KESTREL_SERVER_URL"
NEEDS_SERVER = (
    f"--server URL (or {SERVER_ENV}) is required: this command talks to a `kestrel serve` "
    "server (the API token comes from KESTREL_API_TOKEN)"
)

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar=SERVER_ENV,
        help="A `kestrel serve` server, e.g. https://kestrel.example.com; the API token comes "
        "from KESTREL_API_TOKEN.",
    ),
]
InsecureOption = Annotated[
    bool,
    typer.Option(
        "--insecure",
        help="Send the API token over plain http to a host that is not this machine.",
    ),
]
FollowOption = Annotated[
    bool, typer.Option("--follow", "-f", help="Then print its events until the run ends.")
]
GitUrlOption = Annotated[
    str | None,
    typer.Option("--git-url", help="A repository the server clones (https:// or ssh://)."),
]
RefOption = Annotated[
    str | None, typer.Option("--ref", help="The branch, tag or commit of --git-url.")
]
PathOption = Annotated[
    str | None,
    typer.Option("--path", help="A folder on the server's machine, inside its allowed roots."),
]
UploadOption = Annotated[
    Path | None,
    typer.Option(
        "--upload",
        help="A local git repository, sent to the server: its files as they are now, "
        "ignored ones left out.",
    ),
]
SessionId = Annotated[str, typer.Argument(help="The session's id, in full.")]


@contextmanager
def talking(server: str | None, insecure: bool) -> Iterator[Remote]:
    """A client of the server; any failure ends the command with one line and its exit code,
    Ctrl-C with "Cancelled." and 130."""
    from kestrel.app_store import version
    from kestrel.cli import interrupts
    from kestrel.cli.remote_client import Remote, RemoteError, read_token, server_url

    try:
        if not server:
            raise RemoteError(NEEDS_SERVER, EXIT_USAGE)
        base = server_url(server, insecure=insecure)
        remote = Remote(base, read_token(os.environ, base), user_agent=f"kestrel/{version()}")
        try:
            yield remote
        finally:
            remote.close()
    except RemoteError as exc:
        report_error(exc)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as exc:
        interrupts.note_interrupt(exc)
        interrupts.mark_said()
        print(interrupts.stopped_line(None), file=sys.stderr)
        raise typer.Exit(interrupts.exit_code()) from None


def fail(message: str) -> typer.Exit:
    """Report a mistake in the command line; the exit to raise (2)."""
    report_error(ValueError(message))
    return typer.Exit(EXIT_USAGE)


def hint_server(remote: Remote, insecure: bool) -> str:
    """What a printed command needs to reach this server: ` --server URL`, or nothing when
    KESTREL_SERVER_URL names it already."""
    from kestrel.cli.remote_client import RemoteError, server_url

    flag = " --insecure" if insecure else ""
    try:
        if server_url(os.environ.get(SERVER_ENV, "") or "-", insecure=True) == remote.base:
            return flag
    except RemoteError:
        pass
    return f" --server {remote.base}{flag}"


def make_view(remote: Remote, insecure: bool, *, as_json: bool = False) -> RemoteView:
    """The printer of the server's records for this terminal."""
    from rich.console import Console

    from kestrel.cli.remote_view import RemoteView

    console = Console(highlight=False)
    return RemoteView(console, as_json=as_json, hint_server=hint_server(remote, insecure))


def list_remote(server: str, *, insecure: bool, as_json: bool, limit: int) -> None:
    """`kestrel sessions list --server URL`: the tenant's sessions, newest first."""
    from kestrel.cli.remote_view import session_table

    with talking(server, insecure) as remote:
        rows = remote.sessions()[:limit]
        hint = hint_server(remote, insecure)
    if as_json:
        print(json.dumps([asdict(row) for row in rows], ensure_ascii=False, indent=2))
    elif not rows:
        print(
            f'No sessions yet: start one with: kestrel sessions create "what to do"{hint} '
            "--git-url URL"
        )
    else:
        print("\n".join(session_table(rows)))


def show_remote(
    server: str, session_id: str, *, insecure: bool, as_json: bool, quiet: bool = False
) -> list[Record]:
    """`kestrel sessions show ID --server URL`: print the session and its events (nothing
    with `quiet`); its records, for an HTML page."""
    from kestrel.cli.remote_view import heading_lines
    from kestrel.cli.sessions import subagent_lines
    from kestrel.protocol.codec import DecodeError, record_from_dict

    with talking(server, insecure) as remote:
        session = remote.session(session_id)
        items = remote.events(session_id)
        view = make_view(remote, insecure)
        records = []
        for item in items:
            try:
                records.append(record_from_dict(item))
            except DecodeError:
                continue  # A newer server's event: the JSON form keeps it, a page cannot.
        if quiet:
            return records
        if as_json:
            shown = {"session": asdict(session), "events": items}
            print(json.dumps(shown, ensure_ascii=False, indent=2))
            return records
        for line in heading_lines(session):
            view.console.print(line, markup=False, soft_wrap=True)
        for item in items:
            view.show(item)
        for line in subagent_lines(records):
            view.console.print(line, markup=False, soft_wrap=True)
        view.next_steps(session)
    return records


def create_command(
    task: Annotated[str, typer.Argument(help="What the session is to do.")],
    server: ServerOption = None,
    git_url: GitUrlOption = None,
    ref: RefOption = None,
    path: PathOption = None,
    upload: UploadOption = None,
    model: Annotated[
        str | None, typer.Option("--model", help="PROVIDER:MODEL, if the plan allows it.")
    ] = None,
    plan_first: Annotated[
        bool, typer.Option("--plan-first", help="Propose a plan and wait for a decision on it.")
    ] = False,
    follow: FollowOption = False,
    insecure: InsecureOption = False,
) -> None:
    """Start a session on a server; print its id (and, with --follow, its events)."""
    sources = {"--git-url": git_url, "--path": path, "--upload": upload}
    if sum(value is not None for value in sources.values()) != 1:
        raise fail(
            "give the repository one way: --git-url URL (cloned by the server), --path DIR (a "
            "folder on the server's machine) or --upload DIR (a local repository, sent)"
        )
    if ref and not git_url:
        raise fail("--ref goes with --git-url")
    if upload is not None and plan_first:
        raise fail(
            "--plan-first cannot go with --upload: the server takes no plan-first option for "
            "an upload; use --git-url or --path"
        )
    from kestrel.cli.remote_client import RemoteSession

    with talking(server, insecure) as remote:
        if upload is not None:
            made = _upload(remote, upload, task, model)
        else:
            body: dict[str, object] = {"task": task, "source": _source(git_url, ref, path)}
            body.update({"model": model} if model else {})
            body.update({"plan_first": True} if plan_first else {})
            made = remote.json("POST", "/sessions", json=body, timeout=CREATE_S)
        session = RemoteSession.from_json(made)
        print(session.id, flush=True)
        hint = hint_server(remote, insecure)
        print(
            f"Started session {session.id} ({session.status}); follow it with: "
            f"kestrel sessions follow {session.id}{hint}",
            file=sys.stderr,
            flush=True,
        )
        if follow:
            follow_session(remote, session.id, insecure)


CREATE_S = 600.0
"""How long starting a session may take: the server clones or unpacks the repository first."""


def _source(git_url: str | None, ref: str | None, path: str | None) -> dict[str, str]:
    """The API's `source`: a git URL (and ref), or a folder on the server's machine (made
    absolute here, which is right when the server runs on this machine too)."""
    if git_url is not None:
        return {"git_url": git_url, **({"ref": ref} if ref else {})}
    return {"path": os.path.abspath(os.path.expanduser(path or "."))}


def _upload(remote: Remote, folder: Path, task: str, model: str | None) -> object:
    """Pack the local repository and start a session on it."""
    from kestrel.cli.remote_pack import pack

    data = pack(folder)
    params = {"task": task, "kind": "tar.gz", **({"model": model} if model else {})}
    return remote.json(
        "POST",
        "/sessions/upload",
        params=params,
        content=data,
        headers={"Content-Type": "application/gzip"},
        timeout=CREATE_S,
    )


def follow_session(
    remote: Remote, session_id: str, insecure: bool, *, as_json: bool = False, after: int = 0
) -> None:
    """Print the session's events until its run ends, then exit with the code of how it ended
    (0 done, 1 error, 3 a limit, 130 cancelled); Ctrl-C stops following, not the session."""
    from kestrel.cli import interrupts
    from kestrel.cli.remote_view import follow

    view = make_view(remote, insecure, as_json=as_json)
    try:
        code = follow(remote, view, session_id, after)
    except KeyboardInterrupt as exc:
        interrupts.note_interrupt(exc)
        interrupts.mark_said()
        print(
            f"\nStopped following; session {session_id} goes on on the server (follow it "
            f"again: kestrel sessions follow {session_id}{view.hint_server})",
            file=sys.stderr,
        )
        raise typer.Exit(interrupts.exit_code()) from None
    raise typer.Exit(code)


def follow_command(
    session_id: SessionId,
    server: ServerOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Each event as a line of JSON, in the log's form.")
    ] = False,
    insecure: InsecureOption = False,
) -> None:
    """Print a session's events, then new ones live, until its run ends (Ctrl-C stops
    following; the session goes on). Exits 0 done, 1 error, 3 a limit, 130 cancelled."""
    with talking(server, insecure) as remote:
        follow_session(remote, session_id, insecure, as_json=as_json)


def register(app: typer.Typer) -> None:
    """Add the commands that exist only against a server to `kestrel sessions`."""
    from kestrel.cli import remote_decide

    app.command("create")(create_command)
    app.command("follow")(follow_command)
    app.command("send")(remote_decide.send_command)
    app.command("approve")(remote_decide.approve_command)
    app.command("cancel")(remote_decide.cancel_command)
    app.command("diff")(remote_decide.diff_command)
    app.command("review")(remote_decide.review_command)
    app.command("plan")(remote_decide.plan_command)
