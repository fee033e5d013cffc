"""The `grep` tool, and the ripgrep plumbing `list_files` and `find_references` share with it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.grep_output import GREP_OUTPUT_FLAGS, GrepCollector, GrepReport, render_report
from kestrel.tools.paths import compile_glob, display_path, resolve_path

RG_TIMEOUT_S = 60.0
_WALK_FLAGS = ("--no-config", "--hidden", "--no-require-git", "--glob", "!.git")
"""Respect .gitignore even outside a git repository, show dotfiles, never descend into .git."""

_BATCH_ARG_CHARS = 100_000
"""Keeps each explicit file list well below the operating system's argument limit."""

_BINARY_NAMED = 20
"""Binary files that matched are named, up to this many."""
_READ_BYTES = 1 << 18
_SMALL_READ_BYTES = 1 << 14
_GATHER_S = 0.002
"""After a read smaller than `_SMALL_READ_BYTES`, wait this long for more output: ripgrep writes
each file's block as it is done, and waking once for several halves the reader's CPU time."""


def find_rg() -> str:
    """The ripgrep binary: on PATH, else installed beside this Python (the `ripgrep` package)."""
    found = shutil.which("rg")
    if found:
        return found
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = shutil.which("rg", path=folder)
        if candidate:
            return candidate
    raise ToolFailed(
        "ripgrep (rg) is not installed: it was found neither on PATH nor beside the Python "
        "interpreter; install the `ripgrep` package"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RgEnd:
    """How one ripgrep run ended: its exit code and what it wrote on stderr."""

    exit_code: int
    stderr: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RgRun:
    """How one ripgrep run ended, with all it wrote on stdout."""

    exit_code: int
    stdout: str
    stderr: str


async def stream_rg(
    args: Sequence[str],
    *,
    cwd: Path,
    on_stdout: Callable[[bytes], None],
    timeout_s: float = RG_TIMEOUT_S,
) -> RgEnd:
    """Run ripgrep, handing its stdout to `on_stdout` chunk by chunk as it comes.

    The output is read, and `on_stdout` called, on a worker thread: blocking reads cost far less
    than an event-loop wake-up for each of the thousands of small writes ripgrep makes. ripgrep
    is killed on timeout (reported as `ToolFailed`) or when the caller is cancelled.
    """
    # stderr goes to a file, so that neither pipe can fill and stall ripgrep while the other
    # is being read.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [find_rg(), *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        reading = asyncio.ensure_future(asyncio.to_thread(_drain, proc, on_stdout))
        try:
            async with asyncio.timeout(timeout_s):
                exit_code = await asyncio.shield(reading)
        except TimeoutError:
            raise ToolFailed(
                f"the search took longer than {timeout_s:g} s and was stopped; "
                "search a smaller path or a narrower pattern"
            ) from None
        finally:
            if proc.poll() is None:
                proc.kill()
            # Killed, ripgrep closes its output and the reading thread ends at once.
            await asyncio.wait([reading])
            proc.wait()
        errors.seek(0)
        err = errors.read()
    return RgEnd(exit_code=exit_code, stderr=err.decode("utf-8", errors="replace").strip())


def _drain(proc: subprocess.Popen[bytes], on_stdout: Callable[[bytes], None]) -> int:
    assert proc.stdout is not None
    with proc.stdout:
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, _READ_BYTES):
            on_stdout(chunk)
            if len(chunk) < _SMALL_READ_BYTES:  # the pipe holds 64 KiB: ripgrep is not held up
                time.sleep(_GATHER_S)
    return proc.wait()


async def run_rg(args: Sequence[str], *, cwd: Path, timeout_s: float = RG_TIMEOUT_S) -> RgRun:
    """Run ripgrep to completion; it is killed on timeout (reported as `ToolFailed`) or cancel."""
    chunks: list[bytes] = []
    end = await stream_rg(args, cwd=cwd, on_stdout=chunks.append, timeout_s=timeout_s)
    return RgRun(
        exit_code=end.exit_code,
        stdout=b"".join(chunks).decode("utf-8", errors="replace"),
        stderr=end.stderr,
    )


async def list_paths(root: Path, target: Path, glob: str | None = None) -> tuple[list[str], str]:
    """Files under `target` that .gitignore does not exclude, sorted, as the model writes them.

    Returns the paths and ripgrep's complaints (unreadable folders), if it had any.
    """
    shown = display_path(root, target)
    args = ["--files", "--null", *_WALK_FLAGS]
    if shown != ".":
        args += ["--", shown]
    run = await run_rg(args, cwd=root.resolve())
    if run.exit_code == 2 and not run.stdout:
        raise ToolFailed(f"listing {shown} failed: {run.stderr}")
    paths = sorted(p.removeprefix("./") for p in run.stdout.split("\0") if p)
    if glob:
        matches = compile_glob(glob)
        prefix = "" if shown == "." else shown.rstrip("/") + "/"
        # A glob may be written relative to the workspace or to the folder being searched.
        paths = [p for p in paths if matches(p) or matches(p.removeprefix(prefix))]
    return paths, run.stderr if run.exit_code == 2 else ""


class GrepArgs(BaseModel):
    """Arguments of `grep`."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Regular expression (Rust regex syntax, like egrep).")
    path: str = Field(default=".", description="File or folder to search; default the workspace.")
    glob: str | None = Field(
        default=None, description="Only search files matching this glob, e.g. '*.py' or 'src/**'."
    )
    case_insensitive: bool = Field(default=False, description="Ignore case when matching.")
    context: int = Field(default=0, ge=0, le=20, description="Lines of context around each match.")
    max_results: int = Field(
        default=100, ge=1, le=2000, description="Most matching lines to show; the rest are counted."
    )


class Grep:
    """Search file contents with ripgrep."""

    name: ClassVar[str] = "grep"
    kind: ClassVar[ToolKind] = "read"
    Args: ClassVar[type[BaseModel]] = GrepArgs
    description: ClassVar[str] = (
        "Search file contents for a regular expression (ripgrep; .gitignore is respected). "
        "Use it to find definitions, usages and strings before reading files. Prints "
        "`path:line: text` for each matching line, with `context` lines around if asked."
    )

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Search and render the matches, noting any that were left out."""
        a = GrepArgs.model_validate(args)
        target = resolve_path(ctx.root, a.path, also_inside=(ctx.artifacts_dir,))
        if not target.exists():
            raise ToolFailed(f"{a.path} does not exist")
        shown = display_path(ctx.root, target)
        flags = [*GREP_OUTPUT_FLAGS, *_WALK_FLAGS]
        flags += ["--ignore-case"] if a.case_insensitive else []
        flags += ["--context", str(a.context)] if a.context else []
        if a.glob:
            files, _ = await list_paths(ctx.root, target, a.glob)
            if not files:
                return ToolOutcome(content=f"No files under {shown} match the glob {a.glob!r}.")
            batches = list(_batches(files))
        else:
            batches = [[] if shown == "." else [shown]]
        collector = GrepCollector(context=a.context, limit=a.max_results)
        report, problems = await grep_batches(
            collector, [*flags, "--regexp", a.pattern], batches, cwd=ctx.root.resolve()
        )
        if problems and not (report.matches or report.binary_files):
            raise ToolFailed(f"grep failed: {problems[0]}")
        return ToolOutcome(content=_summarise(report, a, shown, problems))


async def grep_batches(
    collector: GrepCollector, args: Sequence[str], batches: Sequence[Sequence[str]], *, cwd: Path
) -> tuple[GrepReport, list[str]]:
    """Run ripgrep with `args` once per batch of paths, all into `collector`.

    Returns the report and what ripgrep complained of (files it could not search, a bad regex).
    """
    problems: list[str] = []
    for batch in batches:
        end = await stream_rg([*args, "--", *batch], cwd=cwd, on_stdout=collector.feed)
        collector.end_run()
        if end.exit_code == 2:
            problems.append(end.stderr)
    return collector.report(), problems


def _summarise(report: GrepReport, a: GrepArgs, shown: str, problems: list[str]) -> str:
    where = shown + (f" (files matching {a.glob!r})" if a.glob else "")
    binary = ", ".join(report.binary_files[:_BINARY_NAMED])
    if len(report.binary_files) > _BINARY_NAMED:
        binary += f" and {len(report.binary_files) - _BINARY_NAMED} more"
    if not report.matches:
        if binary:
            return f"Only binary files match {a.pattern!r} in {where} (lines not shown): {binary}"
        return f"No matches for {a.pattern!r} in {where}."
    lines = _plural(report.total_matches, "matching line")
    parts = [
        f"{lines} in {_plural(report.total_files, 'file')} under {where}:",
        render_report(report),
    ]
    if report.total_matches > len(report.matches):
        parts.append(
            f"[showing the first {len(report.matches)} of {report.total_matches} matching lines; "
            "narrow the pattern, path or glob, or raise max_results to see more]"
        )
    if binary:
        parts.append(f"[binary files also match (lines not shown): {binary}]")
    if problems:
        parts.append(f"[some files could not be searched: {problems[0].splitlines()[0]}]")
    return "\n\n".join(parts)


def _batches(files: Sequence[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for path in files:
        if batch and size + len(path) > _BATCH_ARG_CHARS:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path) + 1
    if batch:
        yield batch


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
