"""Which Python test files a change concerns, in two tiers: the nearest (changed tests, tests
named after a changed module, folders of a changed conftest) and the wider ones that import a
changed module (a cheap textual scan, not an import graph)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kestrel.workspace.verify.project import ProjectFiles

MAX_SCANNED_TESTS = 3000
MAX_IMPORTER_TESTS = 30
"""Importing test files run at most: the nearest to the changed modules first."""
# Layout folders that are not part of a module's import name.
_SOURCE_ROOTS = ("src", "lib", "python")


@dataclass(frozen=True, slots=True)
class RelatedTests:
    """The tests a change concerns: `nearest` (sorted), then `importers`, nearest first.

    `left_out` counts the importing test files dropped by the cap on `importers`.
    """

    nearest: tuple[str, ...] = ()
    importers: tuple[str, ...] = ()
    left_out: int = 0


def is_python_test(path: str) -> bool:
    """Whether pytest collects `path` by default (`test_*.py` or `*_test.py`)."""
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def related_tests(changed: Sequence[str], files: ProjectFiles) -> tuple[str, ...]:
    """pytest targets for `changed`: test files (and folders, for a changed conftest), sorted.

    Both tiers of `related_test_tiers`, every importer included.
    """
    tiers = related_test_tiers(changed, files, max_importers=None)
    return tuple(sorted({*tiers.nearest, *tiers.importers}))


def related_test_tiers(
    changed: Sequence[str], files: ProjectFiles, *, max_importers: int | None = MAX_IMPORTER_TESTS
) -> RelatedTests:
    """The tests for `changed` in two tiers; the importers capped at `max_importers` (None: all)."""
    tests = [path for path in files.files() if is_python_test(path)]
    nearest: set[str] = set()
    sources: list[str] = []
    modules: set[str] = set()
    stems: set[str] = set()
    for path in changed:
        if not path.endswith((".py", ".pyi")):
            continue
        name = posixpath.basename(path)
        if is_python_test(path) and files.is_file(path):
            nearest.add(path)
        elif name == "conftest.py":
            folder = posixpath.dirname(path)
            # A conftest deleted with its whole folder leaves nothing there to run.
            if not folder or any(f.startswith(f"{folder}/") for f in files.files()):
                nearest.add(folder or ".")
        else:
            sources.append(path)
            modules.update(module_names(path, files))
            stem = name.rsplit(".", 1)[0]
            if stem != "__init__":
                stems.update({f"test_{stem}.py", f"{stem}_test.py"})
    nearest.update(test for test in tests if posixpath.basename(test) in stems)
    if not modules:
        return RelatedTests(nearest=tuple(sorted(nearest)))
    found = importers(tests[:MAX_SCANNED_TESTS], sorted(modules), files)
    wider = rank_by_nearness([t for t in found if not _covered(t, nearest)], sources)
    kept = wider if max_importers is None else wider[: max(max_importers, 0)]
    return RelatedTests(tuple(sorted(nearest)), tuple(kept), len(wider) - len(kept))


def rank_by_nearness(tests: Sequence[str], sources: Sequence[str]) -> list[str]:
    """`tests` ordered by the most leading folders shared with one of `sources`, then by path."""

    def shared(test: str) -> int:
        folders = posixpath.dirname(test).split("/")
        best = 0
        for source in sources:
            count = 0
            for mine, theirs in zip(folders, posixpath.dirname(source).split("/"), strict=False):
                if mine != theirs or not mine:
                    break
                count += 1
            best = max(best, count)
        return best

    return sorted(tests, key=lambda test: (-shared(test), test))


def _covered(test: str, nearest: set[str]) -> bool:
    # A tier-1 folder (a changed conftest's) already runs every test file under it.
    return test in nearest or any(
        target == "." or test.startswith(f"{target}/") for target in nearest
    )


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
