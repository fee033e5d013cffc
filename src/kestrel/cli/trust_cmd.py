"""`kestrel trust`: let a repository's settings file set what could run commands on this machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kestrel.protocol.errors import ConfigError
from kestrel.settings_trust import shown
from kestrel.settings_trust_actions import project_files, review, revoke, store_for, trust
from kestrel.settings_trust_store import TrustStore

EXIT_ERROR = 1
EXIT_SETTINGS = 2


def trust_command(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="A project folder or one of its .kestrel/settings*.toml files (default: here)."
        ),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="List the trusted files and whether they changed.")
    ] = False,
    revoke_: Annotated[
        bool, typer.Option("--revoke", help="Forget the trust of PATH's settings files.")
    ] = False,
) -> None:
    """Trust this repository's .kestrel settings files as they are now (hooks, sandbox, ...)."""
    store = store_for(env=os.environ, home=Path.home())
    where = path or Path.cwd()
    try:
        if list_ and revoke_:
            raise typer.BadParameter("give --list or --revoke, not both")
        if list_:
            code = _list(store)
        elif revoke_:
            code = _revoke(where, store)
        else:
            code = _trust(where, store)
    except ConfigError as exc:
        typer.echo(f"kestrel: {exc}", err=True)
        raise typer.Exit(EXIT_SETTINGS) from None
    raise typer.Exit(code)


def _trust(where: Path, store: TrustStore) -> int:
    files = project_files(where)
    if not files:
        typer.echo(
            f"kestrel: no .kestrel/settings.toml, settings.local.toml or .mcp.json for {where}",
            err=True,
        )
        return EXIT_ERROR
    reviews = [review(path) for path in files]
    store.read()  # A corrupt or unsafe store is reported before anything is printed as trusted.
    for r in reviews:
        if not r.findings:
            typer.echo(f"{r.path}: sets nothing that needs trust")
            continue
        typer.echo(f"{r.path} (sha256 {r.sha256[:16]}): accepting")
        typer.echo("\n".join(f"  {finding.line()}" for finding in r.findings))
    trust(reviews, store)
    if any(r.findings for r in reviews):
        typer.echo(
            f"trusted (recorded in {store.path}); any change to a file needs `kestrel trust` again"
        )
    return 0


def _revoke(where: Path, store: TrustStore) -> int:
    gone = revoke(where, store)
    if not gone:
        typer.echo(f"kestrel: no trusted settings file for {where}", err=True)
        return EXIT_ERROR
    typer.echo("\n".join(f"revoked {shown(name)}" for name in gone))
    return 0


def _list(store: TrustStore) -> int:
    records = store.read()
    if not records:
        typer.echo(f"no trusted settings files (store: {store.path})")
    for name, record in sorted(records.items()):
        state = _state(Path(name), record.sha256)
        typer.echo(f"{shown(name)}  sha256 {record.sha256[:16]}  {record.trusted_at}  {state}")
    return 0


def _state(path: Path, sha256: str) -> str:
    try:
        current = review(path)
    except ConfigError:
        return "missing or unreadable" if not path.is_file() else "changed (not valid TOML)"
    return "trusted" if current.sha256 == sha256 else "changed since trusted (needs trust again)"
