"""The `[sandbox_view]` table: what it may add to the sandbox, and who may set it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from kestrel.cli.doctor_view import doctor_view
from kestrel.protocol.errors import ConfigError
from kestrel.settings_load import load_settings
from kestrel.settings_sandbox import SandboxViewSettings


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    (folder / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.mark.parametrize(
    ("field", "path", "why"),
    [
        ("read_only", "/", "whole filesystem"),
        ("read_only", "relative/dir", "absolute path"),
        ("read_only", "/run/postgresql", "sockets"),
        ("read_only", "/var/run", "sockets"),
        ("read_only", "/proc/1", "kernel state"),
        ("read_only", "/home", "home directory"),
        ("read_only", "/home/someone", "home directory"),
        ("read_only", "~", "home directory"),
        ("read_only", "~/.ssh", "credentials"),
        ("read_only", "/srv/backup/.aws/credentials", "credentials"),
        ("read_only", "/srv/tls/server.pem", "keys and certificates"),
        ("read_only", "/srv/keys/id_ed25519", "keys and certificates"),
        ("writable", "/usr/local", "stays read-only"),
        ("writable", "/etc/apt", "stays read-only"),
        ("writable", "/opt/../usr/lib", "stays read-only"),
        ("toolchains", "/abs/.pyenv", "relative to the home"),
        ("toolchains", "../other/.pyenv", "relative to the home"),
        ("toolchains", ".config/gh", "credentials"),
    ],
)
def test_paths_that_would_open_the_sandbox_are_refused(
    field: str, path: str, why: str, home: Path
) -> None:
    with pytest.raises(ValidationError, match=why):
        SandboxViewSettings.model_validate({field: [path]})


def test_a_path_holding_kestrels_data_is_refused_once_the_data_dir_is_known(
    home: Path, tmp_path: Path
) -> None:
    data = tmp_path / "srv" / "kestrel-data"
    data.mkdir(parents=True)
    settings = SandboxViewSettings(read_only=[str(tmp_path / "srv")])
    with pytest.raises(ConfigError, match="data directory"):
        settings.options(data)
    inside = SandboxViewSettings(writable=[str(data / "sessions")])
    with pytest.raises(ConfigError, match="data directory"):
        inside.options(data)


def test_good_paths_become_view_options(home: Path, tmp_path: Path) -> None:
    (tmp_path / "sdk").mkdir()
    settings = SandboxViewSettings(
        read_only=[str(tmp_path / "sdk")], writable=["~/.cache/pip"], toolchains=[".pyenv"]
    )
    options = settings.options(tmp_path / "data")
    assert options.read_only == (tmp_path / "sdk",)
    assert options.writable == (home / ".cache" / "pip",)
    assert options.toolchains == (".pyenv",)


def test_only_the_users_own_file_may_set_the_view(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".kestrel").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    user = home / ".config" / "kestrel" / "settings.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox_view]\nread_only = ["/opt"]\n')
    settings = load_settings(repo, env={}, flags={}, home=home)
    assert settings.sandbox_view.read_only == ["/opt"]
    for name in ("settings.toml", "settings.local.toml"):
        hostile = repo / ".kestrel" / name
        hostile.write_text('[sandbox_view]\nwritable = ["/var/tmp"]\n')
        with pytest.raises(ConfigError, match="must not widen the sandbox"):
            load_settings(repo, env={}, flags={}, home=home)
        hostile.unlink()


def test_a_bad_path_in_the_users_file_is_a_clear_error(home: Path, tmp_path: Path) -> None:
    user = home / ".config" / "kestrel" / "settings.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox_view]\nread_only = ["/"]\n')
    with pytest.raises(ConfigError, match=r"sandbox_view\.read_only.*whole filesystem"):
        load_settings(tmp_path, env={}, flags={}, home=home)


def test_the_doctor_lists_each_mount_and_what_is_masked(home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    lines = doctor_view(workspace)
    text = "\n".join(lines)
    assert f"rw      {workspace}  [workspace]" in text
    assert "ro      /usr" in text and "empty   /tmp" in text
    assert f"empty   {home}" in text
    if Path("/etc/shadow").exists():
        assert "masked  /etc/shadow" in text
    assert "not shown: /run" in lines[-1]
