"""`kestrel sandbox run` (try a command in the sandbox) and the sandbox probe's full report."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from kestrel.cli.doctor_view import view_settings
from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig, SandboxUnavailable
from kestrel.sandbox.limits import Limits
from kestrel.sandbox.probe import ProbeReport
from kestrel.settings_limits import SandboxLimitSettings
from kestrel.settings_load import load_settings

EXIT_TIMED_OUT = 124
EXIT_NO_SANDBOX = 125

sandbox_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Run commands in Kestrel's sandbox.",
)


def render_report(report: ProbeReport) -> str:
    """The sandbox probe's findings as plain lines: checks, then fixes, then notes."""
    cgroups = (
        f"v{report.cgroup_version}, writable: {', '.join(report.cgroup_controllers) or 'none'}"
        if report.cgroup_version
        else "not found"
    )
    lines = [
        _check("bubblewrap", report.bwrap_path is not None, report.bwrap_path or "not found"),
        _check("version", report.bwrap_version is not None, report.bwrap_version or "unknown"),
        _check("user namespaces", report.userns, "usable" if report.userns else "not usable"),
        _check("sandbox starts", report.sandbox_starts, "yes" if report.sandbox_starts else "no"),
        _check("seccomp filter", report.seccomp, "in force" if report.seccomp else "not in force"),
        f"  info  cgroups: {cgroups}",
        f"  info  landlock: {'available' if report.landlock else 'not available'}",
    ]
    if not report.sandbox_starts and report.trial_output.strip():
        lines.append("sandbox output:\n" + report.trial_output.rstrip())
    lines += [f"fix: {fix}" for fix in report.fixes()]
    lines += [f"note: {note}" for note in report.notes()]
    lines.append("sandbox: ready" if report.ok else "sandbox: NOT ready")
    return "\n".join(lines)


def _check(name: str, passed: bool, detail: str) -> str:
    return f"  {'ok  ' if passed else 'FAIL'}  {name}: {detail}"


@sandbox_app.command("run")
def run_command(
    command: Annotated[
        list[str], typer.Argument(help="The command: one shell string, or words to quote.")
    ],
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", help="The writable folder (default: here).", file_okay=False, exists=True
        ),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds before it is killed.")] = 60,
    network: Annotated[
        Literal["none", "host", "allowlist"],
        typer.Option("--network", help="none (default), host, or allowlist (see --allow-host)."),
    ] = "none",
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="With --network allowlist: a host name commands may reach, exactly (*.x: any "
            "name under x); "
            "may be given several times.",
        ),
    ] = None,
) -> None:
    """Run COMMAND in the sandbox with WORKSPACE writable, e.g. `kestrel sandbox run -- ls /`."""
    root = (workspace or Path.cwd()).resolve()
    line = command[0] if len(command) == 1 else shlex.join(command)
    if network == "allowlist" and not allow_host:
        typer.echo("kestrel: --network allowlist needs at least one --allow-host HOST", err=True)
        raise typer.Exit(2)
    data, view, problem = view_settings(root)
    if problem:
        typer.echo(f"kestrel: {problem}; the sandbox shows its default view", err=True)
    config = SandboxConfig(masked_paths=(data,), view=view, limits=_limits(root))
    executor = BwrapExecutor(root, network=network, allowed_hosts=allow_host or (), config=config)
    try:
        result = asyncio.run(
            executor.run(line, cwd=root, timeout_s=timeout, on_output=_write_through)
        )
    except SandboxUnavailable as exc:
        typer.echo(f"kestrel: {exc}; run `kestrel doctor`", err=True)
        raise typer.Exit(EXIT_NO_SANDBOX) from None
    if result.timed_out:
        typer.echo(f"kestrel: timed out after {timeout:g} s", err=True)
        raise typer.Exit(EXIT_TIMED_OUT)
    raise typer.Exit(result.exit_code)


def _limits(root: Path) -> Limits:
    """The `[sandbox_limits]` the settings for `root` ask for (the defaults if they are broken,
    which the view's check has already said)."""
    try:
        settings = load_settings(root, env=os.environ, flags={}, home=Path.home())
    except ConfigError:
        return SandboxLimitSettings().limits()
    return settings.sandbox_limits.limits()


def _write_through(stream: Literal["stdout", "stderr"], text: str) -> None:
    target = sys.stdout if stream == "stdout" else sys.stderr
    target.write(text)
    target.flush()
