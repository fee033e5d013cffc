"""Which Python test files a change concerns: changed tests, tests named after a changed module,
and tests that import one (a cheap textual scan, not an import graph)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence

from kestrel.workspace.verify.project import ProjectFiles

MAX_SCANNED_TESTS = 3000
# Layout folders that are not part of a module's import name.
_SOURCE_ROOTS = ("src", "lib", "python")


def is_python_test(path: str) -> bool:
    """Whether pytest collects `path` by default (`test_*.py` or `*_test.py`)."""
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def related_tests(changed: Sequence[str], files: ProjectFiles) -> tuple[str, ...]:
    """pytest targets for `changed`: test files (and folders, for a changed conftest), sorted."""
    tests = [path for path in files.files() if is_python_test(path)]
    targets: set[str] = set()
    modules: set[str] = set()
    stems: set[str] = set()
    for path in changed:
        if not path.endswith((".py", ".pyi")):
            continue
        name = posixpath.basename(path)
        if is_python_test(path) and files.is_file(path):
            targets.add(path)
        elif name == "conftest.py":
            folder = posixpath.dirname(path)
            # A conftest deleted with its whole folder leaves nothing there to run.
            if not folder or any(f.startswith(f"{folder}/") for f in files.files()):
                targets.add(folder or ".")
        else:
            modules.update(module_names(path, files))
            stem = name.rsplit(".", 1)[0]
            if stem != "__init__":
                stems.update({f"test_{stem}.py", f"{stem}_test.py"})
    targets.update(test for test in tests if posixpath.basename(test) in stems)
    if modules:
        targets.update(importers(tests[:MAX_SCANNED_TESTS], sorted(modules), files))
    return tuple(sorted(targets))


def module_names(path: str, files: ProjectFiles) -> list[str]:
    """The dotted names `path` may be imported by: from its package root, and without `src/`."""
    parts = path.rsplit(".", 1)[0].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(part.isidentifier() for part in parts[-1:]):
        return []
    names = []
    start = len(parts) - 1
    # Climb while the folder above is a package: the top package's parent is the import root.
    while start > 0 and files.is_file("/".join(parts[:start]) + "/__init__.py"):
        start -= 1
    names.append(".".join(parts[start:]))
    if len(parts) > 1 and parts[0] in _SOURCE_ROOTS:
        names.append(".".join(parts[1:]))
    if all(part.isidentifier() for part in parts):
        names.append(".".join(parts))
    return list(dict.fromkeys(name for name in names if name))


def importers(tests: Iterable[str], modules: Sequence[str], files: ProjectFiles) -> list[str]:
    """The test files whose text imports one of `modules`."""
    pattern = re.compile("|".join(_import_pattern(module) for module in modules), re.MULTILINE)
    found = []
    for test in tests:
        text = files.read_text(test)
        if text is not None and pattern.search(text):
            found.append(test)
    return found


def _import_pattern(module: str) -> str:
    dotted = re.escape(module)
    direct = rf"^[ \t]*(?:import[ \t]+{dotted}\b|from[ \t]+{dotted}(?:[ \t]|\.))"
    if "." not in module:
        return direct
    parent, leaf = module.rsplit(".", 1)
    named = rf"(?:\([^)]*\b{re.escape(leaf)}\b|[^\n]*\b{re.escape(leaf)}\b)"
    return rf"{direct}|^[ \t]*from[ \t]+{re.escape(parent)}[ \t]+import[ \t]+{named}"
