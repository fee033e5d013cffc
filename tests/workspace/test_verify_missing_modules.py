"""A module pytest could not import: the project's own (the model must fix it), or one the
environment lacks, such as a third-party package or an extension module nobody compiled."""

from __future__ import annotations

from pathlib import Path

from kestrel.workspace.verify.failures import CheckResult, Failure, VerificationReport
from kestrel.workspace.verify.imports import own_missing_modules


def kind_of(root: Path, module: str, changed: tuple[str, ...] = ("pkg/core.py",)) -> str:
    failure = Failure(
        message=f"ModuleNotFoundError: No module named '{module}'", kind="error", tool="pytest"
    )
    check = CheckResult(name="pytest", command=("pytest",), status="failed", failures=(failure,))
    judged = own_missing_modules(VerificationReport((check,)), root, changed)
    return judged.checks[0].failures[0].kind


def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg" / "_build").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("")
    (tmp_path / "pkg" / "_build" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "_build" / "_speedups.pyx").write_text("def f(): pass\n")
    return tmp_path


def test_a_module_of_the_project_is_the_changes_to_fix(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert kind_of(root, "pkg.helpers") == "test"  # Named in the package, missing: a typo.
    assert kind_of(root, "pkg.core") == "test"


def test_a_third_party_package_is_the_environments(tmp_path: Path) -> None:
    assert kind_of(project(tmp_path), "asgiref.sync") == "error"


def test_an_extension_module_with_only_its_sources_is_not_built_here(tmp_path: Path) -> None:
    """As scikit-learn's `sklearn.__check_build._check_build` in a checkout nobody compiled."""
    assert kind_of(project(tmp_path), "pkg._build._speedups") == "error"


def test_an_import_error_naming_a_missing_module_counts_too(tmp_path: Path) -> None:
    """Packages that wrap the failure (scikit-learn's build check) raise ImportError."""
    from kestrel.workspace.verify.parsers_pytest import parse_pytest

    root = project(tmp_path)
    output = (
        "==================================== ERRORS ====================================\n"
        "_______________ ERROR collecting pkg/tests/test_core.py _______________\n"
        "pkg/_build/__init__.py:31: in <module>\n"
        "    raise ImportError(msg)\n"
        "E   ImportError: No module named 'pkg._build._speedups'\n"
        "=========================== short test summary info ============================\n"
        "ERROR pkg/tests/test_core.py\n"
        "1 error in 0.20s\n"
    )
    [failure] = parse_pytest(output).failures
    assert failure.kind == "error"
    check = CheckResult(name="pytest", command=("pytest",), status="failed", failures=(failure,))
    judged = own_missing_modules(VerificationReport((check,)), root, ("pkg/core.py",))
    assert judged.checks[0].failures[0].kind == "error"
