"""Static analysis of the Python files a change touched, with bandit, in Kestrel's own process.

Bandit parses each file (it never imports or runs it) from a private temporary copy of its new
content; only issues on lines the change added are kept. Kestrel maps bandit's severity and
confidence to what the gate does:

- **blocks**: a HIGH severity issue, or one of `LIFTED` (code that runs or deserializes what it
  is given, SQL built from strings), found with MEDIUM or HIGH confidence;
- **reported**: any other issue of MEDIUM or HIGH severity, and those of `LOWERED` (a weak hash
  such as MD5, far more often a checksum or a protocol's requirement than a password hash);
- dropped: LOW severity issues (an `assert`, importing `subprocess`), which flag ordinary code
  far more often than a risk, and the hard-coded password tests, which the secret scan covers
  (their text would show the value).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kestrel.workspace.verify.changed_text import ChangedText
from kestrel.workspace.verify.failures import Failure, Finding

TOOL = "bandit"
LIFTED = frozenset({"B102", "B307", "B506", "B608"})
"""`exec`, `eval`, `yaml.load` without a safe loader, SQL built by string formatting: bandit
rates them MEDIUM, the gate treats them as HIGH."""
LOWERED = frozenset({"B324"})
DROPPED = frozenset({"B105", "B106", "B107"})
_CONFIDENT = frozenset({"MEDIUM", "HIGH"})
_BANDIT_LOCK = threading.Lock()


def bandit_findings(texts: Sequence[ChangedText]) -> list[Finding]:
    """Bandit's issues on the added lines of the Python files among `texts`."""
    python = [text for text in texts if text.python]
    if not python:
        return []
    with tempfile.TemporaryDirectory(prefix="kestrel-bandit-") as folder:
        names = _write_sources(Path(folder), python)
        issues = _run_bandit(list(names))
    added = {text.path: text.added for text in python}
    found: list[Finding] = []
    for issue in issues:
        path = names.get(str(issue.fname))
        if path is None or issue.test_id in DROPPED:
            continue
        lines = _lines_of(issue)
        if not lines & added[path]:
            continue  # on code the change did not write
        finding = _finding(path, min(lines & added[path]), issue)
        if finding is not None:
            found.append(finding)
    return sorted(found, key=lambda f: (f.failure.file or "", f.failure.line or 0))


def _write_sources(folder: Path, texts: Sequence[ChangedText]) -> dict[str, str]:
    """Write each file's new content as `<n>/<its name>.py`; written path -> the file's path."""
    names: dict[str, str] = {}
    for number, text in enumerate(texts):
        target = folder / str(number) / f"{Path(text.path).stem or 'module'}.py"
        target.parent.mkdir()
        target.write_text(text.text() + "\n", encoding="utf-8", errors="replace")
        names[str(target)] = text.path
    return names


def _run_bandit(files: list[str]) -> list[Any]:
    with _BANDIT_LOCK, _quiet():
        from bandit.core import config, manager  # type: ignore[import-untyped]

        # A `# nosec` comment must not silence the gate: a person decides instead.
        run = manager.BanditManager(config.BanditConfig(), "file", quiet=True, ignore_nosec=True)
        run.discover_files(files)
        run.run_tests()
        return list(run.get_issue_list())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep bandit's own noise out of the session's output: its plugin loader warns of its
    deprecations and logs report formats it cannot load, and a file it cannot parse is logged
    as an error; to the gate that file is only not scanned."""
    loggers = [logging.getLogger(name) for name in ("bandit", "stevedore")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


def _lines_of(issue: Any) -> set[int]:
    lines = {int(n) for n in getattr(issue, "linerange", None) or () if isinstance(n, int)}
    return lines or {int(issue.lineno)}


def _finding(path: str, line: int, issue: Any) -> Finding | None:
    severity, confidence = str(issue.severity), str(issue.confidence)
    lifted = severity == "HIGH" or issue.test_id in LIFTED
    blocking = confidence in _CONFIDENT and lifted and issue.test_id not in LOWERED
    if not blocking and severity == "LOW":
        return None
    verdict = "; blocks the apply" if blocking else ""
    message = (
        f"{issue.text} (bandit {issue.test}: severity {severity}, confidence {confidence}{verdict})"
    )
    failure = Failure(
        file=path, line=line, message=message, kind="security", tool=TOOL, code=issue.test_id
    )
    return Finding(failure=failure, blocking=blocking)
