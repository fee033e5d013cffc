"""`kestrel serve`: the hosted mode on this machine (HTTP API, SQLite, a worker pool) or as one
stateless API of a cluster (`store_url` names its PostgreSQL database), and
`kestrel serve tokens|tenants` to manage who may use it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.cli.serve_accounts import list_tokens, open_accounts, register, tenants_app
from kestrel.cli.serve_accounts import store_url as cluster_store_url
from kestrel.protocol.errors import KestrelError

if TYPE_CHECKING:
    from kestrel.server.plans import Plan

serve_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    invoke_without_command=True,
    help="Serve Kestrel's HTTP API: sessions for tenants with API tokens.",
)
tokens_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True)
serve_app.add_typer(tokens_app, name="tokens", help="Create, list or revoke API tokens.")
serve_app.add_typer(tenants_app, name="tenants", help="List tenants or change their plan.")

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Where the server keeps everything (default: beside the "
        "local sessions, in a folder named server; in cluster mode, the data folder "
        "the workers share).",
    ),
]


def _data_dir(given: Path | None) -> Path:
    if given is not None:
        return given.resolve()
    from kestrel.store import default_data_dir

    return default_data_dir(os.environ) / "server"


def _served_dir(given: Path | None, store_url: str | None) -> Path:
    """The server's data folder: in cluster mode by default the workers' own (`data_dir`,
    KESTREL_DATA_DIR), since both must work on the same checkouts."""
    if given is not None or store_url is None:
        return _data_dir(given)
    from kestrel.app_store import data_dir
    from kestrel.service.sessions import settings_for

    return data_dir(settings_for(Path.cwd(), {})).resolve()


@serve_app.callback()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port; 0 picks a free one.")] = 8420,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Sessions run at once.")] = 2,
    data_dir: DataDir = None,
    allowed_root: Annotated[
        list[Path] | None,
        typer.Option("--allowed-root", help="A folder sessions may be created from by path."),
    ] = None,
    plans_file: Annotated[
        Path | None,
        typer.Option(
            "--plans",
            help="A TOML file of plans ([name] tables: tier, max_concurrent_sessions, ...), "
            "added to (or replacing) free, pro and team.",
            dir_okay=False,
        ),
    ] = None,
    allow_scripted_models: Annotated[
        Path | None,
        typer.Option(
            "--allow-scripted-models",
            help="Allow `scripted:` models whose files are in this folder (tests, demos).",
        ),
    ] = None,
    allow_git_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-git-host",
            help="A host (glob) git URLs may name even though it is private or local; "
            "by default sessions clone only from public hosts.",
        ),
    ] = None,
    min_free_mb: Annotated[
        int,
        typer.Option(
            "--min-free-mb",
            min=0,
            help="Refuse new sessions (503) while the data folder's disk has less free space.",
        ),
    ] = 256,
) -> None:
    """Start the server; it prints the address once it listens. SIGTERM drains it."""
    if ctx.invoked_subcommand is not None:
        return
    import socket

    import uvicorn

    from kestrel.server.app import create_app
    from kestrel.server.hosting import ServerConfig

    try:
        plans = _plans(plans_file)
        store_url = cluster_store_url()
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    config = ServerConfig(
        store_url=store_url,
        plans=plans,
        data_dir=_served_dir(data_dir, store_url),
        workers=workers,
        allowed_roots=tuple(p.resolve() for p in allowed_root or ()),
        scripted_models_dir=allow_scripted_models.resolve() if allow_scripted_models else None,
        min_free_bytes=min_free_mb * 1024 * 1024,
        allowed_git_hosts=tuple(allow_git_host or ()),
    )
    listener = socket.create_server((host, port))
    bound = listener.getsockname()[1]
    print(f"kestrel serve: listening on http://{host}:{bound}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=10,  # Open streams are closed, not waited for.
        )
    )
    server.run(sockets=[listener])


def _plans(path: Path | None) -> dict[str, Plan]:
    """The built-in plans, with those of the file (if any) added or replacing them."""
    import tomllib

    from kestrel.protocol.errors import ConfigError
    from kestrel.server.plans import DEFAULT_PLANS, plans_from_mapping

    plans = dict(DEFAULT_PLANS)
    if path is None:
        return plans
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the plans: {exc}") from None
    plans.update(plans_from_mapping(data, origin=str(path)))
    return plans


@tokens_app.command("create")
def create_token(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Make a new tenant with this name.")
    ] = None,
    tenant_id: Annotated[
        str | None, typer.Option("--tenant-id", help="Add to this existing tenant instead.")
    ] = None,
    plan: Annotated[str, typer.Option("--plan", help="free, pro or team.")] = "free",
    user: Annotated[str, typer.Option("--user", help="The user's name.")] = "admin",
    admin: Annotated[
        bool, typer.Option("--admin", help="The user administers the tenant.")
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Make a tenant (or use an existing one), a user and an API token; print the token once."""
    if (tenant is None) == (tenant_id is None):
        report_error(
            KestrelError("name a new tenant (--tenant NAME) or an existing one (--tenant-id ID)")
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        with open_accounts(_data_dir(data_dir)) as accounts:
            made = (
                accounts.tenant(tenant_id)
                if tenant_id is not None
                else accounts.create_tenant(tenant or "", plan)
            )
            person = accounts.create_user(made.id, user, "admin" if admin else "member")
            issued = accounts.create_token(person.id)
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    print(f"tenant {made.id} ({made.name}, plan {made.plan}); token {issued.token.id}:")
    print(issued.secret)


@tokens_app.command("list")
def tokens_list(
    tenant_id: Annotated[
        str | None, typer.Option("--tenant-id", help="Only this tenant's tokens.")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """List tokens (never their secrets): id, tenant, user, prefix, created, revoked."""
    list_tokens(_data_dir(data_dir), tenant_id)


@tokens_app.command("revoke")
def revoke_token(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok_...).")],
    data_dir: DataDir = None,
) -> None:
    """Revoke a token: every request with it is refused from now on."""
    try:
        with open_accounts(_data_dir(data_dir)) as accounts:
            accounts.revoke_token(token_id)
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    print(f"revoked {token_id}")


register(_data_dir)
