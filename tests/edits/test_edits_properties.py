"""Properties: edits invert exactly, perturbed edits never land wrongly, conventions survive."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.edits import EditError, apply_edit

WORDS = ["x = 1", "return y", "def f():", "pass", "# note", "if a:", "}"]
INDENTS = ["", "    ", "        ", "\t"]
LINE = st.sampled_from(["", *(indent + word for indent in INDENTS for word in WORDS)])


@st.composite
def files_and_span(draw: st.DrawFn) -> tuple[str, list[str], int, int, str, bool]:
    # The last line is never blank: a blank last line without a final newline reads the same
    # as a final newline, and the edits below never touch it.
    lines = [*draw(st.lists(LINE, min_size=1, max_size=30)), "end"]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    final = draw(st.booleans())
    start = draw(st.integers(0, len(lines) - 2))
    end = draw(st.integers(start + 1, min(len(lines) - 1, start + 6)))
    text = eol.join(lines) + (eol if final else "")
    return text, lines, start, end, eol, final


def unique_span(lines: list[str], start: int, end: int) -> bool:
    needle = lines[start:end]
    hits = [i for i in range(len(lines)) if lines[i : i + len(needle)] == needle]
    return hits == [start] and any(line.strip() for line in needle)


def sr(old: list[str], new: list[str]) -> str:
    body = "".join(line + "\n" for line in old) + "=======\n" + "".join(x + "\n" for x in new)
    return f"f.txt\n<<<<<<< SEARCH\n{body}>>>>>>> REPLACE\n"


def mixes_indentation(lines: list[str]) -> bool:
    indents = {line[: len(line) - len(line.lstrip())][:1] for line in lines if line.strip()}
    return {" ", "\t"} <= indents


@settings(max_examples=200, suppress_health_check=[HealthCheck.filter_too_much])
@given(files_and_span(), st.lists(LINE, min_size=0, max_size=5))
def test_an_edit_and_its_inverse_restore_the_file_byte_for_byte(case, new):
    text, lines, start, end, _, _ = case
    old = lines[start:end]
    if not unique_span(lines, start, end) or not new or not any(x.strip() for x in new):
        return
    if mixes_indentation(lines):
        return  # The forward edit may leave one style; then the inverse is written in it.
    try:
        after = apply_edit({"f.txt": text}, sr(old, new), "search_replace")["f.txt"]
    except EditError:
        return  # the new text may make the inverse ambiguous or the edit a tolerant match
    try:
        back = apply_edit({"f.txt": after}, sr(new, old), "search_replace")["f.txt"]
    except EditError:
        return
    assert back == text


@settings(max_examples=200)
@given(files_and_span(), st.lists(LINE, min_size=1, max_size=4), st.integers(0, 3))
def test_a_perturbed_edit_lands_right_or_is_refused(case, new, how):
    text, lines, start, end, eol, final = case
    old = lines[start:end]
    if not unique_span(lines, start, end):
        return
    expected_lines = lines[:start] + new + lines[end:]
    if how == 0:
        given_old = [line + "  " for line in old]  # trailing whitespace
    elif how == 1:
        given_old = [*old[:1], "", *old[1:]]  # a blank line added
    elif how == 2:
        given_old = ["    " + line if line else line for line in old]  # shifted right
    else:
        given_old = [line.replace("\t", "    ") for line in old]  # tabs as spaces
    if any(lines[i : i + len(given_old)] == given_old for i in range(len(lines))):
        return  # the perturbed text is, verbatim, some other part of the file
    try:
        after = apply_edit({"f.txt": text}, sr(given_old, new), "search_replace")["f.txt"]
    except EditError:
        return
    body = after.split(eol)
    if final:
        assert body.pop() == ""
    # Landed: exactly the right lines changed, modulo how new lines were re-indented.
    assert len(body) == len(expected_lines)
    assert body[:start] == lines[:start]
    assert body[start + len(new) :] == lines[end:]
    assert [x.strip() for x in body[start : start + len(new)]] == [x.strip() for x in new]


@settings(max_examples=200)
@given(files_and_span(), st.lists(LINE, min_size=0, max_size=4))
def test_line_endings_and_final_newline_are_preserved(case, new):
    text, lines, start, end, eol, final = case
    if not unique_span(lines, start, end):
        return
    try:
        after = apply_edit({"f.txt": text}, sr(lines[start:end], new), "search_replace")["f.txt"]
    except EditError:
        return
    if eol == "\r\n":
        assert "\n" not in after.replace("\r\n", "")
    assert after.endswith(eol) == final
