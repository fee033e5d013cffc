"""Running a parsed edit over a set of files: every block in order, all of it or none of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kestrel.edits.apply import apply_hunk
from kestrel.edits.doc import Doc, parse_doc, render_doc, split_edit_lines
from kestrel.edits.errors import (
    Ambiguous,
    BlockFailure,
    EditError,
    EditRejected,
    FileExists,
    FileMissing,
    MalformedEdit,
)
from kestrel.edits.indent import restyler
from kestrel.edits.model import Create, Delete, Hunk, Move, Replace, Step, Update
from kestrel.edits.report import ambiguous


def apply_steps(files: Mapping[str, str], steps: Sequence[Step]) -> dict[str, str]:
    """The file set after every step, or a refusal naming the blocks that failed and applied."""
    if not steps:
        raise MalformedEdit("the edit contains no changes")
    work = _Work(dict(files))
    applied: list[int] = []
    failed: list[BlockFailure] = []
    for number, step in enumerate(steps, 1):
        try:
            work.apply(step)
        except EditError as error:
            failed.append(BlockFailure(index=number, path=step.path, error=error))
        else:
            applied.append(number)
    if failed:
        raise _rejection(len(steps), tuple(applied), tuple(failed))
    return work.result()


class _Work:
    """The files as the steps so far left them; consecutive hunks share one parsed `Doc`."""

    def __init__(self, state: dict[str, str]) -> None:
        self.state = state
        self.docs: dict[str, Doc] = {}
        self.shifts: dict[str, list[tuple[int, int]]] = {}
        self.cursors: dict[str, int] = {}
        """Per file, the line below the last hunk landed (for formats read in order)."""

    def result(self) -> dict[str, str]:
        for path in list(self.docs):
            self._flush(path)
        return self.state

    def _flush(self, path: str) -> None:
        doc = self.docs.pop(path, None)
        if doc is not None:
            self.state[path] = render_doc(doc)

    def apply(self, step: Step) -> None:
        # Each branch computes the new value first, so a refused step changes nothing.
        if isinstance(step, Update):
            self._update(step)
            return
        self._flush(step.path)
        state = self.state
        if isinstance(step, Create):
            existing = state.get(step.path)
            if existing is not None and existing != "" and not step.overwrite:
                raise FileExists(
                    f"{step.path} already exists; change it with an update instead of creating it",
                    path=step.path,
                )
            state[step.path] = step.content
            return
        text = _existing(state, step.path)
        if isinstance(step, Delete):
            del state[step.path]
        elif isinstance(step, Move):
            self._flush(step.to)
            if step.to in state and step.to != step.path:
                raise FileExists(
                    f"cannot move {step.path} to {step.to}: it already exists", path=step.to
                )
            del state[step.path]
            state[step.to] = text
        else:
            state[step.path] = replace_text(text, step)

    def _update(self, step: Update) -> None:
        doc = self.docs.get(step.path)
        if doc is None:
            doc = parse_doc(_existing(self.state, step.path))
        shifts = self.shifts.setdefault(step.path, [])
        shift = 0
        if step.hunk.hint is not None:
            for at, delta in shifts:
                if at <= step.hunk.hint + shift:
                    shift += delta
        after = self.cursors.get(step.path, 0) if step.in_order else None
        doc, start, removed = apply_hunk(doc, step.hunk, step.path, hint_shift=shift, after=after)
        shifts.append((start, len(step.hunk.new) - removed))
        self.cursors[step.path] = start + len(step.hunk.new)
        if step.ends_with_newline and doc.eols and not doc.eols[-1]:
            doc = replace(doc, eols=(*doc.eols[:-1], doc.eol))
        self.docs[step.path] = doc


def _existing(state: Mapping[str, str], path: str) -> str:
    text = state.get(path)
    if text is None:
        raise FileMissing(f"{path} does not exist; create it first", path=path)
    return text


def _update(text: str, step: Update, shifts: list[tuple[int, int]]) -> str:
    shift = 0
    if step.hunk.hint is not None:
        for at, delta in shifts:
            if at <= step.hunk.hint + shift:
                shift += delta
    doc, start, removed = apply_hunk(parse_doc(text), step.hunk, step.path, hint_shift=shift)
    shifts.append((start, len(step.hunk.new) - removed))
    return render_doc(doc)


def replace_text(text: str, step: Replace) -> str:
    """str_replace: an exact unique substring first, then the tolerant line tiers."""
    old, new = step.old, step.new
    if old == new:
        raise MalformedEdit(
            "old_str and new_str are the same; the edit would change nothing", path=step.path
        )
    if not old:
        if text == "":
            return new
        raise Ambiguous(
            f"old_str is empty, which matches everywhere in {step.path}; give the text to "
            "replace (to rewrite the whole file, create it anew)",
            path=step.path,
        )
    if "\r\n" in text and "\r\n" not in old and "\n" in old and old not in text:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 1 or (count > 1 and step.replace_all):
        return text.replace(old, _in_file_style(text, old, new))
    if count > 1:
        starts = _substring_lines(text, old)
        raise ambiguous(step.path, starts, "exact", "old_str")
    old_lines, new_lines = _as_lines(step.old, step.new)
    if not old_lines:
        raise ambiguous(step.path, [], "exact", "old_str")
    doc, start, _ = apply_hunk(parse_doc(text), Hunk(old=old_lines, new=new_lines), step.path)
    if new_lines and _ends_mid_line(step.old, step.new):
        doc = _join_next(doc, start + len(new_lines) - 1)
    return render_doc(doc)


def _ends_mid_line(old: str, new: str) -> bool:
    """Whether `old` takes a line's newline that `new` does not give back, as a substring
    replace would: the line after the match then joins the last new line."""
    trail = min(len(old) - len(old.rstrip("\n")), len(new) - len(new.rstrip("\n")))
    return old[: len(old) - trail].endswith("\n") and not new[: len(new) - trail].endswith("\n")


def _join_next(doc: Doc, at: int) -> Doc:
    """`doc` with line `at + 1` joined onto line `at` (at the end: line `at` loses its newline)."""
    lines, eols = list(doc.lines), list(doc.eols)
    if at + 1 < len(lines):
        lines[at : at + 2] = [lines[at] + lines[at + 1]]
        eols[at : at + 2] = [eols[at + 1]]
    elif 0 <= at < len(lines):
        eols[at] = ""
    return replace(doc, lines=tuple(lines), eols=tuple(eols))


def _in_file_style(text: str, old: str, new: str) -> str:
    """`new` with the indentation of its whole lines in the file's style where it contradicts
    a consistent file (`kestrel.edits.indent.restyler`); a first line that starts mid-line
    (where `old` does) is left as written."""
    if "\t" not in new and "\n\t" not in text and not text.startswith("\t"):
        return new  # Spaces into a file not indented with tabs: nothing to convert.
    lines = new.split("\n")
    restyle = restyler(text.split("\n"), lines[1:] if not _at_line_start(text, old) else lines)
    if restyle is None:
        return new
    head = lines[0] if not _at_line_start(text, old) else restyle(lines[0])
    return "\n".join([head, *(restyle(line) for line in lines[1:])])


def _at_line_start(text: str, old: str) -> bool:
    at = text.find(old)
    return at == 0 or (at > 0 and text[at - 1] == "\n")


def _substring_lines(text: str, needle: str) -> list[int]:
    starts: list[int] = []
    at = text.find(needle)
    while at != -1:
        starts.append(text.count("\n", 0, at))
        at = text.find(needle, at + len(needle))
    return starts


def _as_lines(old: str, new: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """old_str/new_str as whole lines, dropping the newlines both start or end with."""
    lead = min(len(old) - len(old.lstrip("\n")), len(new) - len(new.lstrip("\n")))
    old, new = old[lead:], new[lead:]
    trail = min(len(old) - len(old.rstrip("\n")), len(new) - len(new.rstrip("\n")))
    if trail:
        old, new = old[:-trail], new[:-trail]
    new_lines = split_edit_lines(new)
    if new.endswith("\n"):
        # `old` ends mid-line, before the line's own newline; a newline `new` ends with comes
        # before that one, so it ends a line of its own and an empty line follows.
        new_lines.append("")
    return tuple(split_edit_lines(old)), tuple(new_lines)


def _rejection(total: int, applied: tuple[int, ...], failed: tuple[BlockFailure, ...]) -> EditError:
    if total == 1:
        return failed[0].error
    done = ", ".join(str(n) for n in applied) or "none"
    reasons = "\n".join(f"block {f.index} ({f.path}): {f.error.message}" for f in failed)
    message = (
        f"Nothing was applied: {len(failed)} of {total} blocks failed. "
        f"Blocks that would apply: {done}. Resend the whole edit with these fixed:\n{reasons}"
    )
    return EditRejected(message, applied=applied, failed=failed)
