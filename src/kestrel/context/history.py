"""What the repository's own history says about each file: priors the learned ranker reads.

Three things, all from one `git log` of the last DEPTH commits (about 0.2 s for 5,000 commits of
a large repository), read once per HEAD through `kestrel.gitsafe` like every other git call on
the host:

- churn: how many commits touched a file; fixes land again and again in the same files;
- recency: how many commits ago it last changed;
- past changes like this task: the commits whose messages share the task's words (BM25 over
  the messages) vote for the files they changed, each vote split over the change's files. A
  bug described by behaviour often reads like an earlier fix's message, even when the file it
  lives in shares few words with it.

Outside a git work tree, or where git cannot run safely, there is simply no history.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kestrel.context.rank import is_doc_path, is_test_path
from kestrel.context.tokens import token_counts
from kestrel.gitsafe.invoke import run_git
from kestrel.protocol.errors import KestrelError

DEPTH = 5000
"""How many commits back the history reaches."""
SIMILAR_COMMITS = 50
"""How many of the most similar past changes vote."""
MAX_CHANGE_FILES = 20
"""Changes of more source files than this (mass renames, reformatting) do not vote."""
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True, slots=True)
class History:
    """Per path (relative to the engine's root): commits touching it, the newest one, and the
    past changes' messages for finding the ones like a task."""

    head: str
    depth: int
    touched: Mapping[str, int] = field(default_factory=dict)
    newest: Mapping[str, int] = field(default_factory=dict)
    """How many commits before HEAD the path last changed (0: HEAD itself)."""
    _files: tuple[tuple[str, ...], ...] = ()
    """The source files of each past change that can vote."""
    _norms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """BM25's length normalisation of each change's message."""
    _postings: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Per term: the changes whose message has it, and how often."""

    def churn(self, path: str) -> float:
        """log(1 + commits that touched the path)."""
        return math.log1p(self.touched.get(path, 0))

    def recency(self, path: str) -> float:
        """1 for a path HEAD changed, falling towards 0 the longer ago; 0 if never seen."""
        ago = self.newest.get(path)
        return 0.0 if ago is None else 1.0 / (1.0 + math.log1p(ago))

    def similar(self, terms: Iterable[str]) -> dict[str, float]:
        """Files by the votes of the past changes most like `terms`, the best at 1.0."""
        n = len(self._files)
        if not n:
            return {}
        scores = np.zeros(n)
        for term in terms:
            found = self._postings.get(term)
            if found is None:
                continue
            at, tf = found
            idf = math.log(1 + (n - len(at) + 0.5) / (len(at) + 0.5))
            scores[at] += idf * tf * (_K1 + 1) / (tf + self._norms[at])
        count = min(SIMILAR_COMMITS, int(np.count_nonzero(scores)))
        if not count:
            return {}
        best = np.argpartition(-scores, count - 1)[:count]
        votes: dict[str, float] = {}
        for at in sorted(best.tolist()):
            files = self._files[at]
            share = float(scores[at]) / len(files)
            for path in files:
                votes[path] = votes.get(path, 0.0) + share
        top = max(votes.values())
        return {p: v / top for p, v in votes.items()}


def head_of(root: Path) -> str | None:
    """The commit checked out at `root`, or None outside a (safe) git work tree."""
    try:
        run = run_git(root, ["rev-parse", "--verify", "-q", "HEAD"], timeout_s=10)
    except (KestrelError, OSError):
        return None
    return run.text().strip() if run.ok else None


def read_history(root: Path, head: str, depth: int = DEPTH) -> History | None:
    """The history of the files under `root` over the last `depth` commits before `head`."""
    args = ["log", f"-n{depth}", "--no-renames", "--relative", "--name-only"]
    try:
        run = run_git(
            root,
            [*args, "--format=%x00%B%x01", head],
            timeout_s=60,
            config=(("core.quotePath", "false"),),
        )
    except (KestrelError, OSError):
        return None
    if not run.ok:
        return None
    touched: dict[str, int] = {}
    newest: dict[str, int] = {}
    files: list[tuple[str, ...]] = []
    lengths: list[int] = []
    postings: dict[str, list[tuple[int, int]]] = {}
    commits = run.text().split("\0")[1:]
    for ago, record in enumerate(commits):
        message, _, listing = record.partition("\x01")
        paths = [p for p in listing.split("\n") if p]
        for path in paths:
            touched[path] = touched.get(path, 0) + 1
            newest.setdefault(path, ago)
        source = tuple(p for p in paths if not is_test_path(p) and not is_doc_path(p))
        if not source or len(source) > MAX_CHANGE_FILES:
            continue
        counts: Counter[str] = token_counts(message)
        at = len(files)
        files.append(source)
        lengths.append(sum(counts.values()))
        for term, tf in counts.items():
            postings.setdefault(term, []).append((at, tf))
    sizes = np.array(lengths, dtype=np.float64)
    norms = _K1 * (1 - _B + _B * sizes / max(float(sizes.mean()) if len(sizes) else 1.0, 1.0))
    arrays = {
        term: (
            np.array([at for at, _ in found], dtype=np.int32),
            np.array([tf for _, tf in found], dtype=np.float64),
        )
        for term, found in postings.items()
    }
    return History(head, len(commits), touched, newest, tuple(files), norms, arrays)
