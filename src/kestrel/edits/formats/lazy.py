"""Lazy edits: a file region (or whole file) with unchanged code elided by marker comments.

The edit is a path and the new text of a region, written as the file should read except that
unchanged code may be left out behind a marker line in the file's comment syntax
(`# ... existing code ...`, `// ... rest of the function ...`, `/* ... */`, `<!-- ... -->`,
or a bare `...`). As text, each file is a path line followed by a fenced block:

    src/app.py
    ```python
    # ... existing code ...
    def run():
        start()
        # ... existing code ...
    ```

It may also be given as `{"path": ..., "content": ...}` or a list of those. The merge itself
is in `kestrel.edits.lazy_merge`; this module reads the edit, tells markers from code (a bare
`...` can be Python's `Ellipsis`) and turns each file into a step.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kestrel.edits.doc import Doc, parse_doc, render_doc, split_edit_lines
from kestrel.edits.elide import Kind, classify, looks_like_note
from kestrel.edits.errors import (
    BlockFailure,
    EditError,
    EditRejected,
    FileMissing,
    MalformedEdit,
)
from kestrel.edits.lazy_merge import merge
from kestrel.edits.model import Create, Step

_FENCE = re.compile(r"\s*(`{3,}|~{3,})\s*([^`\s]*)[^`]*")
_PATH = re.compile(r"[\w./\\@+-]+")


def parse_lazy(edit: object, files: Mapping[str, str]) -> list[Step]:
    """Each file's merged content as a step; refuses (all of it) if any file's part fails."""
    blocks = read_blocks(edit, files)
    state = dict(files)
    steps: list[Step] = []
    failed: list[BlockFailure] = []
    for number, (path, content) in enumerate(blocks, 1):
        try:
            text = merge_lazy(state.get(path), content, path)
        except EditError as error:
            failed.append(BlockFailure(index=number, path=path, error=error))
            continue
        state[path] = text
        steps.append(Create(path=path, content=text, overwrite=True))
    if failed:
        raise _rejection(len(blocks), failed)
    return steps


def merge_lazy(current: str | None, content: str, path: str) -> str:
    """The new text of `path` (`None`: it does not exist) after the lazy edit `content`."""
    lines = split_edit_lines(content)
    kinds = classify(lines, path)
    if current is None:
        if any(kind == "marker" for kind in kinds):
            raise FileMissing(
                f"{path} does not exist, so the edit's elision markers stand for nothing; "
                "write the whole file without markers",
                path=path,
            )
        return "".join(line + "\n" for line in lines)
    doc = parse_doc(current)
    _refuse_notes(doc, lines, kinds, path)
    return render_doc(_resolve(doc, lines, kinds, path))


def _refuse_notes(doc: Doc, lines: Sequence[str], kinds: Sequence[Kind], path: str) -> None:
    known: set[str] | None = None
    for n, (line, kind) in enumerate(zip(lines, kinds, strict=True)):
        if kind != "code" or not looks_like_note(line):
            continue
        if known is None:
            known = {text.strip() for text in doc.lines}
        if line.strip() in known:
            continue
        raise MalformedEdit(
            f"line {n + 1} of the edit for {path} (`{line.strip()}`) reads like a note that "
            "code was left out, but elision markers need the dots: write it as "
            "`# ... existing code ...` in the file's comment syntax (if it is a real comment, "
            "reword it)",
            path=path,
        )


def _resolve(doc: Doc, lines: Sequence[str], kinds: Sequence[Kind], path: str) -> Doc:
    """Merge, settling each bare `...` that could be Python code: where both readings land
    and differ, or only the code reading does, refuse rather than guess."""
    markers = [kind == "marker" for kind in kinds]
    doubtful = _doubtful(doc, lines, kinds)
    if not doubtful:
        return merge(doc, lines, markers, path)
    elided = list(markers)
    for n in doubtful:
        elided[n] = True
    as_marker: Doc | EditError
    as_code: Doc | EditError
    try:
        as_marker = merge(doc, lines, elided, path)
    except EditError as error:
        as_marker = error
    try:
        as_code = merge(doc, lines, markers, path)
    except EditError as error:
        as_code = error
    if isinstance(as_marker, Doc) and (isinstance(as_code, EditError) or as_code == as_marker):
        return as_marker
    if isinstance(as_marker, EditError) and isinstance(as_code, EditError):
        raise as_marker
    n = doubtful[0]
    if lines[n].strip() in ("...", "\u2026"):
        raise MalformedEdit(
            f"the bare `...` at line {n + 1} of the edit for {path} could be Python's `...` "
            "(code) or an elision marker, and the two readings give different files. Write "
            "elided code as `# ... existing code ...`; to write a body that is `...`, also "
            "show the unchanged lines around that block",
            path=path,
        )
    raise MalformedEdit(
        f"line {n + 1} of the edit for {path} (`{lines[n].strip()}`) could be a comment (code) "
        "or an elision marker, and the two readings give different files. Write elided code "
        "as `# ... existing code ...`; to keep such a comment, reword it or show the unchanged "
        "lines around it",
        path=path,
    )


def _doubtful(doc: Doc, lines: Sequence[str], kinds: Sequence[Kind]) -> list[int]:
    """The doubtful lines whose both neighbours are file lines (else they can only be code)."""
    candidates = [n for n, kind in enumerate(kinds) if kind == "doubtful"]
    if not candidates:
        return []
    known = {line.strip() for line in doc.lines}

    def neighbour_known(n: int, step: int) -> bool:
        k = n + step
        while 0 <= k < len(lines) and not lines[k].strip():
            k += step
        if not 0 <= k < len(lines):
            return True  # an end of the edit: a marker there is plausible
        return kinds[k] != "code" or lines[k].strip() in known

    return [n for n in candidates if neighbour_known(n, -1) and neighbour_known(n, 1)]


def read_blocks(edit: object, files: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, content) for each file the edit changes, from text or from objects."""
    if isinstance(edit, str) and edit.lstrip().startswith(("{", "[")):
        with contextlib.suppress(json.JSONDecodeError):
            edit = json.loads(edit)
    if isinstance(edit, str):
        return _text_blocks(edit, files)
    calls = [edit] if isinstance(edit, Mapping) else edit
    if not isinstance(calls, list) or not calls:
        raise MalformedEdit(
            "a lazy edit is text (a path line, then a fenced block), an object with `path` "
            "and `content`, or a non-empty list of such objects"
        )
    return [_object_block(call, n) for n, call in enumerate(calls, 1)]


def _object_block(call: Any, number: int) -> tuple[str, str]:
    if not isinstance(call, Mapping):
        raise MalformedEdit(f"part {number} of the lazy edit is not an object")
    path, content = call.get("path"), call.get("content")
    if not isinstance(path, str) or not path.strip():
        raise MalformedEdit(f"part {number} of the lazy edit has no `path`")
    if not isinstance(content, str):
        raise MalformedEdit(f"part {number} of the lazy edit has no `content` text")
    return path.strip(), content


def _text_blocks(text: str, files: Mapping[str, str]) -> list[tuple[str, str]]:
    lines = split_edit_lines(text)
    blocks: list[tuple[str, str]] = []
    i = 0
    pending: str | None = None
    while i < len(lines):
        opened = _FENCE.fullmatch(lines[i])
        if opened is None:
            if lines[i].strip():
                pending = _path_of(lines[i], files)
            i += 1
            continue
        fence = opened.group(1)
        path = pending or _path_of(opened.group(2), files) or _only_file(files)
        end = _fence_end(lines, i + 1, fence)
        blocks.append((path, "".join(line + "\n" for line in lines[i + 1 : end])))
        pending = None
        i = end + 1
    if blocks:
        return blocks
    first = lines[0].strip() if lines else ""
    if first in files or (len(lines) > 1 and _PATH.fullmatch(first) and "." in first):
        return [(first, "".join(line + "\n" for line in lines[1:]))]
    return [(_only_file(files), text)]


def _fence_end(lines: Sequence[str], start: int, fence: str) -> int:
    for n in range(start, len(lines)):
        line = lines[n].strip()
        if line and line[0] == fence[0] and len(line) >= len(fence) and not line.strip(fence[0]):
            return n
    raise MalformedEdit(f"the code block opened with {fence} is never closed")


def _path_of(line: str, files: Mapping[str, str]) -> str | None:
    name = line.strip().strip("`*#: ").removeprefix("File").strip("`*#: ")
    if name in files or (_PATH.fullmatch(name) and ("." in name or "/" in name)):
        return name
    return None


def _only_file(files: Mapping[str, str]) -> str:
    if len(files) == 1:
        return next(iter(files))
    raise MalformedEdit(
        "the lazy edit does not say which file it changes; put the path on the line above the "
        "code block"
    )


def _rejection(total: int, failed: Sequence[BlockFailure]) -> EditError:
    if total == 1:
        return failed[0].error
    done = sorted(set(range(1, total + 1)) - {f.index for f in failed})
    reasons = "\n".join(f"block {f.index} ({f.path}): {f.error.message}" for f in failed)
    message = (
        f"Nothing was applied: {len(failed)} of {total} files failed. Files that would apply: "
        f"{', '.join(str(n) for n in done) or 'none'}. Resend the whole edit with these "
        f"fixed:\n{reasons}"
    )
    return EditRejected(message, applied=tuple(done), failed=tuple(failed))
