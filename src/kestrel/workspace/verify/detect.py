"""Which checks apply to a change: syntax, linters and type checkers the project configures, and
the tests the change concerns. Pure over `ProjectFiles` and a `which` function."""

from __future__ import annotations

import configparser
import json
import posixpath
import shutil
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kestrel.workspace.verify.parsers import ParserName
from kestrel.workspace.verify.project import DiskFiles, ProjectFiles
from kestrel.workspace.verify.related import related_test_tiers
from kestrel.workspace.verify.syntax import checks_syntax

Which = Callable[[str], str | None]
"""Finds a program on the search path, like `shutil.which`."""

PYTHON_SOURCES = (".py", ".pyi")
TS_SOURCES = (".ts", ".tsx", ".mts", ".cts")
JS_SOURCES = (".js", ".jsx", ".mjs", ".cjs", *TS_SOURCES)
ESLINT_CONFIGS = tuple(
    [f"eslint.config.{ext}" for ext in ("js", "mjs", "cjs", "ts", "mts", "cts")]
    + [f".eslintrc{ext}" for ext in ("", ".js", ".cjs", ".json", ".yaml", ".yml")]
)
MAX_GO_PACKAGES = 8
PYTEST_OPTIONS = ("-q", "-rA", "--color=no", "-p", "no:cacheprovider")
MYPY_OPTIONS = ("--show-column-numbers", "--no-pretty", "--no-color-output")
IMPORTERS_TIMEOUT_S = 120.0
"""Longest the wider tests (those that only import a changed module) may take."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One verification step: the program to run, where, and which parser reads its output.

    `command` is an argument vector, never a shell string. The `syntax` check runs in process
    over `paths` and has no command. `timeout_s` caps this check below the verifier's own
    timeout; `note` is added to its summary (e.g. how many tests were left out).
    """

    name: str
    command: tuple[str, ...]
    parser: ParserName
    cwd: Path
    paths: tuple[str, ...] = ()
    ok_exit_codes: tuple[int, ...] = (0,)
    timeout_s: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class _Scope:
    root: Path
    files: ProjectFiles
    which: Which
    changed: tuple[str, ...]
    present: tuple[str, ...]
    full: bool

    def tool(self, name: str) -> str | None:
        """A project-local installation of `name` first, then the search path."""
        for folder in (".venv/bin", "venv/bin"):
            if self.files.is_file(f"{folder}/{name}"):
                return str(self.root / folder / name)
        return self.which(name)

    def node_tool(self, name: str) -> str | None:
        """A program from the project's own `node_modules/.bin`, never a global one."""
        local = f"node_modules/.bin/{name}"
        return str(self.root / local) if self.files.is_file(local) else None

    def changed_with(self, suffixes: tuple[str, ...]) -> tuple[str, ...]:
        """Changed files that still exist and end with one of `suffixes`."""
        return tuple(path for path in self.present if path.endswith(suffixes))


def detect_checks(
    root: Path,
    changed: Sequence[str],
    *,
    full: bool = False,
    npm_test: bool = False,
    files: ProjectFiles | None = None,
    which: Which = shutil.which,
) -> tuple[Check, ...]:
    """The checks for `changed` (root-relative paths) in the project at `root`, in run order.

    `full` runs whole test suites instead of the related tests; `npm_test` adds `npm test`,
    which runs only when the user asked for it.
    """
    files = files if files is not None else DiskFiles(root)
    paths = normalize_paths(root, changed)
    present = tuple(path for path in paths if files.is_file(path))
    scope = _Scope(root, files, which, paths, present, full)
    checks: list[Check | None] = [
        _syntax(scope),
        _ruff(scope),
        _mypy(scope),
        _tsc(scope),
        _eslint(scope),
        *_go(scope, "vet"),
        _cargo(scope, "check"),
        *_pytest(scope),
        *_go(scope, "test"),
        _cargo(scope, "test"),
        _npm_test(scope) if npm_test else None,
    ]
    return tuple(check for check in checks if check is not None)


def normalize_paths(root: Path, changed: Sequence[str]) -> tuple[str, ...]:
    """Root-relative POSIX paths, deduplicated; paths outside the root are dropped."""
    result: list[str] = []
    for raw in changed:
        path = Path(raw)
        if path.is_absolute():
            try:
                path = path.relative_to(root)
            except ValueError:
                continue
        text = posixpath.normpath(path.as_posix())
        if text in (".", "") or text == ".." or text.startswith("../"):
            continue
        result.append(text)
    return tuple(dict.fromkeys(result))


def _arg(path: str) -> str:
    # A path starting with "-" would be read as an option.
    return f"./{path}" if path.startswith("-") else path


def _syntax(scope: _Scope) -> Check | None:
    paths = tuple(path for path in scope.present if checks_syntax(path))
    if not paths:
        return None
    return Check(name="syntax", command=(), parser="syntax", cwd=scope.root, paths=paths)


def _ruff(scope: _Scope) -> Check | None:
    changed = scope.changed_with(PYTHON_SOURCES)
    ruff = scope.tool("ruff")
    if not changed or ruff is None or not _ruff_configured(scope.files):
        return None
    command = (ruff, "check", "--output-format=json", "--no-fix", "--force-exclude", "--")
    return Check(
        name="ruff", command=(*command, *map(_arg, changed)), parser="ruff", cwd=scope.root
    )


def _mypy(scope: _Scope) -> Check | None:
    changed = scope.changed_with(PYTHON_SOURCES)
    mypy = scope.tool("mypy")
    config = _mypy_config(scope.files)
    if mypy is None or config is None or not (changed or scope.full):
        return None
    # Configured `files` say what the project type-checks; otherwise check what changed.
    targets: tuple[str, ...] = ()
    if not config.has_files:
        if not changed:
            return None
        targets = ("--", *map(_arg, changed))
    return Check(
        name="mypy", command=(mypy, *MYPY_OPTIONS, *targets), parser="mypy", cwd=scope.root
    )


def _pytest(scope: _Scope) -> list[Check]:
    """The nearest tests ("pytest"), then the wider ones that import a changed module, with a
    shorter timeout so that a slow wide run neither holds up nor hides the nearest results."""
    python = _python(scope)
    if python is None:
        return []
    if scope.full:
        if not any(path.endswith(".py") for path in scope.files.files()):
            return []
        return [_pytest_check(scope, python, "pytest", ())]
    tiers = related_test_tiers(scope.changed, scope.files)
    note = f"{tiers.left_out} more importing test files left out" if tiers.left_out else ""
    if not tiers.nearest:
        # Nothing nearer to run: the importers are the tests, with the full timeout.
        if not tiers.importers:
            return []
        return [_pytest_check(scope, python, "pytest", tiers.importers, note=note)]
    checks = [_pytest_check(scope, python, "pytest", tiers.nearest)]
    if tiers.importers:
        name = "pytest (importers)"
        checks.append(
            _pytest_check(
                scope, python, name, tiers.importers, timeout_s=IMPORTERS_TIMEOUT_S, note=note
            )
        )
    return checks


def _pytest_check(
    scope: _Scope,
    python: str,
    name: str,
    targets: tuple[str, ...],
    *,
    timeout_s: float | None = None,
    note: str = "",
) -> Check:
    command = (python, "-m", "pytest", *PYTEST_OPTIONS, *map(_arg, targets))
    # Exit code 5 means "no tests collected": nothing failed.
    return Check(
        name=name,
        command=command,
        parser="pytest",
        cwd=scope.root,
        ok_exit_codes=(0, 5),
        timeout_s=timeout_s,
        note=note,
    )


def _python(scope: _Scope) -> str | None:
    for local in (".venv/bin/python", "venv/bin/python"):
        if scope.files.is_file(local):
            return str(scope.root / local)
    return scope.which("python3") or scope.which("python")


def _tsc(scope: _Scope) -> Check | None:
    tsc = scope.node_tool("tsc")
    relevant = scope.full or scope.changed_with(TS_SOURCES) or "tsconfig.json" in scope.present
    if tsc is None or not scope.files.is_file("tsconfig.json") or not relevant:
        return None
    return Check(
        name="tsc", command=(tsc, "--noEmit", "--pretty", "false"), parser="tsc", cwd=scope.root
    )


def _eslint(scope: _Scope) -> Check | None:
    eslint = scope.node_tool("eslint")
    changed = scope.changed_with(JS_SOURCES)
    if eslint is None or not changed or not _eslint_configured(scope.files):
        return None
    command = (eslint, "-f", "json", *map(_arg, changed))
    return Check(name="eslint", command=command, parser="eslint", cwd=scope.root)


def _go(scope: _Scope, verb: str) -> list[Check]:
    go = scope.which("go")
    if go is None or not scope.files.is_file("go.mod"):
        return []
    parser: ParserName = "go_vet" if verb == "vet" else "go_test"
    options = ("-json",) if verb == "test" else ()
    packages = sorted({posixpath.dirname(path) or "." for path in scope.changed_with((".go",))})
    packages = [p for p in packages if not {"vendor", "testdata"} & set(p.split("/"))]
    if scope.full or len(packages) > MAX_GO_PACKAGES:
        command = (go, verb, *options, "./...")
        return [Check(name=f"go {verb}", command=command, parser=parser, cwd=scope.root)]
    # One check per package, run inside it, so the bare file names go prints resolve.
    return [
        Check(
            name=f"go {verb} ./{package}" if package != "." else f"go {verb} .",
            command=(go, verb, *options, "."),
            parser=parser,
            cwd=scope.root / package,
        )
        for package in packages
    ]


def _cargo(scope: _Scope, verb: str) -> Check | None:
    cargo = scope.which("cargo")
    relevant = scope.full or any(
        path.endswith(".rs") or posixpath.basename(path) in ("Cargo.toml", "Cargo.lock")
        for path in scope.changed
    )
    if cargo is None or not scope.files.is_file("Cargo.toml") or not relevant:
        return None
    command: tuple[str, ...]
    if verb == "check":
        command = (cargo, "check", "--message-format=json", "--all-targets")
    else:
        command = (cargo, "test", "--no-fail-fast", "--color", "never")
    return Check(name=f"cargo {verb}", command=command, parser="cargo", cwd=scope.root)


def _npm_test(scope: _Scope) -> Check | None:
    npm = scope.which("npm")
    package = _json_object(scope.files.read_text("package.json"))
    scripts = package.get("scripts") if package else None
    if npm is None or not isinstance(scripts, dict) or "test" not in scripts:
        return None
    return Check(name="npm test", command=(npm, "test"), parser="exit_code", cwd=scope.root)


def _json_object(text: str | None) -> dict[str, object] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _toml_tool(files: ProjectFiles, name: str) -> dict[str, object] | None:
    text = files.read_text("pyproject.toml")
    if not text:
        return None
    try:
        tools = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        # A broken pyproject still shows intent; a textual look is enough to decide.
        return {} if f"[tool.{name}" in text else None
    section = tools.get(name) if isinstance(tools, dict) else None
    return section if isinstance(section, dict) else None


def _ruff_configured(files: ProjectFiles) -> bool:
    if files.is_file("ruff.toml") or files.is_file(".ruff.toml"):
        return True
    return _toml_tool(files, "ruff") is not None


@dataclass(frozen=True, slots=True)
class _MypyConfig:
    has_files: bool


def _mypy_config(files: ProjectFiles) -> _MypyConfig | None:
    section = _toml_tool(files, "mypy")
    if section is not None:
        return _MypyConfig(has_files=bool(section.get("files")))
    for name, header in (("mypy.ini", "mypy"), (".mypy.ini", "mypy"), ("setup.cfg", "mypy")):
        text = files.read_text(name)
        if text is None:
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        if parser.has_section(header):
            return _MypyConfig(has_files=bool(parser.get(header, "files", fallback="").strip()))
    return None


def _eslint_configured(files: ProjectFiles) -> bool:
    if any(files.is_file(name) for name in ESLINT_CONFIGS):
        return True
    package = _json_object(files.read_text("package.json"))
    return package is not None and "eslintConfig" in package
