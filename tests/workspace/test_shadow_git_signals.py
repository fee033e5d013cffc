"""The shadow repository's git runs in its own session: a Ctrl-C at the terminal (SIGINT to the
whole foreground process group) must reach Kestrel, which cancels, not the checkpoint's git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kestrel.workspace.shadow_git import ShadowGit, init_shadow


def _fake_git(tmp_path: Path) -> Path:
    """A 'git' that prints its session id and its parent's process group."""
    script = tmp_path / "git"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "print(os.getsid(0), os.getpgid(os.getppid()))\n"
        "if 'init' in sys.argv:\n"
        "    os.makedirs(sys.argv[-1], exist_ok=True)\n"
    )
    script.chmod(0o755)
    return script


def test_a_shadow_git_command_is_not_in_the_terminals_process_group(tmp_path: Path) -> None:
    git = _fake_git(tmp_path)
    out = ShadowGit(str(git), tmp_path, dict(os.environ)).text("status")
    session, parent_group = (int(n) for n in out.split())
    assert session != os.getsid(0)  # a session of its own: no terminal signals reach it
    assert parent_group == os.getpgid(0)


def test_creating_the_shadow_repository_runs_git_in_its_own_session_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git = _fake_git(tmp_path)
    seen: list[dict[str, Any]] = []
    real = subprocess.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    init_shadow(str(git), tmp_path / "shadow.git", dict(os.environ))
    assert seen and all(kwargs.get("start_new_session") for kwargs in seen)
