"""`kestrel doctor`: check everything a first run needs and say how to fix what is missing.

Settings files, model credentials, the sandbox, git, ripgrep, the data directory and its disk,
and the repository's index: each is a `DoctorCheck` line (ok, warn, FAIL with a fix, or info).
The command exits 0 when nothing failed, 1 otherwise, and never needs the network unless
`--model` names a model whose endpoint can be probed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from kestrel.app_sandbox import data_dir
from kestrel.cli.doctor_checks import (
    credential_checks,
    data_checks,
    git_checks,
    index_check,
    ripgrep_check,
    sandbox_checks,
    settings_checks,
)
from kestrel.cli.doctor_model import DoctorCheck
from kestrel.cli.doctor_view import doctor_view
from kestrel.cli.repair_cmd import repair_store, store_check
from kestrel.cli.session_list import project_root
from kestrel.context.index_store import default_cache_dir
from kestrel.sandbox.probe import probe
from kestrel.settings_load import LayerReport, check_settings
from kestrel.store import default_data_dir

_LABELS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "info": "info"}
_INDENT = " " * 8


def doctor_command(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Check this model (PROVIDER:MODEL) instead of the configured ones; its "
            "endpoint may be reached to see what it is.",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="Reach the model at this endpoint, as `kestrel --base-url`."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object {ok, checks}, for scripts.")
    ] = False,
    view: Annotated[
        bool, typer.Option("--view", help="Also list every mount a sandboxed command sees.")
    ] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Repair a damaged event store: save what can be read into a new one and keep "
            "the damaged file beside it; nothing else is checked.",
        ),
    ] = False,
) -> None:
    """Check settings, model credentials, the sandbox, git, ripgrep, disk and the index."""
    cwd = Path.cwd().resolve()
    if repair:
        _, settings = check_settings(cwd, env=os.environ, flags={}, home=Path.home())
        data = data_dir(settings) if settings else default_data_dir(os.environ, Path.home())
        raise typer.Exit(repair_store(data))
    checks = run_checks(cwd, env=os.environ, home=Path.home(), model=model, base_url=base_url)
    ok = passed(checks)
    if as_json:
        typer.echo(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        typer.echo(render_checks(checks, cwd))
        if view:
            typer.echo("\n".join(doctor_view(cwd)))
    raise typer.Exit(0 if ok else 1)


def run_checks(
    cwd: Path,
    *,
    env: Mapping[str, str],
    home: Path,
    model: str | None = None,
    base_url: str | None = None,
) -> list[DoctorCheck]:
    """Every check for a run in `cwd`, in the order the report shows them."""
    flags: dict[str, object] = {"model": model} if model else {}
    if base_url:
        flags["base_url"] = base_url
    reports, settings = check_settings(cwd, env=env, flags=flags, home=home)
    checks = settings_checks(reports, env=env, home=home)
    if settings is None or _flag_problems(reports):
        why = "the settings have problems (above)"
        checks.append(DoctorCheck("credentials", "warn", f"not checked: {why}"))
    else:
        checks += credential_checks(settings, env, model)
    report = asyncio.run(probe())
    checks += sandbox_checks(report, settings.sandbox if settings else "bwrap")
    checks += git_checks(cwd)
    checks.append(ripgrep_check())
    data = data_dir(settings) if settings else default_data_dir(env, home)
    checks += data_checks(data)
    checks.append(store_check(data))
    root = project_root(cwd)
    roots = [root] if root == cwd else [root, cwd]
    checks.append(index_check(roots, default_cache_dir(env, home), time.time()))
    return checks


def _flag_problems(reports: Sequence[LayerReport]) -> bool:
    return any(r.origin == "command line" and r.problems for r in reports)


def passed(checks: Sequence[DoctorCheck]) -> bool:
    """Whether nothing failed: warnings and notes do not stop a run."""
    return not any(check.status == "fail" for check in checks)


def render_checks(checks: Sequence[DoctorCheck], cwd: Path) -> str:
    """The report as plain lines: a heading, one line per check (fixes under), a verdict."""
    lines = [f"kestrel doctor: what a run in {cwd} needs"]
    for check in checks:
        first, *rest = check.detail.splitlines() or [""]
        lines.append(f"  {_LABELS.get(check.status, check.status)}  {check.name}: {first}")
        lines += [_INDENT + line for line in rest]
        if check.fix and check.status != "ok":
            lines.append(f"{_INDENT}fix: {check.fix}")
    failed = sum(check.status == "fail" for check in checks)
    warned = sum(check.status == "warn" for check in checks)
    warnings = f"{warned} warning{'s' * (warned != 1)}"
    if failed:
        noun = "check" if failed == 1 else "checks"
        lines.append(f"NOT ready: {failed} {noun} failed, {warnings}; each fix is under it")
    else:
        lines.append(f"ready: nothing failed, {warnings}")
    return "\n".join(lines)
