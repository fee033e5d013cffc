"""Which checks a change gets, decided over an in-memory project (and once over a real one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from verify_kit import write

from kestrel.workspace.verify import (
    Check,
    DiskFiles,
    MemoryFiles,
    detect_checks,
    normalize_paths,
    related_tests,
)

ROOT = Path("/work/project")
ON_PATH = {"ruff", "mypy", "python3", "go", "cargo", "npm"}


def which(name: str) -> str | None:
    return f"/usr/bin/{name}" if name in ON_PATH else None


def nothing_installed(name: str) -> str | None:
    return None


PYTHON_PROJECT = {
    "pyproject.toml": '[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nfiles = ["src"]\n',
    "src/shop/__init__.py": "",
    "src/shop/pricing.py": "def total(): ...\n",
    "src/shop/cart.py": "from shop.pricing import total\n",
    "src/shop/util/__init__.py": "",
    "src/shop/util/money.py": "X = 1\n",
    "tests/test_pricing.py": "def test_x(): ...\n",
    "tests/unit/pricing_test.py": "def test_y(): ...\n",
    "tests/test_checkout.py": "from shop import (\n    cart,\n    pricing,\n)\n",
    "tests/test_money.py": "import shop.util.money as money\n",
    "tests/test_cart.py": "from shop.cart import Cart\n",
    "tests/test_unrelated.py": "import os\n",
    "tests/helpers.py": "from shop.pricing import total\n",
    ".venv/lib/test_pricing.py": "vendored, never a target\n",
}


def checks(
    files: dict[str, str], changed: list[str], *, full: bool = False, npm_test: bool = False
) -> dict[str, Check]:
    found = detect_checks(
        ROOT, changed, full=full, npm_test=npm_test, files=MemoryFiles(files), which=which
    )
    return {check.name: check for check in found}


def test_a_python_change_gets_syntax_lint_types_and_related_tests():
    found = checks(PYTHON_PROJECT, ["src/shop/pricing.py"])
    assert list(found) == ["syntax", "ruff", "mypy", "pytest", "pytest (importers)"]
    assert found["syntax"].paths == ("src/shop/pricing.py",)
    assert found["ruff"].command == (
        "/usr/bin/ruff",
        "check",
        "--output-format=json",
        "--no-fix",
        "--force-exclude",
        "--",
        "src/shop/pricing.py",
    )
    # `files` is configured, so mypy checks what the project checks.
    assert found["mypy"].command == (
        "/usr/bin/mypy",
        "--show-column-numbers",
        "--no-pretty",
        "--no-color-output",
    )
    pytest_check = found["pytest"]
    assert pytest_check.command[:3] == ("/usr/bin/python3", "-m", "pytest")
    assert "-rA" in pytest_check.command and "-q" in pytest_check.command
    # Named after the module, in any tests folder; then those importing it (also in parentheses).
    assert pytest_check.command[-3:] == (
        "no:cacheprovider",
        "tests/test_pricing.py",
        "tests/unit/pricing_test.py",
    )
    assert pytest_check.ok_exit_codes == (0, 5)
    assert found["pytest (importers)"].command[-2:] == (
        "no:cacheprovider",
        "tests/test_checkout.py",
    )
    assert all(check.cwd == ROOT for check in found.values())


def test_every_command_is_an_argument_vector():
    found = detect_checks(
        ROOT, ["src/shop/pricing.py"], files=MemoryFiles(PYTHON_PROJECT), which=which
    )
    for check in found:
        assert isinstance(check.command, tuple)
        assert all(isinstance(arg, str) for arg in check.command)


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["tests/test_cart.py"], ("tests/test_cart.py",)),
        (["src/shop/util/money.py"], ("tests/test_money.py",)),
        (["src/shop/cart.py"], ("tests/test_cart.py", "tests/test_checkout.py")),
        # Importing any submodule runs the package's __init__.
        (
            ["src/shop/__init__.py"],
            ("tests/test_cart.py", "tests/test_checkout.py", "tests/test_money.py"),
        ),
        (["tests/conftest.py"], ("tests",)),
        (["README.md"], ()),
    ],
)
def test_related_tests(changed, expected):
    assert related_tests(changed, MemoryFiles(PYTHON_PROJECT)) == expected


def test_a_deleted_module_still_runs_the_tests_that_import_it():
    files = {k: v for k, v in PYTHON_PROJECT.items() if k != "src/shop/cart.py"}
    found = checks(files, ["src/shop/cart.py"])
    assert "syntax" not in found and "ruff" not in found
    assert found["pytest"].command[-1] == "tests/test_cart.py"
    assert found["pytest (importers)"].command[-1] == "tests/test_checkout.py"


def test_full_runs_the_whole_suite():
    found = checks(PYTHON_PROJECT, ["src/shop/pricing.py"], full=True)
    assert found["pytest"].command[-5:] == ("-q", "-rA", "--color=no", "-p", "no:cacheprovider")


def test_nothing_applies_to_a_readme():
    assert checks(PYTHON_PROJECT, ["README.md"]) == {}


def test_tools_must_be_configured_and_installed():
    bare = {k: v for k, v in PYTHON_PROJECT.items() if k != "pyproject.toml"}
    assert list(checks(bare, ["src/shop/pricing.py"])) == ["syntax", "pytest", "pytest (importers)"]
    found = detect_checks(
        ROOT,
        ["src/shop/pricing.py"],
        files=MemoryFiles(PYTHON_PROJECT),
        which=nothing_installed,
    )
    assert [check.name for check in found] == ["syntax"]


@pytest.mark.parametrize(
    ("config", "text"),
    [
        ("ruff.toml", "line-length = 100\n"),
        (".ruff.toml", ""),
        ("pyproject.toml", "[tool.ruff.lint]\nselect = ['E']\n"),
        ("pyproject.toml", "[tool.ruff\nbroken toml"),
    ],
)
def test_ruff_configuration_files(config, text):
    files = {"a.py": "x = 1\n", config: text}
    assert "ruff" in checks(files, ["a.py"])


@pytest.mark.parametrize(
    ("config", "text"),
    [
        ("mypy.ini", "[mypy]\nstrict = True\n"),
        ("setup.cfg", "[metadata]\nname = x\n\n[mypy]\nwarn_unused_ignores = True\n"),
        ("pyproject.toml", "[tool.mypy]\nstrict = true\n"),
    ],
)
def test_mypy_without_files_checks_the_changed_files(config, text):
    files = {"a.py": "x = 1\n", "b.py": "y = 2\n", config: text}
    found = checks(files, ["a.py", "b.py"])
    assert found["mypy"].command[-3:] == ("--", "a.py", "b.py")


def test_mypy_is_left_out_without_configuration():
    files = {"a.py": "", "setup.cfg": "[flake8]\nmax-line-length = 100\n"}
    assert "mypy" not in checks(files, ["a.py"])


def test_project_local_tools_come_first():
    files = {
        **PYTHON_PROJECT,
        ".venv/bin/ruff": "",
        ".venv/bin/python": "",
        "node_modules/.bin/tsc": "",
    }
    found = checks(files, ["src/shop/pricing.py"])
    assert found["ruff"].command[0] == str(ROOT / ".venv/bin/ruff")
    assert found["pytest"].command[0] == str(ROOT / ".venv/bin/python")


TS_PROJECT = {
    "package.json": '{"scripts": {"test": "jest"}}',
    "tsconfig.json": "{}",
    "eslint.config.mjs": "export default [];\n",
    "node_modules/.bin/tsc": "",
    "node_modules/.bin/eslint": "",
    "src/app.ts": "export const x = 1;\n",
    "src/view.jsx": "export default 1;\n",
}


def test_typescript_and_eslint_from_local_binaries():
    found = checks(TS_PROJECT, ["src/app.ts", "src/view.jsx"])
    assert list(found) == ["syntax", "tsc", "eslint"]
    assert found["tsc"].command == (
        str(ROOT / "node_modules/.bin/tsc"),
        "--noEmit",
        "--pretty",
        "false",
    )
    assert found["eslint"].command[1:] == ("-f", "json", "src/app.ts", "src/view.jsx")


def test_no_global_tsc_or_eslint_and_npm_test_only_when_asked():
    files = {k: v for k, v in TS_PROJECT.items() if not k.startswith("node_modules")}
    assert list(checks(files, ["src/app.ts"])) == ["syntax"]
    found = checks(TS_PROJECT, ["src/app.ts"], npm_test=True)
    assert found["npm test"].command == ("/usr/bin/npm", "test")
    assert found["npm test"].parser == "exit_code"


def test_eslint_config_in_package_json():
    files = {"package.json": '{"eslintConfig": {}}', "node_modules/.bin/eslint": "", "a.js": ""}
    assert "eslint" in checks(files, ["a.js"])


GO_PROJECT = {
    "go.mod": "module example.com/shop\n\ngo 1.22\n",
    "main.go": "package main\n",
    "pricing/pricing.go": "package pricing\n",
    "pricing/pricing_test.go": "package pricing\n",
    "vendor/x/x.go": "package x\n",
}


def test_go_checks_run_in_each_changed_package():
    found = checks(GO_PROJECT, ["pricing/pricing.go", "pricing/pricing_test.go", "main.go"])
    assert list(found) == [
        "syntax",
        "go vet .",
        "go vet ./pricing",
        "go test .",
        "go test ./pricing",
    ]
    test = found["go test ./pricing"]
    assert (test.command, test.cwd, test.parser) == (
        ("/usr/bin/go", "test", "-json", "."),
        ROOT / "pricing",
        "go_test",
    )
    assert found["go vet ./pricing"].parser == "go_vet"


def test_go_full_and_many_packages_use_the_module_pattern():
    many = {**GO_PROJECT, **{f"p{i}/a.go": "package p\n" for i in range(12)}}
    found = checks(many, [f"p{i}/a.go" for i in range(12)])
    assert found["go test"].command == ("/usr/bin/go", "test", "-json", "./...")
    assert found["go test"].cwd == ROOT
    assert checks(GO_PROJECT, [], full=True)["go vet"].command == ("/usr/bin/go", "vet", "./...")


def test_cargo_checks_only_for_rust_changes():
    files = {"Cargo.toml": "[package]\n", "src/lib.rs": "", "README.md": ""}
    found = checks(files, ["src/lib.rs"])
    assert list(found) == ["syntax", "cargo check", "cargo test"]
    assert found["cargo check"].command == (
        "/usr/bin/cargo",
        "check",
        "--message-format=json",
        "--all-targets",
    )
    assert found["cargo test"].parser == "cargo"
    assert checks(files, ["README.md"]) == {}


def test_normalize_paths():
    assert normalize_paths(
        ROOT,
        ["./a.py", "a.py", str(ROOT / "b/c.py"), "/elsewhere/d.py", "../e.py", "b/../f.py", "."],
    ) == ("a.py", "b/c.py", "f.py")


def test_a_path_like_an_option_is_passed_safely():
    found = checks({"-x.py": "", "ruff.toml": ""}, ["-x.py"])
    assert found["ruff"].command[-1] == "./-x.py"


def test_disk_files_skip_vendored_folders(tmp_path):
    write(
        tmp_path,
        {
            **{k: v for k, v in PYTHON_PROJECT.items() if not k.startswith(".venv")},
            "node_modules/pkg/test_x.py": "",
            ".git/test_y.py": "",
        },
    )
    disk = DiskFiles(tmp_path)
    memory = MemoryFiles({k: v for k, v in PYTHON_PROJECT.items() if not k.startswith(".venv")})
    assert list(disk.files()) == list(memory.files())
    assert disk.read_text("missing.py") is None
    assert disk.read_text("src/shop/cart.py") == "from shop.pricing import total\n"
    real = detect_checks(tmp_path, ["src/shop/pricing.py"], which=which)
    assert real[-2].command[-2:] == ("tests/test_pricing.py", "tests/unit/pricing_test.py")
    assert real[-1].command[-1] == "tests/test_checkout.py"
