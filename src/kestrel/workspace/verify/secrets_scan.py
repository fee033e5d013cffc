"""Secrets in the lines a change added: detect-secrets' own plugins with their default settings,
and a check for PEM private key blocks.

Only the added lines are scanned: each file is written to a private temporary folder under its
own name (detect-secrets picks its rules by file type) with every other line left blank, so
line numbers stay those of the file. No finding, message or log line holds a secret's value:
a finding names the file, the line and the kind of secret, with the value masked.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from kestrel.workspace.verify.changed_text import ChangedText
from kestrel.workspace.verify.failures import Failure, Finding

TOOL = "detect-secrets"
PEM_TOOL = "secrets"
REPORTED_ONLY = frozenset(
    {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword", "Public IP (ipv4)"}
)
"""Kinds detect-secrets guesses at from the look of a string (hashes, ids and test passwords
match them as often as real keys): shown, but they do not stop the apply."""
_KINDS = {
    "AWS Access Key": "AWS access key",
    "Private Key": "private key",
    "Secret Keyword": "hard-coded password or secret",
    "Base64 High Entropy String": "high-entropy string (a possible key)",
    "Hex High Entropy String": "high-entropy hex string (a possible key)",
}
_ALLOWLIST_FILTER = "detect_secrets.filters.allowlist.is_line_allowlisted"
_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----[\s\S]{0,200}?[A-Za-z0-9+/]{32,}"
)
_MASK_SHOWN = 4
_MASK_STARS = 12
# detect-secrets keeps its settings in one process-wide object: one scan at a time.
_SETTINGS_LOCK = threading.Lock()


def mask(value: str) -> str:
    """`value` with all but its first few characters hidden (all of it when it is short)."""
    shown = value[:_MASK_SHOWN] if len(value) >= 4 * _MASK_SHOWN else ""
    return shown + "*" * min(max(len(value) - len(shown), 4), _MASK_STARS)


def secret_findings(texts: Sequence[ChangedText]) -> list[Finding]:
    """Secrets on the added lines of `texts`: private key blocks, then detect-secrets' finds."""
    found: list[Finding] = []
    pem_lines: set[tuple[str, int]] = set()
    for text in texts:
        for line in pem_blocks(text):
            pem_lines.add((text.path, line))
            found.append(_pem_finding(text.path, line))
    for path, line, kind, masked in _detect_secrets(texts):
        if kind == "Private Key" and (path, line) in pem_lines:
            continue  # the same block, already reported
        found.append(_detected(path, line, kind, masked))
    return found


def pem_blocks(text: ChangedText) -> list[int]:
    """Lines (from 1) where an added PEM private key block begins."""
    content = text.text()
    lines: list[int] = []
    for match in _PEM.finditer(content):
        line = content.count("\n", 0, match.start()) + 1
        if line in text.added:
            lines.append(line)
    return lines


def _pem_finding(path: str, line: int) -> Finding:
    message = (
        "adds a private key block (value masked); keep keys out of the code: read them from a "
        "file the repository ignores or from a secret store"
    )
    failure = Failure(
        file=path, line=line, message=message, kind="security", tool=PEM_TOOL, code="private-key"
    )
    return Finding(failure=failure, blocking=True)


def _detected(path: str, line: int, kind: str, masked: str) -> Finding:
    what = _KINDS.get(kind, kind)
    blocking = kind not in REPORTED_ONLY
    advice = (
        "remove it and read it from the environment or a secret store"
        if blocking
        else "make sure it is not a credential"
    )
    failure = Failure(
        file=path,
        line=line,
        message=f"adds {_article(what)} {what} (value masked: {masked}); {advice}",
        kind="security",
        tool=TOOL,
        code=kind,
    )
    return Finding(failure=failure, blocking=blocking)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _detect_secrets(texts: Sequence[ChangedText]) -> list[tuple[str, int, str, str]]:
    """(path, line, kind, masked value) of each secret detect-secrets finds on an added line;
    the value itself never leaves this function."""
    if not texts:
        return []
    from detect_secrets.core.secrets_collection import SecretsCollection
    from detect_secrets.settings import default_settings

    found: list[tuple[str, int, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kestrel-secrets-") as folder:
        names = _write_added(Path(folder), texts)
        with _SETTINGS_LOCK, default_settings() as settings:
            # A comment on the line must not silence the gate: a person decides instead.
            settings.disable_filters(_ALLOWLIST_FILTER)
            collection = SecretsCollection(root=folder)
            for name in names:
                collection.scan_file(name)
            for name, secrets in collection.data.items():
                path = names.get(name)
                if path is None:
                    continue
                found.extend(
                    (path, s.line_number, str(s.type), mask(str(s.secret_value or "")))
                    for s in secrets
                )
    return sorted(set(found))


def _write_added(folder: Path, texts: Sequence[ChangedText]) -> dict[str, str]:
    """Write each file's added lines (others blank) as `<n>/<its name>`; name -> its path."""
    names: dict[str, str] = {}
    for number, text in enumerate(texts):
        name = f"{number}/{Path(text.path).name or 'file'}"
        target = folder / name
        target.parent.mkdir()
        kept = [line if n in text.added else "" for n, line in enumerate(text.lines, start=1)]
        # ASCII, one character for one: detect-secrets opens the file in the locale's encoding.
        target.write_text("\n".join(kept) + "\n", encoding="ascii", errors="replace")
        names[name] = text.path
    return names
