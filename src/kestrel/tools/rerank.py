"""A session's first context: the files the context engine ranks best for the task, optionally
reordered by a model.

The engine ranks without any model. When the person allows it (`[context] rerank`), one call to
the `fast` model sees the task and the engine's best candidates (each file's path and its best
matching definitions, never file contents) and answers with their numbers, most relevant first.
The call is bounded: at most `candidates` files, the task cut to `TASK_CHARS`, `MAX_REPLY_TOKENS`
of answer. A reply that cannot be read leaves the engine's order; nothing the model says is
trusted beyond choosing among the numbered candidates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kestrel.context.model import FileHit, SearchResult
from kestrel.protocol.messages import ModelRequest, UserTurn

TASK_CHARS = 6000
"""The task is cut to this many characters in the reranking request."""
MAX_REPLY_TOKENS = 300
DEFINITIONS_SHOWN = 3
_NUMBERS = re.compile(r"\[[\d,\s]*\]")

RERANK_SYSTEM = (
    "You pick the source files a software task is about. You are given the task and a numbered "
    "list of candidate files, each with its best-matching definitions. Answer with a JSON list "
    "of the candidate numbers, the file most likely to need changing first, at most ten, and "
    "nothing else. Example: [3, 1, 7]"
)


@dataclass(frozen=True, slots=True)
class Ranked:
    """The first context's files, and how they were ordered."""

    files: tuple[FileHit, ...]
    reranked: bool
    note: str = ""
    """Why the model's order was not used, when it was asked and was not."""


def rerank_request(task: str, files: Sequence[FileHit]) -> ModelRequest:
    """The one request that asks the model to order `files` for `task`."""
    lines = []
    for n, hit in enumerate(files, 1):
        shown = "; ".join(
            f"{s.qualname}{_signature(s.signature)}" for s in hit.symbols[:DEFINITIONS_SHOWN]
        )
        lines.append(f"{n}. {hit.path}" + (f" — {shown}" if shown else ""))
    cut = task if len(task) <= TASK_CHARS else task[:TASK_CHARS] + "\n[... task cut ...]"
    text = f"Task:\n{cut}\n\nCandidate files:\n" + "\n".join(lines)
    return ModelRequest(
        system=RERANK_SYSTEM,
        messages=(UserTurn(text=text),),
        max_output_tokens=MAX_REPLY_TOKENS,
        temperature=0.0,
        metadata={"purpose": "rerank"},
    )


def _signature(signature: str) -> str:
    short = " ".join(signature.split())
    return short if len(short) <= 80 else short[:77] + "..."


def read_order(reply: str, count: int) -> list[int] | None:
    """The 0-based candidate indices a reply names, in its order; None when it names none.

    The first bracketed list of numbers is read; numbers outside 1..count and repeats are
    skipped.
    """
    for found in _NUMBERS.finditer(reply):
        try:
            numbers = json.loads(found.group(0))
        except json.JSONDecodeError:
            continue
        order: list[int] = []
        for number in numbers:
            if isinstance(number, int) and 1 <= number <= count and number - 1 not in order:
                order.append(number - 1)
        if order:
            return order
    return None


def reordered(files: Sequence[FileHit], order: Sequence[int]) -> tuple[FileHit, ...]:
    """The files the model named in its order, then the rest in the engine's."""
    picked = set(order)
    return (*(files[i] for i in order), *(hit for i, hit in enumerate(files) if i not in picked))


def render(ranked: Ranked, result: SearchResult, shown: int) -> str:
    """The first-context text the model reads before the task's first turn."""
    how = (
        "the context engine's ranking, reordered by the fast model"
        if ranked.reranked
        else "the context engine's ranking"
    )
    lines = [
        f"Files most likely relevant to the task ({how}; read them before editing, and search "
        "further if they do not hold the answer):"
    ]
    for hit in ranked.files[:shown]:
        lines.append(f"- {hit.path}")
        for symbol in hit.symbols[:DEFINITIONS_SHOWN]:
            lines.append(f"    {symbol.path}:{symbol.line} {symbol.qualname}")
    if result.pending:
        lines.append(f"({result.pending} files were not indexed yet and were not ranked.)")
    return "\n".join(lines)
