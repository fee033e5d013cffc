"""An editor's prompt as Kestrel's task text: the words typed, then the files attached.

A resource link (a file the person mentioned) becomes a reference the model reads with its
tools; an embedded resource (a file or a selection whose text the editor sent) is quoted whole,
since it may differ from the file on disk (unsaved edits, or only part of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def shown_path(uri: str, cwd: Path) -> str:
    """A `file:` URI as a path relative to `cwd` when it lies inside, else absolute; any other
    URI as it is. A fragment (`#L10:20`, a line range) is kept after the path."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = Path(unquote(parsed.path))
    try:
        shown = path.relative_to(cwd).as_posix()
    except ValueError:
        shown = str(path)
    return f"{shown}#{parsed.fragment}" if parsed.fragment else shown


def task_text(blocks: Sequence[PromptBlock], cwd: Path) -> str:
    """The task: the text blocks in order, then a list of referenced files and the quoted
    text of embedded ones."""
    said: list[str] = []
    linked: list[str] = []
    quoted: list[str] = []
    for block in blocks:
        match block:
            case TextContentBlock():
                said.append(block.text)
            case ResourceContentBlock():
                linked.append(_link_line(block, cwd))
            case EmbeddedResourceContentBlock():
                quoted.append(_quoted(block, cwd))
            case ImageContentBlock() | AudioContentBlock():
                said.append(
                    f"({block.type} attached; Kestrel cannot read {block.type}s, so it "
                    "was left out)"
                )
    parts = ["\n".join(said).strip()]
    if linked:
        parts.append("Files the person attached (read them as needed):\n" + "\n".join(linked))
    if quoted:
        parts.append("Attached by the person, as their editor holds it:\n\n" + "\n\n".join(quoted))
    return "\n\n".join(part for part in parts if part)


def _link_line(block: ResourceContentBlock, cwd: Path) -> str:
    line = f"- {shown_path(block.uri, cwd)}"
    if block.description:
        line += f" ({block.description})"
    return line


def _quoted(block: EmbeddedResourceContentBlock, cwd: Path) -> str:
    resource = block.resource
    where = shown_path(resource.uri, cwd)
    if isinstance(resource, BlobResourceContents):
        kind = resource.mime_type or "binary"
        return f"{where}: {kind} content, not shown"
    fence = "````" if "```" in resource.text else "```"
    body = resource.text if resource.text.endswith("\n") else resource.text + "\n"
    return f"{where}:\n{fence}\n{body}{fence}"
