"""Lazy-edit cases for the edit benchmark, built from the dev cases' real commits.

    python bench/lazy_cases.py [--source PATH] [--out PATH]
    python bench/edit_apply.py --lazy            # generate (if missing) and run them

Each `history` case with perturbation `exact` gives a file before and after a real commit
(httpx, pytest, flask, requests). The change is rendered as a lazy edit: the changed lines with
unchanged context around them, and an elision marker in the file's comment syntax for every
unchanged stretch left out. Kinds of case (the runner's `perturbation`):

- `unique`: context grown until the line next to each marker occurs once in the file, the way
  the tool description asks; must land byte for byte.
- `ctx3`: three lines of context (more only to reach a non-blank line), whether unique or not;
  must land or be refused, never land wrongly.
- `whole`: the whole new file, eliding only unchanged runs of 30 lines or more (big edits).
- `crlf`: `unique` on the file with CRLF endings (edit written with LF).
- `dedent`: `unique` with every edit line shifted left by the edit's common indentation (not for
  commits that change a line's whitespace only, nor for edits with a line of spaces only, whose
  width a shifted edit cannot say).
- `ambiguous`: the file with a copy of the first stretch's whole region above it, so the edit
  fits two places equally well: must be refused.

Commits that change only whitespace are left out (anchors matched with whitespace tolerated keep
the file's own whitespace, and blank lines next to a marker are not part of the edit). A commit
that deletes lines at the top (bottom) of a file, with no new lines in their place, is
rendered without a marker above (below) the edit; that reads the same as an edit whose marker
was forgotten, so such cases expect a refusal (`drops_unshown`) whatever their shape.
- `no_anchor`: the line after a marker changed into one the file does not have: refused.
- `no_marker`: the leading marker of an edit that starts mid-file left out: refused.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import json
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from lazy_expect import Group, drops_unshown

from kestrel.edits.elide import is_marker_line

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO.parent / "shared" / "bench" / "edits" / "cases_dev.jsonl.gz"
OUT = Path(tempfile.gettempdir()) / "kestrel-bench" / "lazy_cases_dev.jsonl.gz"
COMMENT = {
    ".py": "# ... existing code ...",
    ".pyi": "# ... existing code ...",
    ".cfg": "# ... existing code ...",
    ".toml": "# ... existing code ...",
    ".yml": "# ... existing code ...",
    ".yaml": "# ... existing code ...",
    ".sh": "# ... existing code ...",
    ".cs": "// ... existing code ...",
    ".js": "// ... existing code ...",
    ".ts": "// ... existing code ...",
    ".go": "// ... existing code ...",
    ".rs": "// ... existing code ...",
    ".css": "/* ... */",
    ".html": "<!-- ... -->",
    ".md": "<!-- ... -->",
}
CONTEXT = 3
WHOLE_MIN_RUN = 30


def marker_for(path: str) -> str:
    """The elision comment a model would write in this file's language."""
    dot = path.rfind(".")
    return COMMENT.get(path[dot:].lower() if dot != -1 else "", "...")


def equal_map(before: Sequence[str], after: Sequence[str]) -> tuple[dict[int, int], list[tuple]]:
    """Before-line to after-line for unchanged lines, and the change opcodes."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    same: dict[int, int] = {}
    changes = []
    for code, i1, i2, j1, j2 in matcher.get_opcodes():
        if code == "equal":
            same.update(zip(range(i1, i2), range(j1, j2), strict=True))
        else:
            changes.append((i1, i2, j1, j2))
    return same, changes


def _grow(before: Sequence[str], at: int, step: int, same: dict[int, int], unique: bool) -> int:
    """From `at`, move by `step` until an unchanged non-blank line (unique if asked)."""
    counts = _counts(before) if unique else {}
    n = at
    while 0 <= n < len(before):
        line = before[n]
        usable = n in same and line.strip() and not is_marker_line(line)
        if usable and (not unique or counts[line] == 1):
            return n
        n += step
    return -1 if step < 0 else len(before)


_COUNT_CACHE: list[tuple[Sequence[str], Counter[str]]] = []


def _counts(lines: Sequence[str]) -> Counter[str]:
    """How often each line occurs; the last list asked about is remembered (by identity,
    holding a reference so that its id cannot be reused by another list)."""
    if not _COUNT_CACHE or _COUNT_CACHE[0][0] is not lines:
        _COUNT_CACHE[:] = [(lines, Counter(lines))]
    return _COUNT_CACHE[0][1]


def groups(before: Sequence[str], after: Sequence[str], context: int, unique: bool) -> list[Group]:
    """The shown windows: each change with context, windows that meet merged."""
    same, changes = equal_map(before, after)
    windows: list[tuple[int, int]] = []
    for i1, i2, _, _ in changes:
        start = _grow(before, i1 - context, -1, same, unique)
        stop = _grow(before, i2 + context - 1, 1, same, unique) + 1
        start, stop = max(start, 0), min(stop, len(before))
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(stop, windows[-1][1]))
        else:
            windows.append((start, stop))
    return [_with_after(before, after, same, start, stop) for start, stop in windows]


def _with_after(
    before: Sequence[str], after: Sequence[str], same: dict[int, int], start: int, stop: int
) -> Group:
    a_start = 0 if start == 0 else same[start]
    a_stop = len(after) if stop == len(before) else same[stop - 1] + 1
    return Group(start, stop, a_start, a_stop)


def render(path: str, before: Sequence[str], after: Sequence[str], shown: list[Group]) -> str:
    """The lazy edit text: the path, then a fenced block of stretches and markers."""
    marker = marker_for(path)
    out: list[str] = []
    for k, group in enumerate(shown):
        if group.start > 0 and (k == 0 or group.start > shown[k - 1].stop):
            out.append(_indented_marker(marker, after[group.a_start]))
        out.extend(after[group.a_start : group.a_stop])
    if shown and shown[-1].stop < len(before):
        out.append(_indented_marker(marker, after[shown[-1].a_stop - 1]))
    return fence(path, out)


def fence(path: str, lines: Sequence[str]) -> str:
    ticks = "```"
    while any(line.strip().startswith(ticks) for line in lines):
        ticks += "`"
    return f"{path}\n{ticks}\n" + "".join(line + "\n" for line in lines) + f"{ticks}\n"


def _indented_marker(marker: str, near: str) -> str:
    return near[: len(near) - len(near.lstrip())] + marker


def lines_of(text: str) -> list[str]:
    body = text.split("\n")
    if body and body[-1] == "":
        body.pop()
    return body


def whole_groups(before: Sequence[str], after: Sequence[str]) -> list[Group]:
    """Everything shown except unchanged runs of `WHOLE_MIN_RUN` lines or more."""
    same, changes = equal_map(before, after)
    if not changes:
        return []
    hidden = _long_runs(before, same, len(after))
    windows: list[tuple[int, int]] = []
    for n, gone in enumerate(hidden):
        if gone:
            continue
        if windows and windows[-1][1] == n:
            windows[-1] = (windows[-1][0], n + 1)
        else:
            windows.append((n, n + 1))
    return [_with_after(before, after, same, start, stop) for start, stop in windows]


def _long_runs(before: Sequence[str], same: dict[int, int], after_len: int) -> list[bool]:
    """Lines inside unchanged runs long enough to elide, keeping unique edges around them."""
    hidden = [False] * len(before)
    n = 0
    while n < len(before):
        if n not in same:
            n += 1
            continue
        start = n
        n += 1
        while n in same and same[n] == same[n - 1] + 1:
            n += 1
        if n - start >= WHOLE_MIN_RUN:
            lo = _grow(before, start + CONTEXT, 1, same, True)
            hi = _grow(before, n - 1 - CONTEXT, -1, same, True)
            top = start == 0 and same[0] == 0
            end = n == len(before) and same[n - 1] == after_len - 1
            lo, hi = 0 if top else lo + 1, len(before) if end else hi
            for k in range(max(lo, start), min(hi, n)):
                hidden[k] = True
    return hidden


def base_cases(source: Path) -> Iterator[dict]:
    """The distinct real changes behind the dev split's `exact` history cases."""
    seen: set[str] = set()
    with gzip.open(source, "rt") as handle:
        for raw in handle:
            case = json.loads(raw)
            if not case["id"].startswith("hist/") or case.get("perturbation") != "exact":
                continue
            after = case["expect"].get("files_after")
            if not after or set(after) != set(case["files_before"]):
                continue
            key = hashlib.sha256(json.dumps([case["files_before"], after]).encode()).hexdigest()
            if key not in seen:
                seen.add(key)
                yield case


def make_case(base: dict, kind: str, before: dict, edit: str, expect: dict) -> dict:
    stem = base["id"].removeprefix("hist/").replace("/exact", "").replace("/large", "")
    return {
        "id": f"hist/lazy/{stem}/{kind}",
        "source": base["source"],
        "format": "lazy",
        "perturbation": kind,
        "large": bool(base.get("large")),
        "files_before": before,
        "edit": edit,
        "expect": expect,
        "meta": {"edit_lines": edit.count("\n") - 3},
    }


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def dedent_edit(edit: str) -> str | None:
    """The edit with its common indentation removed (`None` when there is none)."""
    head, body = edit.split("\n", 1)
    ticks, rest = body.split("\n", 1)
    inner = rest[: rest.rfind(ticks)]
    lines = inner.split("\n")[:-1]
    indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    if cut == 0 or any("\t" in line[:cut] for line in lines):
        return None
    if any(line and not line.strip() for line in lines):
        return None  # Shifted, a line of spaces only loses width the edit can no longer say.
    return fence(head, [line[cut:] for line in lines])


def refusal_edits(path: str, before: list[str], after: list[str]) -> Iterator[tuple[str, str]]:
    """(kind, edit) for edits that must be refused, built around the commit's first change."""
    _, changes = equal_map(before, after)
    shown = groups(before, after, CONTEXT, unique=True)
    if not shown or not changes:
        return
    first = shown[0]
    if first.start > 0:
        yield from _ambiguous(path, before, after, shown)
        lines = list(after[first.a_start : first.a_stop])
        changed = lines[0].rstrip() + "  # changed"
        if changed.strip() not in {line.strip() for line in before}:
            lines[0] = changed
            edit = render(path, before, after, shown)
            old_block = "".join(line + "\n" for line in after[first.a_start : first.a_stop])
            new_block = "".join(line + "\n" for line in lines)
            yield "no_anchor", edit.replace(old_block, new_block, 1)
        marker = _indented_marker(marker_for(path), after[first.a_start]) + "\n"
        edit = render(path, before, after, shown)
        yield "no_marker", edit.replace(marker, "", 1)


def _ambiguous(
    path: str, before: list[str], after: list[str], shown: list[Group]
) -> Iterator[tuple[str, str]]:
    """The file with a copy of the first stretch's whole region put above it (after its first
    line, so that the copy is not pinned to the top): the edit fits either copy equally well."""
    first = shown[0]
    if first.stop >= len(before):
        return  # Pinned to the end, the stretch fits only the copy that ends the file.
    region = before[first.start : first.stop]
    at = next((n for n in range(1, first.start) if before[n - 1].strip()), None)
    if at is None or len(region) < 2:
        return
    text = "".join(line + "\n" for line in [*before[:at], *region, *before[at:]])
    yield "ambiguous", text + "\0" + render(path, before, after, shown)


def _whitespace_changes(before: Sequence[str], after: Sequence[str]) -> bool:
    """Whether the commit changes some line's whitespace only: a shifted (tolerantly matched)
    edit cannot say that, as it keeps the file's whitespace on lines that match."""
    _, changes = equal_map(before, after)
    for i1, i2, j1, j2 in changes:
        if {x.strip() for x in before[i1:i2]} & {x.strip() for x in after[j1:j2]}:
            return True
    return False


def cases_for(base: dict) -> Iterator[dict]:
    [(path, text)] = base["files_before"].items()
    want = base["expect"]["files_after"][path]
    before, after = lines_of(text), lines_of(want)
    if text.count("\r") or not before:
        return
    if [x.strip() for x in before if x.strip()] == [x.strip() for x in after if x.strip()]:
        return  # Whitespace only: a lazy edit's tolerant anchors keep the file's whitespace.
    good = {"files_after": {path: want}}
    refuse = {"error": "drops_unshown"}
    shapes = [
        ("unique", groups(before, after, CONTEXT, unique=True)),
        ("ctx3", groups(before, after, CONTEXT, unique=False)),
        ("whole", whole_groups(before, after)),
    ]
    for kind, shown in shapes:
        if shown:
            expect = refuse if drops_unshown(before, after, shown) else good
            yield make_case(base, kind, {path: text}, render(path, before, after, shown), expect)
    unique, unique_groups = render(path, before, after, shapes[0][1]), shapes[0][1]
    dropping = drops_unshown(before, after, unique_groups)
    crlf_want = {"files_after": {path: crlf(want)}}
    yield make_case(base, "crlf", {path: crlf(text)}, unique, refuse if dropping else crlf_want)
    dedented = None if _whitespace_changes(before, after) else dedent_edit(unique)
    if dedented is not None:
        yield make_case(base, "dedent", {path: text}, dedented, refuse if dropping else good)
    for kind, edit in refusal_edits(path, before, after):
        files = {path: text}
        if "\0" in edit:
            changed, edit = edit.split("\0", 1)
            files = {path: changed}
        yield make_case(base, kind, files, edit, {"error": kind})


def build(source: Path, out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with gzip.open(out, "wt") as handle:
        for base in base_cases(source):
            for case in cases_for(base):
                handle.write(json.dumps(case) + "\n")
                count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    count = build(args.source, args.out)
    print(f"wrote {count} lazy-edit cases to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
