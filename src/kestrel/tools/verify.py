"""The `verify` tool: check the change (syntax, lint, types, related tests) and report failures.

Not registered by default. To offer it, add it to the tools the registry is built with, e.g.
`ToolRegistry([*default_tools(), Verify()])`, or append `Verify()` to `default_tools()` in
`kestrel.tools.registry` (after `Bash()`, and add it to the tool contract test). It is an
`execute` tool: policy treats it like `bash`, since it runs the project's own programs.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kestrel.tools.base import ToolContext, ToolFailed, ToolKind, ToolOutcome
from kestrel.tools.paths import display_path, resolve_path
from kestrel.workspace.verify import Verifier, Which, detect_checks

DEFAULT_CHECK_TIMEOUT_S = 300.0
GIT_STATUS = "git status --porcelain=v1 -z --untracked-files=all"


class VerifyArgs(BaseModel):
    """Arguments of `verify`."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] | None = Field(
        default=None,
        description="Changed files to verify, relative to the workspace root. Leave out to "
        "verify every file git reports as changed.",
    )
    full: bool = Field(
        default=False,
        description="Run the whole test suite instead of only the tests related to the files.",
    )


class Verify:
    """Verify the workspace's change and report structured failures."""

    name: ClassVar[str] = "verify"
    kind: ClassVar[ToolKind] = "execute"
    Args: ClassVar[type[BaseModel]] = VerifyArgs
    description: ClassVar[str] = (
        "Check changed files the way the project does: a syntax check, the linters and type "
        "checkers it configures (ruff, mypy, tsc, eslint, go vet, cargo check) and the tests "
        "related to the change (or all tests with full=true). Reports one line per failure "
        "with file, line, tool, rule and test; run it after editing and fix what it reports."
    )

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
        npm_test: bool = False,
        which: Which = shutil.which,
    ) -> None:
        self._timeout_s = timeout_s
        self._npm_test = npm_test
        self._which = which

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Detect the checks for the change, run them, and return the rendered report."""
        a = VerifyArgs.model_validate(args)
        if a.paths is not None:
            paths = [display_path(ctx.root, resolve_path(ctx.root, raw)) for raw in a.paths]
        else:
            paths = await _git_changes(ctx)
        if not paths and not a.full:
            return ToolOutcome(content="verification: no changed files to check")
        checks = await asyncio.to_thread(
            detect_checks,
            ctx.root,
            paths,
            full=a.full,
            npm_test=self._npm_test,
            which=self._which,
        )
        verifier = Verifier(
            ctx.executor, ctx.root, timeout_s=self._timeout_s, on_output=ctx.on_output
        )
        report = await verifier.run(checks)
        return ToolOutcome(content=report.render())


async def _git_changes(ctx: ToolContext) -> list[str]:
    result = await ctx.executor.run(GIT_STATUS, cwd=ctx.root, timeout_s=30.0)
    if result.exit_code != 0 or result.timed_out:
        raise ToolFailed(
            "no paths were given and git cannot list the changes here (not a git repository?); "
            "call verify with `paths`, or with full=true"
        )
    return porcelain_paths(result.output)


def porcelain_paths(output: str) -> list[str]:
    """Changed paths from `git status --porcelain=v1 -z` (the new name of a rename)."""
    entries = output.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4 or entry[2] != " ":
            continue
        status, path = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            index += 1  # the entry after a rename or copy is its old name
        paths.append(path)
    return list(dict.fromkeys(paths))
