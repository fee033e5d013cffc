"""Evaluation tasks: a repository at a commit, a problem statement, and the tests that judge it.

A suite is a JSON Lines file, one task per line, in the SWE-bench form (SWE-bench, Lite and
Verified files load as they are):

- `instance_id`, `repo` (`owner/name`), `base_commit`, `problem_statement`: required.
- `test_patch`: the hidden tests, applied only after the agent has finished.
- `FAIL_TO_PASS`, `PASS_TO_PASS`: test ids, as a list or as a JSON string holding a list.
- `patch`: the reference fix; only its file names are used, as the gold files.
- `gold_files`: the files the fix changes, when given explicitly.

Kestrel's own keys, all optional: `repo_path` (where the repository is, relative to the suite
file), `setup` (shell commands run in the fresh checkout before the agent and before the tests),
and `test_cmd` (the command the test ids are given to; else `eval run --test-cmd`, else
pytest). Test ids are pytest node ids (`path::test`) or unittest ids (`test (module.Class)`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kestrel.protocol.errors import ConfigError
from kestrel.protocol.oserrors import error_text

DEFAULT_TEST_CMD = "python3 -m pytest -rA -p no:cacheprovider"
"""Runs the test ids given after it; `-rA` lists every test's outcome, which is what is read."""

_REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement")
_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


class SuiteError(ConfigError):
    """A suite file is missing or malformed, or names something that does not exist."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One evaluation task."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    test_patch: str = ""
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    gold_files: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    test_cmd: str | None = None
    """The command the test ids are given to; None for `--test-cmd`, else pytest."""
    repo_path: Path | None = None
    """Where the repository is, when the suite says so; else it is looked up in `--repos`."""

    @property
    def tests(self) -> tuple[str, ...]:
        """Every test that must pass for the task to count as resolved."""
        return tuple(dict.fromkeys((*self.fail_to_pass, *self.pass_to_pass)))


def load_suite(path: Path) -> list[Task]:
    """Read a suite file; errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SuiteError(f"{path}: suite file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the suite file: {error_text(exc)}") from exc
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SuiteError(f"{where}: not valid JSON: {exc.msg}") from exc
        task = parse_task(data, where=where, base=path.parent)
        if task.instance_id in seen:
            raise SuiteError(f"{where}: instance {task.instance_id!r} appears twice")
        seen.add(task.instance_id)
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{path}: the suite holds no tasks")
    return tasks


def parse_task(data: Any, *, where: str = "task", base: Path | None = None) -> Task:
    """One task from its decoded JSON object."""
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: a task must be a JSON object")
    missing = [key for key in _REQUIRED if not isinstance(data.get(key), str) or not data[key]]
    if missing:
        raise SuiteError(f"{where}: missing or empty {', '.join(missing)}")
    repo_path = data.get("repo_path")
    if repo_path is not None and not isinstance(repo_path, str):
        raise SuiteError(f"{where}: 'repo_path' must be a string")
    gold = _strings(data, "gold_files", where) or tuple(patch_files(_text(data, "patch", where)))
    return Task(
        instance_id=data["instance_id"],
        repo=data["repo"],
        base_commit=data["base_commit"],
        problem_statement=data["problem_statement"],
        test_patch=_text(data, "test_patch", where),
        fail_to_pass=_strings(data, "FAIL_TO_PASS", where),
        pass_to_pass=_strings(data, "PASS_TO_PASS", where),
        gold_files=gold,
        setup=_strings(data, "setup", where),
        test_cmd=_text(data, "test_cmd", where) or None,
        repo_path=None if repo_path is None else (base or Path.cwd()) / repo_path,
    )


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SuiteError(f"{where}: {key!r} must be a string")
    return value


def _strings(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of strings, given as a list or as a JSON string holding one (as SWE-bench does)."""
    value = data.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SuiteError(f"{where}: {key!r} is a string but not a JSON list") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SuiteError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def patch_files(patch: str) -> list[str]:
    """The files a git diff changes, in order of appearance."""
    names = [new if new != "/dev/null" else old for old, new in _DIFF_HEADER.findall(patch)]
    return list(dict.fromkeys(names))


def select(tasks: Sequence[Task], instances: Sequence[str]) -> list[Task]:
    """The tasks named by `instances` (all when empty), in suite order; unknown ids are errors."""
    if not instances:
        return list(tasks)
    known = {task.instance_id for task in tasks}
    unknown = [i for i in instances if i not in known]
    if unknown:
        raise SuiteError(
            f"unknown instance(s): {', '.join(unknown)}; the suite has {len(known)} task(s), "
            f"e.g. {', '.join(sorted(known)[:3])}"
        )
    wanted = set(instances)
    return [task for task in tasks if task.instance_id in wanted]


def find_repository(task: Task, repos: Path | None) -> Path:
    """The local repository (a work tree or a bare mirror) that holds the task's commits.

    Looked up as the task's `repo_path`, else in `repos` as `owner__name`, `owner/name` or
    `name` (each with or without `.git`).
    """
    if task.repo_path is not None:
        if _is_repository(task.repo_path):
            return task.repo_path
        raise SuiteError(f"{task.instance_id}: repo_path {task.repo_path} is not a git repository")
    if repos is None:
        raise SuiteError(
            f"{task.instance_id}: no repository for {task.repo}: pass --repos DIR with a clone "
            f"or mirror of it (as {task.repo.replace('/', '__')}, {task.repo} or its name)"
        )
    owner, _, name = task.repo.partition("/")
    stems = [f"{owner}__{name}", task.repo, name or owner]
    candidates = [repos / f"{stem}{suffix}" for stem in stems for suffix in ("", ".git")]
    for candidate in candidates:
        if _is_repository(candidate):
            return candidate
    raise SuiteError(
        f"{task.instance_id}: no repository for {task.repo} in {repos} (looked for "
        f"{', '.join(c.name if c.parent == repos else str(c) for c in candidates)})"
    )


def _is_repository(path: Path) -> bool:
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())
