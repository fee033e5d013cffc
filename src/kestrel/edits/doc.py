"""A file's text as lines, plus the conventions an edit must keep: endings, BOM, last newline."""

from __future__ import annotations

from dataclasses import dataclass

BOM = "\ufeff"


@dataclass(frozen=True, slots=True, kw_only=True)
class Doc:
    """Line contents (without endings), each line's ending, and whether a BOM leads the file.

    The last line's ending is `""` when the file does not end with a newline.
    """

    lines: tuple[str, ...]
    eols: tuple[str, ...]
    bom: bool = False
    eol: str = "\n"
    """The ending most lines use; new lines get it."""
    mixed: bool = False
    """Whether the file uses both LF and CRLF."""

    @property
    def final_newline(self) -> bool:
        """Whether the last line ends with a newline (true for an empty file)."""
        return not self.eols or self.eols[-1] != ""


def parse_doc(text: str) -> Doc:
    """Split `text` into a `Doc`; `render_doc(parse_doc(t)) == t` for every string."""
    bom = text.startswith(BOM)
    if bom:
        text = text[1:]
    if not text:
        return Doc(lines=(), eols=(), bom=bom)
    pieces = text.split("\n")
    last = pieces.pop()
    if "\r" not in text:
        lines = pieces
        eols = ["\n"] * len(pieces)
    else:
        lines = [p[:-1] if p.endswith("\r") else p for p in pieces]
        eols = ["\r\n" if p.endswith("\r") else "\n" for p in pieces]
    if last:
        lines.append(last)
        eols.append("")
    crlf, lf = eols.count("\r\n"), eols.count("\n")
    eol = "\r\n" if crlf > lf else "\n"
    return Doc(lines=tuple(lines), eols=tuple(eols), bom=bom, eol=eol, mixed=bool(crlf and lf))


def render_doc(doc: Doc) -> str:
    """The text of `doc`, byte for byte in its own conventions."""
    body = "".join([line + eol for line, eol in zip(doc.lines, doc.eols, strict=True)])
    return BOM + body if doc.bom else body


def split_edit_lines(text: str) -> list[str]:
    """Lines of a piece of edit text, without endings; one trailing newline ends the last line."""
    if not text:
        return []
    if text.endswith("\n"):
        text = text[:-1]
    return [line.removesuffix("\r") for line in text.split("\n")]
