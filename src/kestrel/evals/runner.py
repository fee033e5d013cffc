"""Run Kestrel on each task of a suite and score it.

Per task, in its own folder: fetch the repository at the task's commit, run the setup commands in
the sandbox, run `kestrel -p` on the problem statement (a separate process with its own data
directory, so its session log is the task's), take the agent's change as a patch, then apply it
and the hidden test patch to a fresh checkout and run the tests there. The result is appended to
`results.jsonl` only once all of that is over.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kestrel import app
from kestrel.evals import checkout
from kestrel.evals.metrics import Metrics, compute
from kestrel.evals.results import RunFolder, Status
from kestrel.evals.tasks import DEFAULT_TEST_CMD, Task, find_repository
from kestrel.evals.testrun import TestOutcome, all_pass, command_for, outcomes
from kestrel.protocol.codec import record_to_json
from kestrel.protocol.errors import KestrelError
from kestrel.protocol.events import Record
from kestrel.sandbox.base import Executor
from kestrel.settings_load import load_settings
from kestrel.store import STORE_FILE_NAME
from kestrel.store.sqlite import SQLiteStore

EVENTS_FILE = "events.jsonl"
MODEL_PATCH = "model.patch"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalConfig:
    """How every task of a run is run: the model, its budgets, and where commands run."""

    model: str
    """PROVIDER:MODEL; `{instance_id}` in it is replaced per task (a script per task)."""
    sandbox: Literal["none", "bwrap"] = "bwrap"
    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    task_timeout_s: float = 3600.0
    """The agent process is stopped after this long; the task then counts as out of budget."""
    command_timeout_s: float = 1800.0
    """Limit for each setup command and for the test run."""
    test_cmd: str | None = None
    """The test command of tasks that name none (pytest when this is None too)."""

    def as_json(self) -> dict[str, Any]:
        """The settings as `run.json` records them."""
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStarted:
    """A task began."""

    instance_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDone:
    """A task ended; `result` is its line of `results.jsonl`."""

    instance_id: str
    result: dict[str, Any] = field(default_factory=dict)


OnProgress = Callable[[TaskStarted | TaskDone], None]


def run_tasks(
    folder: RunFolder,
    tasks: Sequence[Task],
    config: EvalConfig,
    *,
    repos: Path | None,
    jobs: int = 1,
    on_progress: OnProgress | None = None,
) -> list[dict[str, Any]]:
    """Run every task that has no result yet, `jobs` at a time; return the new results."""
    done = folder.finished_ids()
    todo = [task for task in tasks if task.instance_id not in done]

    def one(task: Task) -> dict[str, Any]:
        if on_progress:
            on_progress(TaskStarted(instance_id=task.instance_id))
        result = run_task(task, folder, config, repos=repos)
        folder.append_result(result)
        if on_progress:
            on_progress(TaskDone(instance_id=task.instance_id, result=result))
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="eval") as pool:
        return list(pool.map(one, todo))


def run_task(
    task: Task, folder: RunFolder, config: EvalConfig, *, repos: Path | None
) -> dict[str, Any]:
    """Run and score one task from scratch; never raises for a failure of the task itself."""
    here = folder.task_dir(task.instance_id)
    if here.exists():
        shutil.rmtree(here)  # A run killed midway left it; the task starts over.
    here.mkdir(parents=True)
    began = time.monotonic()
    sessions = here / "session"
    result: dict[str, Any] = {
        "instance_id": task.instance_id,
        "task_dir": str(here),
        "session_dir": str(sessions),
        "events_file": None,
        "session_id": None,
        "error": None,
        "tests": {},
        **_metric_fields(Metrics(gold_files=task.gold_files)),
    }
    status: Status = "error"
    try:
        source = find_repository(task, repos)
        repo = here / "repo"
        checkout.materialise(source, task.base_commit, repo)
        executor = _executor(config, repo)
        _setup(task, executor, repo, here / "setup.log", config)
        timed_out = _agent(task, repo, sessions, here / "agent.log", config)
        records = _session_log(sessions)
        if not records:
            raise EvalStepError(f"the agent left no session log; see {here / 'agent.log'}")
        (here / EVENTS_FILE).write_text("".join(record_to_json(r) + "\n" for r in records))
        metrics = compute(records, task.gold_files)
        result |= _metric_fields(metrics)
        result |= {"session_id": metrics.session_id, "events_file": str(here / EVENTS_FILE)}
        patch = checkout.change_since(repo, task.base_commit)
        (here / MODEL_PATCH).write_text(patch)
        result["model_patch"] = str(here / MODEL_PATCH)
        tests = _hidden_tests(task, source, here, patch, config)
        result["tests"] = tests
        resolved = all_pass(tests)
        if resolved:
            status = "resolved"
        elif timed_out or metrics.finish_reason == "budget":
            status = "budget_exhausted"
        else:
            status = "unresolved"
    except KestrelError as exc:
        result["error"] = str(exc)
    result |= {
        "status": status,
        "resolved": status == "resolved",
        "eval_wall_s": round(time.monotonic() - began, 3),
    }
    return result


class EvalStepError(KestrelError):
    """A step of a task failed in a way that makes its score meaningless (status `error`)."""


def _metric_fields(metrics: Metrics) -> dict[str, Any]:
    data = asdict(metrics)
    data.pop("session_id")
    for key in ("files_read", "files_edited", "gold_files"):
        data[key] = list(data[key])
    return data


def _executor(config: EvalConfig, root: Path) -> Executor:
    settings = load_settings(
        root, env=os.environ, flags={"sandbox": config.sandbox}, home=Path.home()
    )
    return app.executor_for(settings, root)


def _run(executor: Executor, command: str, cwd: Path, timeout_s: float) -> tuple[int, str]:
    done = asyncio.run(executor.run(command, cwd=cwd, timeout_s=timeout_s))
    code = 124 if done.timed_out else done.exit_code
    return code, done.output


def _setup(task: Task, executor: Executor, repo: Path, log: Path, config: EvalConfig) -> None:
    """Run the task's setup commands in `repo`, in order; the first failure is an error."""
    with log.open("a", encoding="utf-8") as out:
        for command in task.setup:
            code, output = _run(executor, command, repo, config.command_timeout_s)
            out.write(f"$ {command}\n{output}\n[exit {code}]\n")
            if code != 0:
                raise EvalStepError(f"setup command {command!r} exited {code}; see {log}")


def agent_command(task: Task, repo: Path, config: EvalConfig) -> list[str]:
    """The `kestrel -p` command line that works on one task."""
    args = [sys.executable, "-m", "kestrel", "-p", "--output-format", "json"]
    args += ["--model", _model_for(config.model, task.instance_id)]
    args += ["--cwd", str(repo), "--workspace", "direct", "--sandbox", config.sandbox]
    if config.sandbox == "bwrap":
        args += ["--permission-mode", "bypass"]  # Confined: it may run anything in there.
    else:
        # Unconfined, as the person asked with --sandbox none: edits and commands are allowed,
        # and the shell classifier still stops what it finds dangerous.
        args += ["--permission-mode", "accept-edits", "--allow", "Bash"]
    if config.max_turns is not None:
        args += ["--max-turns", str(config.max_turns)]
    if config.max_cost_usd is not None:
        args += ["--max-cost", str(config.max_cost_usd)]
    return [*args, "--", task.problem_statement]


def _model_for(model: str, instance_id: str) -> str:
    model = model.replace("{instance_id}", instance_id)
    name, sep, rest = model.partition(":")
    if name == "scripted" and sep and not Path(rest).expanduser().is_absolute():
        # The agent runs in the task's checkout; a script path is relative to where eval runs.
        return f"scripted:{Path(rest).expanduser().resolve()}"
    return model


def _agent(task: Task, repo: Path, sessions: Path, log: Path, config: EvalConfig) -> bool:
    """Run the agent on the task; returns whether it had to be stopped for running too long."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env["KESTREL_DATA_DIR"] = str(sessions)
    if config.max_tokens is not None:
        env["KESTREL_MAX_TOKENS"] = str(config.max_tokens)
    if config.max_wall_s is not None:
        env["KESTREL_MAX_WALL_S"] = str(config.max_wall_s)
    with log.open("w", encoding="utf-8") as out:
        try:
            done = subprocess.run(
                agent_command(task, repo, config),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=config.task_timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            out.write(f"\n[stopped after {config.task_timeout_s:g} s]\n")
            return True
    if done.returncode == 2:  # Bad usage or settings: the session never ran.
        raise EvalStepError(f"the agent refused to start: {_last_line(log)}")
    return False


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else f"no output (see {log})"


def _session_log(sessions: Path) -> list[Record]:
    path = sessions / STORE_FILE_NAME
    if not path.is_file():
        return []
    store = SQLiteStore(path)
    try:
        found = store.sessions()
        return list(store.read(found[-1].session_id)) if found else []
    finally:
        store.close()


def _hidden_tests(
    task: Task, source: Path, here: Path, patch: str, config: EvalConfig
) -> dict[str, TestOutcome]:
    """Apply the agent's change and the test patch to a fresh checkout and run the tests."""
    if not task.tests:
        raise EvalStepError("the task names no tests (FAIL_TO_PASS and PASS_TO_PASS are empty)")
    fresh = here / "tests_repo"
    checkout.materialise(source, task.base_commit, fresh)
    log = here / "tests.log"
    try:
        checkout.apply(fresh, patch, "agent's change")
    except checkout.CheckoutError as exc:
        log.write_text(f"{exc}\n")
        return dict.fromkeys(task.tests, "fail")
    checkout.apply(fresh, task.test_patch, "test patch")
    executor = _executor(config, fresh)
    _setup(task, executor, fresh, here / "tests_setup.log", config)
    command = command_for(task.test_cmd or config.test_cmd or DEFAULT_TEST_CMD, task.tests)
    code, output = _run(executor, command, fresh, config.command_timeout_s)
    log.write_text(f"$ {command}\n{output}\n[exit {code}]\n")
    return outcomes(output, task.tests)


def describe(result: dict[str, Any]) -> str:
    """One line about a finished task, for progress output."""
    cost = result.get("cost_usd") or 0.0
    extra = f" ({result['error']})" if result.get("error") else ""
    return (
        f"{result['instance_id']}: {result['status']}, {result.get('turns', 0)} turns, "
        f"{sum((result.get('tool_calls') or {}).values())} tool calls, ${cost:.4f}{extra}"
    )
