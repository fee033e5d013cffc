"""Every output parser by name, and one entry point that never lets a parser's bug escape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Literal

from kestrel.workspace.verify._text import tail
from kestrel.workspace.verify.failures import Failure, Parsed
from kestrel.workspace.verify.parsers_go import parse_go_test, parse_go_vet
from kestrel.workspace.verify.parsers_junit import parse_junit
from kestrel.workspace.verify.parsers_python import (
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_unittest,
)
from kestrel.workspace.verify.parsers_rust import parse_cargo
from kestrel.workspace.verify.parsers_web import parse_eslint, parse_tsc

__all__ = [
    "PARSERS",
    "OutputParser",
    "ParserName",
    "parse_cargo",
    "parse_eslint",
    "parse_exit_code",
    "parse_go_test",
    "parse_go_vet",
    "parse_junit",
    "parse_mypy",
    "parse_output",
    "parse_pytest",
    "parse_ruff",
    "parse_tsc",
    "parse_unittest",
]

ParserName = Literal[
    "pytest",
    "junit",
    "unittest",
    "ruff",
    "mypy",
    "tsc",
    "eslint",
    "go_test",
    "go_vet",
    "cargo",
    "exit_code",
    "syntax",
]
"""How a check's result is read; `syntax` runs in process and `exit_code` reads nothing."""

OutputParser = Callable[[str], Parsed]
"""A pure function from a tool's whole output to the failures it reports."""


def parse_exit_code(output: str) -> Parsed:
    """No structure to read: the exit code alone decides (see `Verifier`)."""
    return Parsed()


PARSERS: Mapping[str, OutputParser] = MappingProxyType(
    {
        "pytest": parse_pytest,
        "junit": parse_junit,
        "unittest": parse_unittest,
        "ruff": parse_ruff,
        "mypy": parse_mypy,
        "tsc": parse_tsc,
        "eslint": parse_eslint,
        "go_test": parse_go_test,
        "go_vet": parse_go_vet,
        "cargo": parse_cargo,
        "exit_code": parse_exit_code,
    }
)
"""Output parsers by `ParserName` (all but `syntax`)."""


def parse_output(
    parser: str,
    output: str,
    *,
    tool: str | None = None,
    parsers: Mapping[str, OutputParser] = PARSERS,
) -> Parsed:
    """Run the named parser; an unknown name or a parser bug becomes one `error` failure."""
    function = parsers.get(parser)
    label = tool or parser
    if function is None:
        return Parsed(
            (Failure(message=f"no output parser named {parser!r}", kind="error", tool=label),)
        )
    try:
        return function(output)
    except Exception as exc:  # a parser bug must surface as a failure, never as a pass
        message = (
            f"could not read the output ({type(exc).__name__}: {exc}); its end:\n{tail(output)}"
        )
        return Parsed((Failure(message=message, kind="error", tool=label),))
