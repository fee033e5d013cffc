"""Which command lines move the process into its private namespace before anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.cli.entry import wants_overlay


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return {"XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}


@pytest.mark.parametrize(
    "args",
    [["fix it"], ["-p", "fix it"], [], ["resume", "abc"], ["apply", "abc"], ["demo"]],
)
def test_session_commands_want_the_overlay(args: list[str], env: dict[str, str]) -> None:
    assert wants_overlay(args, env)


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["diff", "abc"],
        ["doctor"],
        ["--help"],
        ["fix it", "--workspace", "direct"],
        ["fix it", "--workspace=direct"],
    ],
)
def test_other_commands_and_direct_mode_do_not(args: list[str], env: dict[str, str]) -> None:
    assert not wants_overlay(args, env)


def test_the_environment_and_settings_files_can_choose_direct(
    tmp_path: Path, env: dict[str, str]
) -> None:
    assert not wants_overlay(["fix it"], {**env, "KESTREL_WORKSPACE": "direct"})
    (tmp_path / ".kestrel").mkdir()
    (tmp_path / ".kestrel" / "settings.toml").write_text('workspace = "direct"\n')
    assert not wants_overlay(["fix it"], env)
