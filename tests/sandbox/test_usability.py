"""Ordinary work inside the sandbox: package installs and a session's /tmp (git alternates are
tested in test_usability_alternates.py).

Real bubblewrap, real pip on a real project. fixtures/six holds the files of six 1.17.0
that `pip install -e .` needs, unchanged, with six's MIT licence beside them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kestrel import app
from kestrel.cli.sandbox_cmd import sandbox_app
from kestrel.sandbox.base import ExecResult
from kestrel.sandbox.bwrap import BwrapExecutor, SandboxConfig
from kestrel.sandbox.usability import (
    PACKAGES_DIR,
    SandboxState,
    discard_state,
    mount_targets,
)
from kestrel.settings import Settings
from kestrel.workspace.overlay import discard_layer, layer_for

SIX = Path(__file__).parent / "fixtures" / "six"
PYTHON = os.path.realpath(sys.executable)
"""The interpreter itself, not a venv's link to it (the venv is outside the workspace)."""


def session(ws: Path, state: Path | None, **kwargs: object) -> BwrapExecutor:
    config = SandboxConfig(state=SandboxState(state) if state else None)
    return BwrapExecutor(ws, config=config, kill_grace_s=0.5, drain_grace_s=0.3, **kwargs)  # type: ignore[arg-type]


async def run(executor: BwrapExecutor, command: str, timeout_s: float = 60) -> ExecResult:
    return await executor.run(command, cwd=executor.workspace, timeout_s=timeout_s)


# --- /tmp ---------------------------------------------------------------------------------


async def test_tmp_keeps_files_for_the_session_and_hides_them_from_others(
    ws: Path, tmp_path: Path
) -> None:
    one = session(ws, tmp_path / "one")
    wrote = await run(one, "cat > /tmp/reproduce.py <<'EOF'\nprint('reproduced')\nEOF\npwd")
    assert wrote.exit_code == 0 and wrote.output == f"{ws}\n", wrote.output
    again = await run(one, f"{PYTHON} /tmp/reproduce.py")
    assert again.exit_code == 0 and again.output == "reproduced\n", again.output

    other = await run(session(ws, tmp_path / "two"), "ls -A /tmp; test -e /tmp/reproduce.py")
    assert other.exit_code == 1 and "reproduce.py" not in other.output
    fresh = session(ws, None)
    assert (await run(fresh, "echo x > /tmp/note")).exit_code == 0
    assert (await run(fresh, "test -e /tmp/note")).exit_code == 1

    for folder in (tmp_path / "one", tmp_path / "one" / "tmp"):
        assert folder.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "one" / "tmp" / "reproduce.py").is_file()


async def test_discarding_the_state_removes_it_even_with_locked_folders(
    ws: Path, tmp_path: Path
) -> None:
    one = session(ws, tmp_path / "one")
    made = await run(
        one, "mkdir -p /tmp/locked/in && touch /tmp/locked/in/f && chmod 000 /tmp/locked"
    )
    assert made.exit_code == 0, made.output
    assert one.config.state is not None
    discard_state(one.config.state)
    assert not (tmp_path / "one").exists()


async def test_the_proxy_socket_still_works_over_a_session_tmp(
    ws: Path, tmp_path: Path, server: int
) -> None:
    sandbox = session(ws, tmp_path / "one", network="allowlist", allowed_hosts=["127.0.0.1"])
    fetch = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{server}/').read())"
    result = await run(sandbox, f'echo kept > /tmp/kept; {PYTHON} -c "{fetch}"')
    assert result.exit_code == 0, result.output
    assert "hello from the host" in result.output
    assert (await run(sandbox, "cat /tmp/kept")).output == "kept\n"


# --- packages -----------------------------------------------------------------------------


def _builder() -> str:
    """A host interpreter with pip, setuptools and wheel: what `pip install -e .` of a
    setuptools project needs offline."""
    for candidate in ("/usr/bin/python3", PYTHON):
        probe = subprocess.run(
            [candidate, "-c", "import setuptools, wheel, pip"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return candidate
    pytest.skip("no interpreter here has pip, setuptools and wheel")


def _site_digest(python: str) -> str:
    """A digest of every file (path, mode, bytes) in the interpreter's site directories."""
    code = (
        "import site, sysconfig; "
        "print('\\n'.join({*site.getsitepackages(), *sysconfig.get_paths().values()}))"
    )
    listed = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    digest = hashlib.sha256()
    for top in sorted(p for p in listed.stdout.split() if os.path.isdir(p)):
        if "site-packages" not in top and "dist-packages" not in top:
            continue
        for here, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(here, name)
                info = os.lstat(path)
                digest.update(f"{path}\0{info.st_mode}\0{info.st_size}\0".encode())
                if os.path.isfile(path) and not os.path.islink(path):
                    digest.update(Path(path).read_bytes())
    return digest.hexdigest()


async def test_pip_install_editable_of_a_real_project_leaves_the_host_untouched(
    ws: Path, tmp_path: Path
) -> None:
    python = _builder()
    shutil.copytree(SIX, ws / "six")
    before = _site_digest(python)
    one = session(ws, tmp_path / "one")
    installed = await run(one, f"cd six && {python} -m pip install -e .", timeout_s=180)
    assert installed.exit_code == 0, installed.output
    assert "Successfully installed six" in installed.output

    imported = await run(one, f"cd / && {python} -c 'import six; print(six.__file__)'")
    assert imported.output == f"{ws / 'six' / 'six.py'}\n", imported.output
    assert _site_digest(python) == before
    assert any((tmp_path / "one" / "packages").rglob("*six*"))
    # Another session (or a command with no session) has its own, empty user base.
    elsewhere = await run(
        session(ws, tmp_path / "two"), f"cd / && {python} -c 'import six; print(six.__file__)'"
    )
    assert str(ws) not in elsewhere.output


async def test_an_installed_programs_script_is_on_path(ws: Path, tmp_path: Path) -> None:
    python = _builder()
    project = ws / "hello"
    project.mkdir()
    (project / "hello_tool.py").write_text("def main():\n    print('hello tool ran')\n")
    (project / "setup.py").write_text(
        "from setuptools import setup\n"
        "setup(name='hello-tool', version='1.0', py_modules=['hello_tool'],\n"
        "      entry_points={'console_scripts': ['hello-tool=hello_tool:main']})\n"
    )
    one = session(ws, tmp_path / "one")
    installed = await run(one, f"{python} -m pip install ./hello", timeout_s=180)
    assert installed.exit_code == 0, installed.output
    ran = await run(one, "cd / && command -v hello-tool && hello-tool")
    assert ran.output == f"{PACKAGES_DIR}/bin/hello-tool\nhello tool ran\n", ran.output


async def test_npm_global_installs_land_in_the_session(ws: Path, tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    package = ws / "hello-js"
    package.mkdir()
    (package / "package.json").write_text(
        '{"name": "hello-js", "version": "1.0.0", "bin": {"hello-js": "cli.js"}}\n'
    )
    (package / "cli.js").write_text("#!/usr/bin/env node\nconsole.log('hello js ran')\n")
    (package / "cli.js").chmod(0o755)
    one = session(ws, tmp_path / "one")
    installed = await run(one, "npm install -g ./hello-js", timeout_s=120)
    assert installed.exit_code == 0, installed.output
    ran = await run(one, "cd / && hello-js")
    assert ran.output == "hello js ran\n", ran.output
    assert os.path.lexists(tmp_path / "one" / "packages" / "lib" / "node_modules" / "hello-js")


async def test_a_venv_in_the_workspace_keeps_its_packages_to_itself(
    ws: Path, tmp_path: Path
) -> None:
    python = _builder()
    shutil.copytree(SIX, ws / "six")
    one = session(ws, tmp_path / "one")
    steps = (
        f"{python} -m pip wheel --no-deps -w dist ./six && "
        f"{PYTHON} -m venv .venv && "
        ".venv/bin/python -m pip install --no-index dist/six-*.whl && "
        ".venv/bin/python -c 'import six; print(six.__file__)'"
    )
    result = await run(one, steps, timeout_s=240)
    assert result.exit_code == 0, result.output
    assert str(ws / ".venv") in result.output.splitlines()[-1]
    assert not list((tmp_path / "one" / "packages").rglob("six*"))


# --- a session built by the app -----------------------------------------------------------


async def test_a_sessions_executor_keeps_tmp_in_its_layer_until_the_layer_goes(
    ws: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    settings = Settings(data_dir=data)
    tree = layer_for(data, "s1").tree  # a `copy` view: the workspace inside the data directory
    tree.mkdir(parents=True)
    first = app.executor_for(settings, tree, "s1")
    assert isinstance(first, BwrapExecutor) and first.config.state is not None
    wrote = await run(first, "echo from-s1 > /tmp/note && ls -A /tmp")
    assert wrote.exit_code == 0, wrote.output
    later = app.executor_for(settings, tree, "s1")
    assert isinstance(later, BwrapExecutor)
    assert (await run(later, "cat /tmp/note")).output == "from-s1\n"

    other_tree = layer_for(data, "s2").tree
    other_tree.mkdir(parents=True)
    other = app.executor_for(settings, other_tree, "s2")
    assert isinstance(other, BwrapExecutor)
    state_root = layer_for(data, "s1").root / "sandbox"
    seen = await run(other, f"cat /tmp/note {state_root}/tmp/note")
    assert seen.exit_code != 0 and "from-s1\n" not in seen.output, seen.output
    assert state_root.stat().st_mode & 0o777 == 0o700
    discard_layer(layer_for(data, "s1"))
    assert not state_root.exists()


@pytest.mark.parametrize("link", ["relative", "absolute"])
async def test_a_symlink_left_in_tmp_cannot_move_a_later_mount_point_onto_the_host(
    ws: Path, tmp_path: Path, link: str
) -> None:
    if not ws.is_relative_to("/tmp"):
        pytest.skip("the workspace must lie under /tmp for its mount point to be in /tmp")
    target = tmp_path / "host-target"
    target.mkdir()
    parent = ws.parent
    up = "../" * len(parent.parent.parts)  # from the link's folder up to bubblewrap's own root
    pointer = f"{up}oldroot{target}" if link == "relative" else f"/oldroot{target}"
    one = session(ws, tmp_path / "one")
    planted = await run(one, f"mv {parent} {parent}.old && ln -s {pointer} {parent} && echo ok")
    assert planted.output.endswith("ok\n"), planted.output
    after = await run(one, "pwd && echo still works")
    assert after.exit_code == 0 and after.output == f"{ws}\nstill works\n", after.output
    assert list(target.iterdir()) == []


def test_sandbox_run_installs_for_the_command_and_leaves_nothing_behind(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("KESTREL_DATA_DIR", str(data))
    cli = typer.Typer()
    cli.add_typer(sandbox_app, name="sandbox")
    runner = CliRunner()

    def sandbox_run(command: str) -> str:
        done = runner.invoke(cli, ["sandbox", "run", "--workspace", str(ws), "--", command])
        assert done.exit_code == 0, done.output
        return done.output

    tool = f"{PACKAGES_DIR}/bin/t"
    made = f"mkdir -p {PACKAGES_DIR}/bin && printf '#!/bin/sh\\necho ran\\n' > {tool}"
    assert sandbox_run(f"{made} && chmod +x {tool} && cd / && t") == "ran\n"
    assert sandbox_run("command -v t || echo gone") == "gone\n"
    assert not data.exists() or not any(data.rglob("t"))


def test_mount_targets_reads_every_kind_of_mount_and_stops_at_the_command() -> None:
    argv = ["bwrap", "--unshare-all", "--uid", "1000", "--ro-bind", "/usr", "/usr"]
    argv += ["--tmpfs", "/tmp", "--symlink", "usr/bin", "/bin", "--perms", "0700", "--dir", "/d"]
    argv += ["--file", "9", "/tmp/f", "--remount-ro", "/", "--seccomp", "5", "--chdir", "/w"]
    argv += ["--", "bash", "-c", "x", "--bind", "/a", "/b"]
    assert mount_targets(argv) == ["/usr", "/tmp", "/bin", "/d", "/tmp/f", "/"]
