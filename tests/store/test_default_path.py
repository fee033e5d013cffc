"""Where the local event store lives when nothing says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.store import default_data_dir, default_store_path

FALLBACK = "/home/me/.local/share/kestrel/sessions.db"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"KESTREL_DATA_DIR": "/data/k", "XDG_DATA_HOME": "/xdg"}, "/data/k/sessions.db"),
        ({"XDG_DATA_HOME": "/xdg"}, "/xdg/kestrel/sessions.db"),
        ({"XDG_DATA_HOME": "relative/ignored"}, FALLBACK),
        ({"KESTREL_DATA_DIR": "", "XDG_DATA_HOME": ""}, FALLBACK),
        ({}, FALLBACK),
    ],
)
def test_default_store_path(env: dict[str, str], expected: str) -> None:
    assert default_store_path(env, home=Path("/home/me")) == Path(expected)
    assert default_data_dir(env, home=Path("/home/me")) == Path(expected).parent


def test_default_store_path_reads_the_environment_on_each_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KESTREL_DATA_DIR", str(tmp_path / "one"))
    assert default_store_path() == tmp_path / "one" / "sessions.db"
    monkeypatch.setenv("KESTREL_DATA_DIR", str(tmp_path / "two"))
    assert default_store_path() == tmp_path / "two" / "sessions.db"
    assert not (tmp_path / "two").exists()
