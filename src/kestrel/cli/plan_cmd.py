"""`kestrel plan show|approve|reject`: decide on the plan a session proposed in plan mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kestrel import app as composition
from kestrel.agent.planning import PlanNotFound, waiting_plan
from kestrel.agent.state import replay
from kestrel.cli.drive import EXIT_USAGE, OutputFormat, report_error
from kestrel.cli.plan_review import PlanChoice
from kestrel.cli.session_runner import RunRequest, run_request
from kestrel.protocol.errors import ConfigError, SessionNotFound
from kestrel.protocol.events import PermissionMode
from kestrel.service.decisions import plan_as_json
from kestrel.settings_load import load_settings

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="Show, approve or reject the plan a session proposed in plan mode (kestrel --plan).",
)

SessionArg = Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")]
PlanId = Annotated[
    str | None,
    typer.Option("--plan-id", help="The plan's id (or a prefix); refuses if another waits."),
]
Print = Annotated[
    bool,
    typer.Option("--print", "-p", help="Headless: no questions, print the result and exit."),
]
Format = Annotated[
    OutputFormat,
    typer.Option("--output-format", help="With -p: text, json or stream-json."),
]


@app.command("show")
def show(session_id: SessionArg) -> None:
    """Print the plan waiting for a decision as JSON, the form `approve --file` takes back."""
    try:
        settings = load_settings(Path.cwd(), env=os.environ, flags={}, home=Path.home())
        store = composition.open_store(settings)
        try:
            sid = store.resolve(session_id)
            plan = waiting_plan(replay(store.read(sid)))
        finally:
            store.close()
    except (ConfigError, SessionNotFound, PlanNotFound) as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc
    print(plan_as_json(plan))


@app.command("approve")
def approve(
    session_id: SessionArg,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help="Approve this edited plan instead (JSON: {summary, steps}, as `kestrel plan "
            "show` prints it).",
            dir_okay=False,
        ),
    ] = None,
    permission_mode: Annotated[
        PermissionMode | None,
        typer.Option(
            "--permission-mode",
            help="The mode to continue in (default: the configured one; never plan).",
        ),
    ] = None,
    plan_id: PlanId = None,
    print_mode: Print = False,
    output_format: Format = "text",
) -> None:
    """Approve the plan; the session leaves plan mode and carries it out, step by step."""
    choice = PlanChoice(approve=True, file=file, plan_id=plan_id)
    raise typer.Exit(_decide(session_id, choice, permission_mode, print_mode, output_format))


@app.command("reject")
def reject(
    session_id: SessionArg,
    message: Annotated[
        str, typer.Option("--message", "-m", help="Why: the model is told, and plans again.")
    ],
    plan_id: PlanId = None,
    print_mode: Print = False,
    output_format: Format = "text",
) -> None:
    """Reject the plan; the reason goes back to the model, which proposes a new one."""
    choice = PlanChoice(approve=False, reason=message, plan_id=plan_id)
    raise typer.Exit(_decide(session_id, choice, None, print_mode, output_format))


def _decide(
    session_id: str,
    choice: PlanChoice,
    mode: PermissionMode | None,
    headless: bool,
    output_format: OutputFormat,
) -> int:
    request = RunRequest(
        task=None,
        headless=headless,
        output_format=output_format,
        model=None,
        max_turns=None,
        max_cost=None,
        cwd=None,
        permission_mode=mode,
        resume_id=session_id,
        plan_choice=choice,
    )
    return run_request(request)
