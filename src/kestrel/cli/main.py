"""The `kestrel` command: run a task, resume a session, inspect sessions, or run the demo."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from kestrel.cli.command_line import CONTEXT, dispatch, positive, show_version
from kestrel.cli.exit_codes import OutputFormat
from kestrel.cli.idle_flags import StrictCommand
from kestrel.protocol.events_base import PermissionMode

SUBCOMMANDS = (
    "resume",
    "rewind",
    "checkpoints",
    "diff",
    "apply",
    "discard",
    "sessions",
    "demo",
    "doctor",
    "sandbox",
    "index",
    "search",
    "map",
    "eval",
    "plan",
    "trust",
    "approve",
    "cancel",
    "serve",
    "mcp",
    "acp",
    "pr",
    "memory",
    "worker",
)

_EPILOG = (
    "Other commands: kestrel resume ID [MESSAGE] · kestrel checkpoints ID · kestrel rewind ID "
    "CHECKPOINT [MESSAGE] · kestrel diff|apply|discard ID · kestrel sessions list|show|export · "
    "kestrel index · kestrel search QUERY · kestrel map · kestrel eval run|report|compare · "
    "kestrel plan show|approve|reject ID · kestrel approve ID [--deny] · kestrel cancel ID · "
    "kestrel trust [--list|--revoke] · kestrel doctor · kestrel mcp serve · kestrel acp · "
    "kestrel pr [sync] ID · kestrel memory list|add|rm|accept · kestrel worker · "
    "kestrel demo · kestrel help COMMAND.  Exit codes: 0 done, 1 error, 2 bad usage or settings, "
    "3 a budget or loop limit stopped the session, 130 cancelled (Ctrl-C), 143 stopped by SIGTERM."
)

Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="PROVIDER:MODEL, e.g. "
        "anthropic:claude-sonnet-4-5, openai:gpt-4.1, scripted:script.json.",
    ),
]
MaxTurns = Annotated[
    int | None, typer.Option("--max-turns", help="Stop after this many model turns.", min=1)
]
MaxCost = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        help="Stop once this many US dollars are spent (more than 0).",
        callback=positive,
    ),
]
Cwd = Annotated[
    Path | None,
    typer.Option(
        "--cwd",
        help="Work in this directory instead of the current one.",
        file_okay=False,
        exists=True,
    ),
]
Mode = Annotated[
    PermissionMode | None,
    typer.Option(
        "--permission-mode",
        help="default: ask "
        "before edits and commands; accept-edits: ask before commands; plan: read only; "
        "bypass: ask only about dangerous actions (needs --sandbox bwrap).",
    ),
]
Sandbox = Annotated[
    Literal["none", "bwrap"] | None,
    typer.Option(
        "--sandbox",
        help="Where commands run: bwrap (the default: confined to the workspace, host "
        "read-only, no network, secrets hidden) or none (as you, unconfined; every command "
        "is then asked about unless a rule allows it).",
    ),
]
WorkspaceMode = Annotated[
    Literal["overlay", "direct"] | None,
    typer.Option(
        "--workspace",
        help="overlay (the default): edit an overlay of the checkout, which changes only when "
        "the change is applied (at the end when the mode allows edits, else with `kestrel "
        "apply ID`); direct: edit the checkout itself.",
    ),
]
Allow = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        help='A permission rule to add for this run, e.g. "Bash(pytest:*)" or "Edit(src/**)"; '
        "may be given several times. Rules from settings files still apply.",
    ),
]
Deny = Annotated[
    list[str] | None,
    typer.Option(
        "--deny",
        help='A rule for what this run must never do, e.g. "Bash(git push:*)" or "Read(.env)"; '
        "may be given several times. Deny beats every allow.",
    ),
]
Print = Annotated[
    bool,
    typer.Option(
        "--print",
        "-p",
        help="Headless: no questions, print the result and exit (for scripts and CI).",
    ),
]
WaitForApprovals = Annotated[
    bool,
    typer.Option(
        "--wait-for-approvals",
        help="With -p: wait for each permission question to be answered from another terminal "
        "(`kestrel approve ID`) or a client of the service, instead of denying it.",
    ),
]
Format = Annotated[
    OutputFormat,
    typer.Option(
        "--output-format",
        help="With -p: text (the final "
        "answer), json (one result object) or stream-json (every event, one JSON "
        "object per line, as it happens).",
    ),
]

Version = Annotated[
    bool,
    typer.Option(
        "--version", help="Print Kestrel's version and exit.", is_eager=True, callback=show_version
    ),
]

run_app = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=CONTEXT)
commands_app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT
)
# Commands from other modules, added to `commands_app` only when one runs: `kestrel --help` and
# `kestrel sessions list` must not import the model SDKs, the code index or the agent loop.
_ELSEWHERE: dict[str, tuple[str, str]] = {
    "sessions": ("kestrel.cli.sessions", "app"),
    "sandbox": ("kestrel.cli.sandbox_cmd", "sandbox_app"),
    "eval": ("kestrel.cli.eval_cmd", "app"),
    "plan": ("kestrel.cli.plan_cmd", "app"),
    "doctor": ("kestrel.cli.doctor_cmd", "doctor_command"),
    "index": ("kestrel.cli.index_cmd", "index_command"),
    "search": ("kestrel.cli.index_cmd", "search_command"),
    "map": ("kestrel.cli.index_cmd", "map_command"),
    "diff": ("kestrel.cli.review_cmd", "diff_command"),
    "apply": ("kestrel.cli.review_cmd", "apply_command"),
    "discard": ("kestrel.cli.review_cmd", "discard_command"),
    "trust": ("kestrel.cli.trust_cmd", "trust_command"),
    "approve": ("kestrel.cli.approve_cmd", "approve_command"),
    "cancel": ("kestrel.cli.approve_cmd", "cancel_command"),
    "serve": ("kestrel.cli.serve_cmd", "serve_app"),
    "mcp": ("kestrel.cli.mcp_cmd", "mcp_app"),
    "acp": ("kestrel.cli.acp_cmd", "acp_command"),
    "pr": ("kestrel.cli.pr_cmd", "pr_command"),
    "memory": ("kestrel.cli.memory_cmd", "app"),
    "worker": ("kestrel.cli.worker_cmd", "worker_command"),
}
_added: set[str] = set()


def _add_commands(names: list[str]) -> None:
    """Import and add the commands `names` from other modules (each once)."""
    for name in names:
        if name in _added or name not in _ELSEWHERE:
            continue
        module, attribute = _ELSEWHERE[name]
        found = getattr(importlib.import_module(module), attribute)
        if isinstance(found, typer.Typer):
            commands_app.add_typer(found, name=name)
        else:
            commands_app.command(name)(found)
        _added.add(name)


def _commands(args: list[str], **options: Any) -> None:
    """`commands_app`, with the command `args` name added first (every one if it names none)."""
    _add_commands(args[:1] if args[:1] and args[0] in _ELSEWHERE else list(_ELSEWHERE))
    commands_app(args, **options)


@run_app.command(epilog=_EPILOG, cls=StrictCommand)
def run(
    task: Annotated[str | None, typer.Argument(help="What to do, in plain language.")] = None,
    print_mode: Print = False,
    output_format: Format = "text",
    model: Model = None,
    max_turns: MaxTurns = None,
    max_cost: MaxCost = None,
    cwd: Cwd = None,
    permission_mode: Mode = None,
    sandbox: Sandbox = None,
    workspace: WorkspaceMode = None,
    allow: Allow = None,
    deny: Deny = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="Send model requests to this endpoint, e.g. http://127.0.0.1:8080/v1 for a "
            "local llama.cpp, vLLM or Ollama server (the model's provider must speak its API).",
        ),
    ] = None,
    max_tokens_field: Annotated[
        Literal["max_tokens", "max_completion_tokens"] | None,
        typer.Option(
            "--max-tokens-field",
            help="The request field for the output limit on an OpenAI-compatible server: "
            "max_tokens (llama.cpp, vLLM, Ollama, older servers) or max_completion_tokens "
            "(OpenAI); detected when left out.",
        ),
    ] = None,
    continue_: Annotated[
        bool,
        typer.Option(
            "--continue", "-c", help="Continue the most recent session in this directory."
        ),
    ] = False,
    wait_for_approvals: WaitForApprovals = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Plan first: explore read-only and propose a plan to approve, edit or reject "
            "before anything is changed (headless: decide with `kestrel plan approve|reject`).",
        ),
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Line mode in a terminal too: print events line by line and ask on stdin "
            "instead of opening the full-screen view.",
        ),
    ] = False,
    version: Version = False,
) -> None:
    """Kestrel: give it a task; it finds the code, edits it, runs the tests, and shows the diff."""
    from kestrel.cli.session_runner import RunRequest, run_request
    from kestrel.cli.tui_cmd import launch_tui, wants_tui

    request = RunRequest(
        task=task,
        headless=print_mode,
        output_format=output_format,
        model=model,
        max_turns=max_turns,
        max_cost=max_cost,
        cwd=cwd,
        permission_mode=permission_mode,
        sandbox=sandbox,
        workspace=workspace,
        allow=tuple(allow or ()),
        deny=tuple(deny or ()),
        continue_latest=continue_,
        base_url=base_url,
        max_tokens_field=max_tokens_field,
        plan=plan,
        wait_for_approvals=wait_for_approvals,
    )
    if wants_tui(headless=print_mode, plain=plain):
        raise typer.Exit(launch_tui(request))
    raise typer.Exit(run_request(request))


@commands_app.command(cls=StrictCommand)
def resume(
    session_id: Annotated[
        str | None,
        typer.Argument(
            help="The session id, or a unique prefix of it; left out on a terminal, pick one of "
            "this repository's recent sessions.",
            show_default=False,
        ),
    ] = None,
    message: Annotated[str | None, typer.Argument(help="A follow-up message.")] = None,
    print_mode: Print = False,
    output_format: Format = "text",
    model: Model = None,
    max_turns: MaxTurns = None,
    max_cost: MaxCost = None,
    permission_mode: Mode = None,
    sandbox: Sandbox = None,
    workspace: WorkspaceMode = None,
    allow: Allow = None,
    deny: Deny = None,
    wait_for_approvals: WaitForApprovals = False,
) -> None:
    """Continue a session from its log, after a crash, a cancel, a limit, or to follow up."""
    from kestrel.cli import sessions
    from kestrel.cli.session_runner import RunRequest, run_request

    if session_id is None:
        session_id = sessions.choose_session(headless=print_mode)
    request = RunRequest(
        task=message,
        headless=print_mode,
        output_format=output_format,
        model=model,
        max_turns=max_turns,
        max_cost=max_cost,
        cwd=None,
        permission_mode=permission_mode,
        sandbox=sandbox,
        workspace=workspace,
        allow=tuple(allow or ()),
        deny=tuple(deny or ()),
        resume_id=session_id,
        wait_for_approvals=wait_for_approvals,
    )
    raise typer.Exit(run_request(request))


@commands_app.command(cls=StrictCommand)
def rewind(
    session_id: Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")],
    checkpoint: Annotated[
        str, typer.Argument(help="A checkpoint id (or prefix) from `kestrel checkpoints ID`.")
    ],
    message: Annotated[str | None, typer.Argument(help="What to do from there.")] = None,
    print_mode: Print = False,
    output_format: Format = "text",
    permission_mode: Mode = None,
    allow: Allow = None,
    deny: Deny = None,
) -> None:
    """Restore the files of a checkpoint and continue the conversation from that point."""
    from kestrel.cli.session_runner import RunRequest, run_request

    request = RunRequest(
        task=message,
        headless=print_mode,
        output_format=output_format,
        model=None,
        max_turns=None,
        max_cost=None,
        cwd=None,
        permission_mode=permission_mode,
        allow=tuple(allow or ()),
        deny=tuple(deny or ()),
        resume_id=session_id,
        rewind_to=checkpoint,
    )
    raise typer.Exit(run_request(request))


@commands_app.command()
def checkpoints(
    session_id: Annotated[str, typer.Argument(help="The session id, or a unique prefix of it.")],
) -> None:
    """The session's checkpoints, oldest first, with the files each one changed."""
    from kestrel.cli.sessions import print_checkpoints

    print_checkpoints(session_id)


@commands_app.command()
def demo(
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo project afterwards.")] = False,
) -> None:
    """Fix a real bug in a small bundled project, with a scripted model (no API key needed)."""
    from kestrel.cli.demo import run_demo

    raise typer.Exit(run_demo(keep=keep))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `kestrel` console script."""
    args = sys.argv[1:] if argv is None else argv
    dispatch(args, run_app=run_app, commands_app=_commands, commands=SUBCOMMANDS)
