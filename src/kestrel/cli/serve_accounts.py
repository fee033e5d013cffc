"""`kestrel serve tokens list` and `kestrel serve tenants list|set-plan`: what an operator needs
to see who may use the server, and to move a tenant to another plan."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from kestrel.cli.exit_codes import EXIT_USAGE, report_error
from kestrel.protocol.errors import KestrelError

if TYPE_CHECKING:
    from kestrel.server.accounts import AccountStore

T = TypeVar("T")

tenants_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True)


def store_url() -> str | None:
    """Cluster mode's database: `store_url` in the settings or KESTREL_STORE_URL (never a
    command-line option, which other users of the machine could read)."""
    from kestrel.service.sessions import settings_for

    return settings_for(Path.cwd(), {}).store_url


def open_accounts(folder: Path) -> AccountStore:
    """The account store: the cluster's database in cluster mode, else the data folder's file."""
    from kestrel.server.accounts import AccountStore

    url = store_url()
    if url is None:
        folder.mkdir(parents=True, exist_ok=True)
        return AccountStore(folder / "accounts.db")
    from kestrel.server.sql_pg import open_database

    return AccountStore(open_database(url))


def with_accounts(data_dir: Path, use: Callable[[AccountStore], T]) -> T:
    """Run `use` on the server's account store (the cluster's in cluster mode); a bad store is
    one line and exit code 2."""
    if store_url() is None and not (data_dir / "accounts.db").exists():
        report_error(KestrelError(f"no accounts yet in {data_dir}: create a token first"))
        raise typer.Exit(EXIT_USAGE)
    try:
        with open_accounts(data_dir) as accounts:
            return use(accounts)
    except KestrelError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return dt.datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M")


def list_tokens(data_dir: Path, tenant_id: str | None) -> None:
    """Print the tokens of one tenant, or of every tenant: id, tenant, user, prefix, dates."""

    def rows(accounts: AccountStore) -> list[str]:
        tenants = [accounts.tenant(tenant_id)] if tenant_id else accounts.tenants()
        lines = []
        for tenant in tenants:
            for token in accounts.tokens(tenant.id):
                revoked = f"revoked {_when(token.revoked_at)}" if token.revoked else "active"
                lines.append(
                    f"{token.id}  {tenant.id} ({tenant.name})  user {token.user_id}  "
                    f"{token.prefix}…  created {_when(token.created_at)}  {revoked}"
                )
        return lines

    lines = with_accounts(data_dir, rows)
    print("\n".join(lines) if lines else "no tokens")


DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="The server's data folder (as given to kestrel serve)."),
]


def register(resolve: Callable[[Path | None], Path]) -> None:
    """Add the `tenants` commands, resolving `--data-dir` with `resolve`."""

    @tenants_app.command("list")
    def tenants_list(data_dir: DataDir = None) -> None:
        """Every tenant: id, name, plan and when it was made."""

        def rows(accounts: AccountStore) -> list[str]:
            return [
                f"{t.id}  {t.name}  plan {t.plan}  created {_when(t.created_at)}"
                for t in accounts.tenants()
            ]

        lines = with_accounts(resolve(data_dir), rows)
        print("\n".join(lines) if lines else "no tenants")

    @tenants_app.command("set-plan")
    def tenants_set_plan(
        tenant_id: Annotated[str, typer.Argument(help="The tenant's id.")],
        plan: Annotated[
            str, typer.Argument(help="The plan's name (free, pro, team, or one of --plans).")
        ],
        data_dir: DataDir = None,
    ) -> None:
        """Move a tenant to another plan; its next request is held to the new plan's limits."""
        moved = with_accounts(resolve(data_dir), lambda a: a.set_plan(tenant_id, plan))
        print(f"tenant {moved.id} ({moved.name}) is now on plan {moved.plan}")
