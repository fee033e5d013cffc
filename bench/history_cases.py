"""Edit cases from a repository's real history, by the recipe of the shared dev cases.

    python bench/history_cases.py --repo PATH --name owner/name [--count 1000] [--seed 7]
                                  [--out PATH]
    python bench/edit_apply.py --cases PATH            # run them

`--repo` is a git repository (bare or not). Commits are sampled from the newest 5,000 that change
Python files; each gives one change of one Python file that ends with a newline before and after
(the renderer writes no "No newline at end of file" line): 30-3,000 lines before, 1-80 changed
lines, or a "large" slice of 500-3,000-line files with 100-500 changed lines. The change is cut into
hunks with three lines of context (nearby changes merged, as git shows them) and written in one of
the four formats (`search_replace`, `str_replace`, `udiff`, `apply_patch`), exact or with a
mistake models make, as the dev cases are:

- `exact`; `trailing_ws` (spaces after the edit's lines, or after the file's); `crlf_file` (the
  file in CRLF, the edit in LF); `indent_shift` (every edit line moved 2, 4 or -4 columns);
  `tabs_spaces` (the edit in tabs for a file in spaces, or the file in tabs for an edit in
  spaces); `blank_added` / `blank_missing` (a blank context line added or dropped); `elide_dots`
  / `elide_comment` (one or two inner context lines written as `...` or
  `# ... existing code ...`); `stale_lineno` (udiff line numbers off by 5-40);
- refusals: `ambiguous` (a copy of the first hunk's old lines appended to the file; a udiff's
  line numbers still say which one, so there it must land) and `no_match` (a removed line the
  file does not have).

The expected file is the commit's own result, transformed as the file was (CRLF, tabs, trailing
spaces). Deterministic for a seed. Not inferred from the dev data, so chosen here: the share of
each perturbation is uniform, and every change yields one case (`exact` twice as likely).
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history_render as hr

FORMATS = ("search_replace", "str_replace", "udiff", "apply_patch")
KINDS = (
    "exact", "exact", "trailing_ws", "crlf_file", "indent_shift", "tabs_spaces", "blank_added",
    "blank_missing", "elide_dots", "elide_comment", "stale_lineno", "ambiguous", "no_match",
)  # fmt: skip
OUT = Path(__file__).resolve().parent.parent / "bench-results"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, text=True, errors="replace"
    ).stdout


def git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def changes(
    repo: Path, rng: random.Random, per_commit: int = 1
) -> Iterator[tuple[str, str, str, str]]:
    """(commit, path, before, after) for sampled commits, `per_commit` modified Python files
    each (at most)."""
    commits = git(repo, "log", "--no-merges", "--format=%H", "-n", "5000", "--", "*.py").split()
    rng.shuffle(commits)
    for sha in commits:
        names = git(repo, "diff-tree", "--no-commit-id", "-r", "--diff-filter=M",
                    "--name-only", sha, "--", "*.py").split()  # fmt: skip
        if not names:
            continue
        for path in rng.sample(names, min(per_commit, len(names))):
            before = git(repo, "show", f"{sha}^:{path}")
            after = git(repo, "show", f"{sha}:{path}")
            ends = before.endswith("\n") and after.endswith("\n")  # No "No newline" lines.
            if ends and "\r" not in before + after and before != after:
                yield sha, path, before, after


def case_for(name: str, sha: str, path: str, before: str, after: str, rng: random.Random):
    """One case for this change, or `None` when it does not fit the recipe."""
    b, a = hr.lines_of(before), hr.lines_of(after)
    parts = hr.blocks(b, a)
    changed = sum(1 for p in parts for tag, _ in p.ops if tag != " ")
    large = 500 <= len(b) <= 3000 and 100 <= changed <= 500
    if not large and not (30 <= len(b) <= 3000 and 1 <= changed <= 80):
        return None
    fmt = rng.choice(FORMATS)
    kind = "exact" if large else rng.choice(KINDS)
    made = PERTURB[kind](fmt, path, parts, before, after, rng)
    if made is None:
        return None
    files_before, edit, expect, meta = made
    tag = f"{sha[:10]}/{hashlib.sha256(path.encode()).hexdigest()[:6]}/{fmt}/{kind}"
    return {
        "id": f"hist/{name}/{tag}" + ("/large" if large else ""),
        "source": f"{name}@{sha}:{path}",
        "format": fmt,
        "perturbation": kind,
        "large": large,
        "files_before": {path: files_before},
        "edit": edit,
        "expect": expect,
        "meta": {**meta, "file_lines": len(b), "changed_lines": changed, "blocks": len(parts)},
    }


def _done(path: str, text: str) -> dict:
    return {"files_after": {path: text}}


def exact(fmt, path, parts, before, after, rng):
    return before, hr.render(fmt, path, parts), _done(path, after), {}


def trailing_ws(fmt, path, parts, before, after, rng):
    if rng.random() < 0.5:
        if fmt == "str_replace" and any(not p.old[-1].strip() for p in parts):
            return None  # "a\n\n" as lines is one blank line or two: not this mistake.
        edit = hr.map_edit(parts, lambda s: s + "  " if s.strip() else s, " -")
        return before, hr.render(fmt, path, edit), _done(path, after), {"variant": "edit_side"}
    b, a = hr.lines_of(before), hr.lines_of(after)
    same = _same(b, a)
    picked = [n for p in parts for n in range(p.start, p.start + len(p.old))
              if n in same and b[n].strip()]  # fmt: skip
    if not picked:
        return None
    for n in rng.sample(picked, min(2, len(picked))):
        b[n] += "  "
        a[same[n]] += "  "
    return (
        hr.join(b),
        hr.render(fmt, path, parts),
        _done(path, hr.join(a)),
        {"variant": "file_side"},
    )


def _same(b: list[str], a: list[str]) -> dict[int, int]:
    matcher = difflib.SequenceMatcher(None, b, a, autojunk=False)
    return {i1 + k: j1 + k for tag, i1, i2, j1, _ in matcher.get_opcodes() if tag == "equal"
            for k in range(i2 - i1)}  # fmt: skip


def crlf_file(fmt, path, parts, before, after, rng):
    return (before.replace("\n", "\r\n"), hr.render(fmt, path, parts),
            _done(path, after.replace("\n", "\r\n")), {})  # fmt: skip


def indent_shift(fmt, path, parts, before, after, rng):
    by = rng.choice((2, 4, -4))
    shifted = hr.shift_indent(parts, by)
    if shifted is None:
        return None
    return before, hr.render(fmt, path, shifted), _done(path, after), {"shift": by}


def tabs_spaces(fmt, path, parts, before, after, rng):
    if "\t" in before + after:
        return None
    if rng.random() < 0.5:
        edit = hr.render(fmt, path, hr.map_edit(parts, hr.tabs_for))
        return before, edit, _done(path, after), {"variant": "file_spaces_edit_tabs"}
    tab = lambda text: hr.join(hr.tabs_for(line) for line in hr.lines_of(text))  # noqa: E731
    return (tab(before), hr.render(fmt, path, parts), _done(path, tab(after)),
            {"variant": "file_tabs_edit_spaces"})  # fmt: skip


def _blank(add: bool):
    def make(fmt, path, parts, before, after, rng):
        changed = hr.blank_change(parts, rng, add, fmt in ("search_replace", "str_replace"))
        if changed is None:
            return None
        return before, hr.render(fmt, path, changed), _done(path, after), {}

    return make


def _elide(marker: str):
    def make(fmt, path, parts, before, after, rng):
        count = rng.choice((1, 2))
        elided = hr.elide(parts, rng, marker, count)
        if elided is None:
            return None
        edit = hr.render(fmt, path, elided)
        return before, edit, _done(path, after), {"elided_lines": count}

    return make


def stale_lineno(fmt, path, parts, before, after, rng):
    if fmt != "udiff":
        return None
    shift = rng.choice((-1, 1)) * rng.randint(5, 40)
    if parts[0].start + shift < 0:
        shift = abs(shift)
    edit = hr.render(fmt, path, parts, shift=shift)
    return before, edit, _done(path, after), {"line_shift": shift}


def ambiguous(fmt, path, parts, before, after, rng):
    copy = hr.join(parts[0].old)
    if not copy.strip() or len(parts[0].old) < 2:
        return None
    files_before, edit = before + copy, hr.render(fmt, path, parts)
    if fmt == "udiff":  # The line numbers say which copy.
        return files_before, edit, _done(path, after + copy), {"note": "line numbers decide"}
    return files_before, edit, {"error": True, "kind": "ambiguous"}, {"occurrences": 2}


def no_match(fmt, path, parts, before, after, rng):
    changed = hr.no_match(parts, before)
    if changed is None:
        return None
    return before, hr.render(fmt, path, changed), {"error": True, "kind": "no_match"}, {}


PERTURB: dict[str, Callable] = {
    "exact": exact, "trailing_ws": trailing_ws, "crlf_file": crlf_file,
    "indent_shift": indent_shift, "tabs_spaces": tabs_spaces, "blank_added": _blank(True),
    "blank_missing": _blank(False), "elide_dots": _elide("..."),
    "elide_comment": _elide("# ... existing code ..."), "stale_lineno": stale_lineno,
    "ambiguous": ambiguous, "no_match": no_match,
}  # fmt: skip


def build(repo: Path, name: str, count: int, seed: int, out: Path, per_commit: int = 1) -> int:
    rng = random.Random(seed)
    made = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt") as handle:
        for sha, path, before, after in changes(git_dir(repo), rng, per_commit):
            case = case_for(name, sha, path, before, after, rng)
            if case is None:
                continue
            handle.write(json.dumps(case) + "\n")
            made += 1
            if made >= count:
                break
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--name", required=True, help="owner/name, for case ids")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--per-commit",
        type=int,
        default=1,
        help="files taken from each commit (more for a history of few, large commits)",
    )
    args = parser.parse_args(argv)
    out = args.out or OUT / f"cases_{args.name.replace('/', '_')}.jsonl.gz"
    made = build(args.repo, args.name, args.count, args.seed, out, args.per_commit)
    print(f"{made} cases from {args.name} in {out}")
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
