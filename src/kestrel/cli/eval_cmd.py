"""`kestrel eval`: run a suite of tasks, report on a run, compare two runs."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kestrel import app as composition
from kestrel.cli.drive import EXIT_USAGE, report_error
from kestrel.evals.html import write_run_report
from kestrel.evals.report import compare_markdown, markdown, summarize
from kestrel.evals.results import RunFolder, open_run, same_run
from kestrel.evals.runner import EvalConfig, TaskDone, TaskStarted, describe, run_tasks
from kestrel.evals.tasks import Task, find_repository, load_suite, select
from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.probe import probe
from kestrel.settings import Settings
from kestrel.settings_load import load_settings

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="Run Kestrel on a suite of tasks, score each session, report on and compare runs.",
)

RunsDir = Annotated[
    Path | None,
    typer.Option(
        "--runs-dir",
        help="Where run folders live (default: the evals folder in Kestrel's data directory).",
        file_okay=False,
    ),
]


def _settings(**flags: object) -> Settings:
    return load_settings(Path.cwd(), env=os.environ, flags=flags, home=Path.home())


def _runs_dir(given: Path | None, settings: Settings) -> Path:
    return given if given is not None else composition.data_dir(settings) / "evals"


def _guarded(body: Callable[[], None]) -> None:
    """Run a command; bad input ends it with a clear message and exit code 2."""
    try:
        body()
    except ConfigError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from exc


@app.command("run")
def run_command(
    suite: Annotated[Path, typer.Argument(help="The suite: a JSON Lines file of tasks.")],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="PROVIDER:MODEL for every task, e.g. anthropic:claude-sonnet-4-5; "
            "{instance_id} in it is replaced per task (scripted:scripts/{instance_id}.json).",
        ),
    ],
    instances: Annotated[
        list[str] | None,
        typer.Option(
            "--instances",
            "-i",
            help="Run only these instance ids (comma-separated, or the option repeated).",
        ),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="How many tasks run at the same time.", min=1)
    ] = 1,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="Name of the run folder; give an existing run's id to continue it, skipping "
            "its finished tasks (default: the date and time).",
        ),
    ] = None,
    repos: Annotated[
        Path | None,
        typer.Option(
            "--repos",
            help="Folder of local clones or mirrors, one per repository, named owner__name, "
            "owner/name or name.",
            file_okay=False,
        ),
    ] = None,
    runs_dir: RunsDir = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", help="Per task: stop after this many turns.", min=1)
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", help="Per task: stop after this many tokens.", min=1),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost", help="Per task: stop once this many US dollars are spent.", min=0
        ),
    ] = None,
    max_wall: Annotated[
        float | None,
        typer.Option(
            "--max-wall", help="Per task: stop the session after this many seconds.", min=1
        ),
    ] = None,
    task_timeout: Annotated[
        float,
        typer.Option(
            "--task-timeout",
            help="Per task: stop the agent's process after this many seconds (counted as out "
            "of budget).",
            min=1,
        ),
    ] = 3600.0,
    test_cmd: Annotated[
        str | None,
        typer.Option(
            "--test-cmd",
            help="The command the test ids are given to, for tasks that name none "
            '(default: "python3 -m pytest -rA -p no:cacheprovider").',
        ),
    ] = None,
    sandbox: Annotated[
        Literal["none", "bwrap"] | None,
        typer.Option(
            "--sandbox",
            help="Where setup, the agent's commands and the tests run: bwrap (the default) or "
            "none (unconfined, as you).",
        ),
    ] = None,
) -> None:
    """Run Kestrel on every task of SUITE and score each session from its log."""

    def body() -> None:
        settings = _settings(model=model, sandbox=sandbox)
        tasks = select(load_suite(suite), _split(instances or []))
        for task in tasks:
            find_repository(task, repos)  # Every repository is there before anything starts.
        composition.check_credentials(settings, os.environ)
        if settings.sandbox == "bwrap":
            _check_sandbox()
        config = EvalConfig(
            model=model,
            sandbox=settings.sandbox,
            max_turns=max_turns,
            max_tokens=max_tokens,
            max_cost_usd=max_cost,
            max_wall_s=max_wall,
            task_timeout_s=task_timeout,
            test_cmd=test_cmd,
        )
        name = run_id or dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = RunFolder(_runs_dir(runs_dir, settings) / name)
        ids = [task.instance_id for task in tasks]
        run = _begin(folder, suite, config, ids)
        _execute(folder, tasks, config, repos, jobs)
        run["finished"] = _now()
        folder.write_run(run)
        summary = summarize([r for r in folder.results() if r["instance_id"] in set(ids)])
        print(
            f"Run {folder.run_id}: {summary.resolved} of {summary.tasks} resolved; "
            f"results in {folder.root}. Report: kestrel eval report {folder.root}"
        )

    _guarded(body)


def _split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _check_sandbox() -> None:
    report = asyncio.run(probe())
    if not report.ok:
        raise ConfigError(
            "the sandbox cannot start here: " + "; ".join(report.fixes()) + ". `kestrel doctor` "
            "shows the details; to run the tasks unconfined, as yourself, pass --sandbox none"
        )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _begin(folder: RunFolder, suite: Path, config: EvalConfig, ids: list[str]) -> dict[str, Any]:
    """Write `run.json` for a new run, or check that a continued run asks for the same thing."""
    wanted: dict[str, Any] = {
        "run_id": folder.run_id,
        "suite": str(suite.resolve()),
        "model": config.model,
        "settings": config.as_json(),
    }
    if folder.run_file.is_file():
        run = folder.read_run()
        same_run(run, wanted, ("suite", "model", "settings"))
        known = list(run.get("task_ids") or [])
        run["task_ids"] = known + [i for i in ids if i not in known]
        run["finished"] = None
    else:
        run = {**wanted, "started": _now(), "finished": None, "task_ids": ids}
    folder.write_run(run)
    return run


def _execute(
    folder: RunFolder, tasks: list[Task], config: EvalConfig, repos: Path | None, jobs: int
) -> None:
    console = Console(stderr=True, highlight=False)
    done = folder.finished_ids()
    todo = [t for t in tasks if t.instance_id not in done]
    skipped = len(tasks) - len(todo)
    console.print(
        f"Run {escape(folder.run_id)}: {len(todo)} task(s) to run"
        + (f", {skipped} already finished (skipped)" if skipped else "")
        + (
            " — the model is SCRIPTED (no real model)"
            if config.model.startswith("scripted:")
            else ""
        ),
        soft_wrap=True,
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        bar = progress.add_task("tasks", total=len(todo))
        finished = 0

        def on_progress(event: TaskStarted | TaskDone) -> None:
            nonlocal finished
            if isinstance(event, TaskStarted):
                progress.update(bar, description=f"running {event.instance_id}")
                return
            finished += 1
            progress.advance(bar)
            progress.console.print(
                f"[{finished}/{len(todo)}] {escape(describe(event.result))}", soft_wrap=True
            )

        run_tasks(folder, todo, config, repos=repos, jobs=jobs, on_progress=on_progress)


@app.command("report")
def report_command(
    run: Annotated[str, typer.Argument(help="The run: its folder, or its id in the runs folder.")],
    runs_dir: RunsDir = None,
) -> None:
    """Write report.md, and report.html with a trajectory page per task, into the run's folder."""

    def body() -> None:
        folder = open_run(_runs_dir(runs_dir, _settings()), run)
        data, results = folder.read_run(), folder.results()
        path = folder.root / "report.md"
        path.write_text(markdown(data, results), encoding="utf-8")
        print(f"Wrote {path}")
        print(f"Wrote {write_run_report(folder.root)}")

    _guarded(body)


@app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="The first run: its folder or its id.")],
    run_b: Annotated[str, typer.Argument(help="The second run: its folder or its id.")],
    runs_dir: RunsDir = None,
) -> None:
    """Per-task differences between two runs, and which metrics moved."""

    def body() -> None:
        where = _runs_dir(runs_dir, _settings())
        a, b = open_run(where, run_a), open_run(where, run_b)
        print(compare_markdown(a.read_run(), a.results(), b.read_run(), b.results()), end="")

    _guarded(body)
