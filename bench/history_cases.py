"""Edit cases from a repository's real history, by the recipe of the shared dev cases.

    python bench/history_cases.py --repo PATH --name owner/name [--count 1000] [--seed 7]
                                  [--out PATH]
    python bench/edit_apply.py --cases ABSOLUTE_PATH      # run them (it runs from bench/)

`--repo`: a git repository, bare or not. The recipe, read off the 1,392 `hist/` cases of
`cases_dev.jsonl.gz` (httpx, pytest, flask, requests); run on those histories it loads every dev
source with the dev `meta` and rebuilds every dev exact edit byte for byte:

- Source: one modified `.py` file of one non-merge commit of the whole history, commit first (of
  a commit's fitting files each is taken at even odds, at least one). It fits when it ends with a
  newline before and after, has no tab, CR or conflict marker, is UTF-8, has at most 3,000 lines
  before, and 1-60 changed (+/-) lines in 1-4 `git diff` hunks, or is "large": 500-3,000 lines,
  100-500 changed lines, any number of hunks.
- Blocks: git's hunks with 3 lines of context (nearby changes merged as git does); each in turn
  then grows a line of context on both sides until its old text is unique in the file as the
  blocks before it left it. Dev counts whole-line matches; here it must be unique as a substring
  too, so that plain `str.replace` of the exact edits gives the expected file.
- Formats: `search_replace` (path line, `<<<<<<< SEARCH`, old, `=======`, new, `>>>>>>> REPLACE`,
  blocks apart by a blank line); `str_replace` (a call per block, lines joined by newlines, no final
  one); `udiff` (`--- a/p`, `+++ b/p`, `@@ -l,n +l,n @@` with no section name, counts always
  given and those of the edit's own lines); `apply_patch` (V4A: `*** Begin Patch`,
  `*** Update File: p`, a bare `@@` per block, `*** End Patch`).
- Cases: a large slice of 136/1,392 of them (`large`, id ending `/large`: each source exact in all
  four formats); the rest evenly over the 45 (format, perturbation) pairs, each pair drawing
  sources at random from a pool 1.6 times the cases (about 1.3 cases a source, as in dev),
  skipping those the perturbation does not fit. Id `hist/<owner>/<name>/<sha[:10]>/<sha1(path)
  [:6]>/<format>/<perturbation>`; `meta`: the perturbation's keys, `file_lines`, `changed_lines`,
  `blocks`; order: by format, then perturbation, then the large slice.
- Perturbations; the expected file is the commit's after, transformed as the file was. `exact`;
  `crlf_file` (the file in CRLF, the edit in LF); `indent_shift` (all non-blank edit lines, added
  ones too, moved 2 or 4, or -4 / -8 when all are that deep: `shift`); `trailing_ws` (`edit_side`:
  about half the non-blank old-side lines end in " ", "  ", "    " or a tab, in the old text only
  for texts given apart; `file_side`: one of " ", "  ", tab after 1-2 non-blank context lines of the
  file and expected file); `tabs_spaces` (`file_spaces_edit_tabs`: the edit's leading spaces as
  tabs, 4 to a tab; `file_tabs_edit_spaces`: the file's); `elide_dots` / `elide_comment` (1-2 kept
  lines inside a block, old-side lines on both sides, as one `...` / `# ... existing code ...` at
  their indent, in both texts: `elided_lines`); `blank_added` (one-block changes: a blank line
  between two adjacent non-blank old-side lines, old text only, or diff context);
  `blank_missing` (a kept blank dropped: inside a block after a non-blank line, from the old text
  only, for texts apart only in one-block changes; or at a block's edge, from both: `edge`);
  `stale_lineno` (udiff numbers off by 5-40, never below 1: `line_shift`); `ambiguous` (one run of
  changed lines without context, as `git diff -U0` has it, old text found 2+ times: refused, but
  in udiff the numbers say which and it lands: `occurrences`); `no_match` (a block of another
  source, for this file: refused; `search_from`). A refusal is `{"error": true, "kind": ...,
  "files_after": <the file unchanged>}`.

Not in the dev data, so chosen: the odds of shifts (dev: 2/4/-4/-8 as 47/36/21/2) and of spots
(uniform); udiff never drops an edge blank (dev: 1 of 28). Added so that a careful person accepts
every case: an edit-side mistake whose old text, as plain text, is found twice or lands otherwise
is dropped, as is (whitespace mistakes) one whose stripped lines are also elsewhere; an elision
needs non-blank old-side lines around it, all its readings (1-60 lines) to start at one place,
the fewest lines to be the true ones; a diff keeps blank runs next to blank or unpinned changes
(the blank could go with them: the 8 dev cases the engine refuses, and more); `file_side` skips
lines `str.replace` moves blanks off and lines the block also adds; `ambiguous` skips all-blank
runs; `no_match` takes another path's block whose stripped lines are not in the file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history_render as hr

FORMATS = ("search_replace", "str_replace", "udiff", "apply_patch")
KINDS = ("exact", "indent_shift", "trailing_ws", "tabs_spaces", "crlf_file", "elide_dots",
         "elide_comment", "blank_missing", "blank_added", "stale_lineno", "ambiguous",
         "no_match")  # fmt: skip
KEYS = ("id", "source", "format", "perturbation", "large", "files_before", "edit", "expect", "meta")
LARGE_SHARE = 136 / 1392  # The dev cases' large slice.
OUT = Path(__file__).resolve().parent.parent / "bench-results"
Json = dict[str, object]
Made = tuple[str, object, Json, Json]  # (file before, edit, expect, perturbation's meta)


@dataclass
class Source:
    """One change of one file, cut into blocks."""

    ref: str
    path: str
    before: str
    after: str
    hunks: list[hr.Block]
    blocks: list[hr.Block] = field(default_factory=list)

    @property
    def b(self) -> list[str]:
        return hr.lines_of(self.before)

    @property
    def changed(self) -> int:
        return sum(1 for h in self.hunks for tag, _ in h.ops if tag != " ")

    @property
    def large(self) -> bool:
        return 500 <= len(self.b) <= 3000 and 100 <= self.changed <= 500


def commits(git: hr.Git) -> dict[str, list[tuple[str, bool]]]:
    """By commit: modified Python files with 1-60 or 100-500 changed lines (and which range)."""
    log = git.run("log", "--no-merges", "--no-renames", "--numstat", "--diff-filter=M",
                  "--format=C %H", "--", "*.py")  # fmt: skip
    found: dict[str, list[tuple[str, bool]]] = {}
    sha = ""
    for line in log.splitlines():
        if line.startswith("C "):
            sha = line[2:]
            continue
        added, _, rest = line.partition("\t")
        removed, _, path = rest.partition("\t")
        if not (added.isdigit() and removed.isdigit()) or path.startswith('"'):
            continue
        changed = int(added) + int(removed)
        if 1 <= changed <= 60 or 100 <= changed <= 500:
            found.setdefault(sha, []).append((path, changed >= 100))
    return found


def load(git: hr.Git, name: str, sha: str, path: str) -> Source | None:
    """The change of `path` in `sha`, or None when it does not fit the recipe."""
    before, after = git.text(f"{sha}^:{path}"), git.text(f"{sha}:{path}")
    if not before or not after or before == after or _unfit(before, after):
        return None
    flags = ("--no-color", "--no-ext-diff", "--no-textconv", "--diff-algorithm=myers", "-U3")
    diff = git.run("diff", *flags, "--indent-heuristic", f"{sha}^", sha, "--", f":(literal){path}")
    hunks = hr.parse_hunks(diff, hr.lines_of(before))
    if not hunks or hr.join(hr.applied(hr.lines_of(before), hunks)) != after:
        return None
    src = Source(f"{name}@{sha}:{path}", path, before, after, hunks)
    if not src.large and not (src.changed <= 60 and len(hunks) <= 4):
        return None
    src.blocks = hr.widen(src.b, hunks)
    return src if hr.plain(before, src.blocks) == after else None


def _unfit(before: str, after: str) -> bool:
    """No final newline, tabs, CRs, over 3,000 lines, or committed merge-conflict markers (which
    SEARCH/REPLACE blocks cannot carry)."""
    both = before + after
    marks = any(x.startswith(("<<<<<<< ", ">>>>>>> ")) for x in both.split("\n"))
    ends = before.endswith("\n") and after.endswith("\n")
    return not ends or "\t" in both or "\r" in both or before.count("\n") > 3000 or marks


def pools(
    git: hr.Git, name: str, rng: random.Random, small: int, large: int
) -> tuple[list[Source], list[Source]]:
    """Up to `small` ordinary and `large` large sources, sampled commit first."""
    by_commit = commits(git)
    order = sorted(by_commit)
    rng.shuffle(order)
    smalls: list[Source] = []
    larges: list[Source] = []
    for sha in order:
        if len(smalls) >= small and len(larges) >= large:
            break
        paths = by_commit[sha]
        for path, big in [p for p in paths if rng.random() < 0.5] or [rng.choice(paths)]:
            into, limit = (larges, large) if big else (smalls, small)
            src = load(git, name, sha, path) if len(into) < limit else None
            if src and src.large == big:
                into.append(src)
    return smalls, larges


def _done(path: str, text: str) -> Json:
    """The expectation that the edit lands with `text` as the file."""
    return {"files_after": {path: text}}


def _refused(kind: str, path: str, before: str) -> Json:
    """The expectation of a refusal of `kind`, the file unchanged."""
    return {"error": True, "kind": kind, "files_after": {path: before}}


def _lands(
    src: Source, fmt: str, blocks: list[hr.Block] | None, meta: Json, loose: bool = False
) -> Made | None:
    """The case for these changed blocks, unless read as plain text they land elsewhere or
    otherwise, or (`loose`) their old text, each line stripped, is also elsewhere."""
    if blocks is None or not hr.literal(src.before, blocks, src.after):
        return None
    if loose and not hr.fair(src.b, src.blocks, blocks):
        return None
    return src.before, hr.render(fmt, src.path, blocks), _done(src.path, src.after), meta


def exact(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made:
    """The commit's own change."""
    return src.before, hr.render(fmt, src.path, src.blocks), _done(src.path, src.after), {}


def crlf_file(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """The file (and the expected file) in CRLF, the edit in LF."""
    crlf = src.before.replace("\n", "\r\n"), src.after.replace("\n", "\r\n")
    return crlf[0], hr.render(fmt, src.path, src.blocks), _done(src.path, crlf[1]), {}


def indent_shift(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """Every non-blank edit line moved right 2 or 4, or left 4 or 8 where all are that deep."""
    least = min(len(hr.indent(x)) for b in src.blocks for _, x in b.ops if x.strip())
    if least >= 4 and rng.random() < 0.5:
        by = -8 if least >= 8 and rng.random() < 0.25 else -4
    else:
        by = rng.choice((2, 4))
    return _lands(src, fmt, hr.shifted(src.blocks, by), {"shift": by}, loose=True)


def trailing_ws(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """Trailing blanks on the edit's old-side lines, or on one or two context lines of the file."""
    if rng.random() < 0.5:
        apart = fmt in ("search_replace", "str_replace")
        spaced = hr.edit_trailing(src.blocks, rng, apart)
        return _lands(src, fmt, spaced, {"variant": "edit_side"}, loose=True)
    spots = []  # (old line, new line) of the blocks' non-blank context lines
    for block in src.blocks:  # not a line the block also adds: the blanks could go with either
        old, new, added = block.start, block.nstart, {x for t, x in block.ops if t == "+"}
        for tag, text in block.ops:
            if tag == " " and text.strip() and text not in added:
                spots.append((old, new))
            old, new = old + (tag != "+"), new + (tag != "-")
    if not spots:
        return None
    b, a = src.b, hr.lines_of(src.after)
    tail = rng.choice((" ", "  ", "\t"))
    for old, new in sorted({rng.choice(spots), rng.choice(spots)}):
        b[old], a[new] = b[old] + tail, a[new] + tail
    if not hr.literal(hr.join(b), src.blocks, hr.join(a)):
        return None
    edit = hr.render(fmt, src.path, src.blocks)
    return hr.join(b), edit, _done(src.path, hr.join(a)), {"variant": "file_side"}


def tabs_spaces(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """The edit's indentation in tabs for a file in spaces, or the file's for an edit in spaces."""
    if not any(x.startswith("    ") for b in src.blocks for _, x in b.ops):
        return None
    if rng.random() < 0.5:
        tabbed = hr.map_lines(src.blocks, hr.tabs_for)
        return _lands(src, fmt, tabbed, {"variant": "file_spaces_edit_tabs"}, loose=True)
    before, after = (
        hr.join([hr.tabs_for(x) for x in hr.lines_of(t)]) for t in (src.before, src.after)
    )
    edit = hr.render(fmt, src.path, src.blocks)
    return before, edit, _done(src.path, after), {"variant": "file_tabs_edit_spaces"}


def _elide(marker: str) -> Callable[..., Made | None]:
    def make(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
        """One or two kept lines inside a block written as `marker`."""
        count = 1 if rng.random() < 0.6 else 2  # dev: 130 to 87
        elided = hr.elide(src.b, src.blocks, rng, marker, count)
        return _lands(src, fmt, elided, {"elided_lines": count})

    return make


def blank_missing(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """A kept blank line dropped (see `history_render.blank_missing`)."""
    cut = hr.blank_missing(src.blocks, rng, fmt)
    return None if cut is None else _lands(src, fmt, cut[0], {"edge": cut[1]})


def blank_added(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """A blank line added to a one-block change's old text (or as diff context)."""
    if len(src.blocks) != 1:
        return None
    added = hr.blank_added(src.blocks[0], rng, fmt in ("search_replace", "str_replace"))
    return _lands(src, fmt, None if added is None else [added], {})


def stale_lineno(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """Udiff line numbers off by 5-40, never below line 1."""
    shift = rng.choice((-1, 1)) * rng.randint(5, 40)
    if src.blocks[0].start + shift < 0:
        shift = abs(shift)
    edit = hr.render(fmt, src.path, src.blocks, shift=shift)
    return src.before, edit, _done(src.path, src.after), {"line_shift": shift}


def ambiguous(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """One run of changes without context whose old text occurs more than once."""
    b = src.b
    runs = [g for g in hr.change_groups(src.blocks)
            if any(x.strip() for x in g.old) and len(hr.occurrences(b, g.old)) >= 2]  # fmt: skip
    if not runs:
        return None
    run = rng.choice(runs)
    edit, seen = hr.render(fmt, src.path, [run]), len(hr.occurrences(b, run.old))
    if fmt == "udiff":
        done = _done(src.path, hr.join(hr.applied(b, [run])))
        return src.before, edit, done, {"occurrences": seen, "note": "line numbers disambiguate"}
    return src.before, edit, _refused("ambiguous", src.path, src.before), {"occurrences": seen}


def no_match(src: Source, fmt: str, rng: random.Random, pool: Sequence[Source]) -> Made | None:
    """A block of another source, written for this file."""
    stripped = [x.strip() for x in src.b]
    for donor in rng.sample(list(pool), min(8, len(pool))):
        block = rng.choice(donor.blocks)
        if donor.path == src.path or hr.occurrences(stripped, [x.strip() for x in block.old]):
            continue
        refused = _refused("no_match", src.path, src.before)
        return src.before, hr.render(fmt, src.path, [block]), refused, {"search_from": donor.ref}
    return None


PERTURB: dict[str, Callable[..., Made | None]] = {
    "exact": exact, "indent_shift": indent_shift, "trailing_ws": trailing_ws,
    "tabs_spaces": tabs_spaces, "crlf_file": crlf_file, "elide_dots": _elide("..."),
    "elide_comment": _elide("# ... existing code ..."), "blank_missing": blank_missing,
    "blank_added": blank_added, "stale_lineno": stale_lineno, "ambiguous": ambiguous,
    "no_match": no_match,
}  # fmt: skip


def case(name: str, src: Source, fmt: str, kind: str, made: Made, large: bool = False) -> Json:
    """One case in the dev schema."""
    sha, path = src.ref.split("@", 1)[1].split(":", 1)
    tag = f"{sha[:10]}/{hashlib.sha1(path.encode()).hexdigest()[:6]}/{fmt}/{kind}"
    before, edit, expect, meta = made
    sizes = {"file_lines": len(src.b), "changed_lines": src.changed, "blocks": len(src.blocks)}
    values = (f"hist/{name}/{tag}" + ("/large" if large else ""), src.ref, fmt, kind, large,
              {path: before}, edit, expect, {**meta, **sizes})  # fmt: skip
    return dict(zip(KEYS, values, strict=True))


def quotas(rng: random.Random, small: int) -> list[tuple[str, str, int]]:
    """The (format, perturbation) pairs in output order, each with its number of cases."""
    pairs = [(f, k) for f in FORMATS for k in KINDS if k != "stale_lineno" or f == "udiff"]
    base, extra = divmod(small, len(pairs))
    more = set(rng.sample(range(len(pairs)), extra))
    return [(f, k, base + (n in more)) for n, (f, k) in enumerate(pairs)]


def cases(repo: Path, name: str, count: int, seed: int) -> list[Json]:
    """`count` cases (fewer when the history runs short), deterministic for `seed`."""
    rng = random.Random(seed)
    n_large = round(count * LARGE_SHARE / 4)
    small = count - 4 * n_large
    git = hr.Git(repo)
    try:
        pool, larges = pools(git, name, rng, max(round(small * 1.6), 20), n_large)
    finally:
        git.close()
    out = []
    for fmt, kind, want in quotas(rng, small):
        made = 0
        for src in rng.sample(pool, len(pool)):
            if made >= want:
                break
            result = PERTURB[kind](src, fmt, rng, pool)
            if result is not None:
                out.append(case(name, src, fmt, kind, result))
                made += 1
    for src in larges:
        out += [case(name, src, f, "exact", exact(src, f, rng, pool), True) for f in FORMATS]
    return out


def build(repo: Path, name: str, count: int, seed: int, out: Path) -> int:
    """Write the cases to `out` (.jsonl.gz); the number written."""
    made = cases(repo, name, count, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(c) + "\n" for c in made)
    return len(made)


def main(argv: list[str] | None = None) -> int:
    """The command line; 0 when some cases were written."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git repository (bare or not)")
    parser.add_argument("--name", required=True, help="owner/name, for ids and sources")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out = args.out or OUT / f"cases_{args.name.replace('/', '_')}.jsonl.gz"
    made = build(args.repo, args.name, args.count, args.seed, out)
    print(f"{made} cases from {args.name} in {out}")
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
