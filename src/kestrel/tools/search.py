"""The `grep` tool, and the ripgrep plumbing `list_files` shares with it."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.paths import compile_glob, display_path, resolve_path

RG_TIMEOUT_S = 60.0
MAX_LINE_CHARS = 500
"""Matched lines longer than this are shown as a window around the match."""

_WALK_FLAGS = ("--no-config", "--hidden", "--no-require-git", "--glob", "!.git")
"""Respect .gitignore even outside a git repository, show dotfiles, never descend into .git."""

_BATCH_ARG_CHARS = 100_000
"""Keeps each explicit file list well below the operating system's argument limit."""


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
class RgRun:
    """How one ripgrep run ended."""

    exit_code: int
    stdout: str
    stderr: str


async def run_rg(args: Sequence[str], *, cwd: Path, timeout_s: float = RG_TIMEOUT_S) -> RgRun:
    """Run ripgrep to completion; it is killed on timeout (reported as `ToolFailed`) or cancel."""
    proc = await asyncio.create_subprocess_exec(
        find_rg(),
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        raise ToolFailed(
            f"the search took longer than {timeout_s:g} s and was stopped; "
            "search a smaller path or a narrower pattern"
        ) from None
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return RgRun(
        exit_code=proc.returncode if proc.returncode is not None else -1,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace").strip(),
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


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepLine:
    """One line of a file, as ripgrep reported it."""

    line_number: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepMatch:
    """A matching line with the context lines ripgrep gave around it."""

    path: str
    line_number: int
    text: str
    before: tuple[GrepLine, ...] = ()
    after: tuple[GrepLine, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepReport:
    """The matches kept, and how many matching lines and files there were in all."""

    matches: tuple[GrepMatch, ...]
    total_matches: int
    total_files: int


@dataclass(slots=True)
class _Building:
    path: str
    line: GrepLine
    before: list[GrepLine]
    after: list[GrepLine] = field(default_factory=list)


class GrepCollector:
    """Turns ripgrep's `--json` lines into at most `limit` matches, counting the rest."""

    def __init__(self, *, context: int, limit: int) -> None:
        self._context = context
        self._limit = limit
        self._kept: list[_Building] = []
        self._total = 0
        self._files: set[str] = set()
        self._pending: list[GrepLine] = []
        self._last: _Building | None = None
        self._current = ""

    def feed(self, output: str) -> None:
        """Take in a chunk of ripgrep `--json` output (whole lines)."""
        for raw in output.splitlines():
            if len(self._kept) >= self._limit:
                # Past the limit only counts matter: decoding every line cost more than rg did.
                if raw.startswith('{"type":"match"'):
                    self._total += 1
                    self._files.add(self._current)
                elif raw.startswith('{"type":"begin"'):
                    self._current = _block_path(raw)
                continue
            event = json.loads(raw) if raw.strip() else {}
            kind = event.get("type")
            if kind == "begin":
                self._pending, self._last = [], None
                self._current = _block_path(raw)
            elif kind in ("match", "context"):
                path, line, focus = _parse_line(event["data"])
                if kind == "match":
                    self._add_match(path, line, focus)
                else:
                    self._add_context(line)

    def _add_match(self, path: str, line: GrepLine, focus: int) -> None:
        self._total += 1
        self._files.add(path)
        before = [p for p in self._pending if line.line_number - p.line_number <= self._context]
        self._pending = []
        if len(self._kept) >= self._limit:
            self._last = None
            return
        shown = GrepLine(line_number=line.line_number, text=clip_line(line.text, focus))
        self._last = _Building(path=path, line=shown, before=before)
        self._kept.append(self._last)

    def _add_context(self, line: GrepLine) -> None:
        clipped = GrepLine(line_number=line.line_number, text=clip_line(line.text, 0))
        last = self._last
        if last is not None and line.line_number - last.line.line_number <= self._context:
            last.after.append(clipped)
        self._pending.append(clipped)

    def report(self) -> GrepReport:
        """Everything gathered so far."""
        matches = tuple(
            GrepMatch(
                path=b.path,
                line_number=b.line.line_number,
                text=b.line.text,
                before=tuple(b.before),
                after=tuple(b.after),
            )
            for b in self._kept
        )
        return GrepReport(matches=matches, total_matches=self._total, total_files=len(self._files))


def _block_path(begin_line: str) -> str:
    """The path a ripgrep `begin` event names (text, or base64 bytes for odd names)."""
    return _text_of(json.loads(begin_line).get("data", {}).get("path", {})).removeprefix("./")


def sorted_by_file(output: str) -> str:
    """ripgrep `--json` output with its per-file blocks in path order.

    Sorting here rather than with `--sort path` keeps ripgrep searching on every core.
    """
    blocks: list[tuple[str, list[str]]] = []
    for raw in output.splitlines():
        if raw.startswith('{"type":"begin"'):
            blocks.append((_block_path(raw), [raw]))
        elif blocks and not raw.startswith('{"type":"summary"'):
            blocks[-1][1].append(raw)
    blocks.sort(key=lambda block: block[0])
    return "\n".join(line for _, lines in blocks for line in lines)


def _parse_line(data: dict[str, Any]) -> tuple[str, GrepLine, int]:
    path = _text_of(data["path"]).removeprefix("./")
    raw = _text_of(data["lines"])
    text = raw.removesuffix("\n").removesuffix("\r")
    submatches = data.get("submatches") or []
    # ripgrep gives byte offsets; the window around a match is cut in characters.
    start = submatches[0]["start"] if submatches else 0
    focus = len(raw.encode("utf-8")[:start].decode("utf-8", errors="ignore"))
    return path, GrepLine(line_number=int(data.get("line_number") or 0), text=text), focus


def _text_of(value: dict[str, str]) -> str:
    # ripgrep sends text that is not valid UTF-8 as base64 `bytes`.
    if "text" in value:
        return value["text"]
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", errors="replace")


def clip_line(text: str, focus: int, width: int = MAX_LINE_CHARS) -> str:
    """`text` if short, else a `width`-character window starting a little before `focus`."""
    if len(text) <= width:
        return text
    start = max(0, min(focus - width // 5, len(text) - width))
    end = start + width
    head = f"[... {start} chars] " if start else ""
    tail = f" [... {len(text) - end} more chars]" if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}"


def render_report(report: GrepReport) -> str:
    """Matches as `path:line: text` (context lines as `path:line- text`), grouped by file."""
    blocks: list[str] = []
    current_path: str | None = None
    previous = 0
    for path, number, text, is_match in _ordered_lines(report.matches):
        if path != current_path:
            if current_path is not None:
                blocks.append("")
            current_path, previous = path, 0
        elif number > previous + 1:
            blocks.append("--")
        blocks.append(f"{path}:{number}{':' if is_match else '-'} {text}")
        previous = number
    return "\n".join(blocks)


def _ordered_lines(matches: Sequence[GrepMatch]) -> Iterator[tuple[str, int, str, bool]]:
    # Context shared by neighbouring matches is printed once, in line order, per file.
    by_path: dict[str, dict[int, tuple[str, bool]]] = {}
    for match in matches:
        lines = by_path.setdefault(match.path, {})
        for ctx in (*match.before, *match.after):
            lines.setdefault(ctx.line_number, (ctx.text, False))
        lines[match.line_number] = (match.text, True)
    for path, lines in by_path.items():
        for number in sorted(lines):
            text, is_match = lines[number]
            yield path, number, text, is_match


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
        flags = ["--json", *_WALK_FLAGS]
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
        problems = []
        for batch in batches:
            run = await run_rg(
                [*flags, "--regexp", a.pattern, "--", *batch], cwd=ctx.root.resolve()
            )
            collector.feed(sorted_by_file(run.stdout))
            if run.exit_code == 2:
                problems.append(run.stderr)
        report = collector.report()
        if problems and not report.matches:
            raise ToolFailed(f"grep failed: {problems[0]}")
        return ToolOutcome(content=_summarise(report, a, shown, problems))


def _summarise(report: GrepReport, a: GrepArgs, shown: str, problems: list[str]) -> str:
    where = shown + (f" (files matching {a.glob!r})" if a.glob else "")
    if not report.matches:
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
