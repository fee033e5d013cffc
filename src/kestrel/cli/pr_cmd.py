"""`kestrel pr ID` opens a pull request for a session's change; `kestrel pr sync ID` answers its
review (new comments and failed checks become a follow-up; the fix is pushed and replied to)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import ConfigError, KestrelError, SessionNotFound
from kestrel.protocol.events_base import PermissionMode

EXIT_ERROR = 1
_API_ENV = "KESTREL_FORGE_API"


def pr_command(
    words: Annotated[
        list[str],
        typer.Argument(help="ID to open a pull request, or `sync ID` to answer its review."),
    ],
    remote: Annotated[str, typer.Option("--remote", help="The git remote to push to.")] = "origin",
    base: Annotated[
        str | None, typer.Option("--base", help="The branch to merge into (default: current).")
    ] = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="The branch to push (default: from the task).")
    ] = None,
    draft: Annotated[bool, typer.Option("--draft", help="Open it as a draft.")] = False,
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url",
            help=f"The forge's REST API (default: ${_API_ENV}, else https://api.github.com; "
            "GitHub Enterprise: https://HOST/api/v3).",
        ),
    ] = None,
    repository: Annotated[
        str | None,
        typer.Option("--repository", help="owner/name on the forge (default: from the remote)."),
    ] = None,
    accept_security_findings: Annotated[
        bool,
        typer.Option(
            "--accept-security-findings",
            help="Push even a change the security gate blocks (a secret, a high-severity "
            "finding); it is your decision.",
        ),
    ] = False,
    permission_mode: Annotated[
        PermissionMode,
        typer.Option("--permission-mode", help="The mode of the follow-up `sync` runs."),
    ] = "accept-edits",
) -> None:
    """Open a pull request for a session's change (its token: $KESTREL_FORGE_TOKEN, $GITHUB_TOKEN,
    $GH_TOKEN, or your git credential helper); see docs/delivery.md."""
    from kestrel.delivery.pull import PullOptions

    sync = len(words) == 2 and words[0] == "sync"
    if len(words) != 1 and not sync:
        report_error(ConfigError("usage: kestrel pr ID  or  kestrel pr sync ID"))
        raise typer.Exit(EXIT_USAGE)
    options = PullOptions(
        remote=remote,
        base=base,
        branch=branch,
        draft=draft,
        api_url=api_url or os.environ.get(_API_ENV) or "https://api.github.com",
        repository=repository,
        accept_security_findings=accept_security_findings,
    )
    raise typer.Exit(_run(words[-1], options, sync=sync, mode=permission_mode))


def _run(raw_id: str, options: object, *, sync: bool, mode: str) -> int:
    from kestrel import app
    from kestrel.delivery.branch import DeliveryError
    from kestrel.delivery.credentials import forge_token
    from kestrel.delivery.forge import ForgeError
    from kestrel.delivery.pull import PullOptions, forge_host, open_pull_request, sync_pull_request
    from kestrel.service.review import settings_at

    assert isinstance(options, PullOptions)
    try:
        settings = settings_at(Path.cwd())
        store = app.open_store(settings)
    except ConfigError as exc:
        report_error(exc)
        return EXIT_USAGE
    try:
        session_id = store.resolve(raw_id)
        token = forge_token(forge_host(options.api_url))
        if not sync:
            opened = open_pull_request(store, settings, session_id, options, token)
            typer.echo(f"opened pull request #{opened.number}: {opened.url}")
            typer.echo(f"branch {opened.branch} ({opened.commit[:10]}) into {opened.base}")
            return 0
        synced = sync_pull_request(
            store,
            settings,
            session_id,
            options,
            token,
            lambda text: _follow_up(session_id, text, mode),
        )
    except (SessionNotFound, DeliveryError, ForgeError, KestrelError) as exc:
        report_error(exc)
        return EXIT_ERROR
    finally:
        store.close()
    if synced is None:
        typer.echo("no new review comments or failed checks")
        return 0
    pushed = f"pushed {synced.commit[:10]}" if synced.commit else "nothing to push"
    typer.echo(
        f"{len(synced.comments)} comments and {len(synced.failed_checks)} failed checks sent to "
        f"the session; {pushed}; {len(synced.replied)} replies"
    )
    for text in synced.proposed:
        typer.echo(f"a convention to remember? {text}")
    if synced.proposed:
        typer.echo(f"keep them for later sessions: kestrel memory accept {raw_id}")
    return 0


def _follow_up(session_id: str, text: str, mode: str) -> None:
    """Run the follow-up in the session, headless, its output shown here."""
    command = [sys.executable, "-m", "kestrel", "resume", session_id, text, "-p"]
    command += ["--output-format", "text", "--permission-mode", mode]
    done = subprocess.run(command, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        from kestrel.delivery.branch import DeliveryError

        raise DeliveryError(
            f"the follow-up run ended with exit code {done.returncode}; nothing was pushed "
            f"(see `kestrel sessions show {session_id}`)"
        )
