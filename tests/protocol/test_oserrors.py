"""OS errors as sentences: real errors from the system, never `[Errno N]` or `PosixPath(`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kestrel.protocol.oserrors import error_text, os_error_text


def caught(action) -> OSError:  # type: ignore[no-untyped-def]
    with pytest.raises(OSError) as info:
        action()
    return info.value


def test_a_missing_folder_to_run_in(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    exc = caught(lambda: subprocess.run(["git", "status"], cwd=gone, check=False))
    assert "PosixPath(" in str(exc)  # what the sentence replaces
    assert os_error_text(exc) == f"{gone} does not exist"


def test_a_missing_file(tmp_path: Path) -> None:
    exc = caught(lambda: (tmp_path / "nope.txt").read_text())
    assert os_error_text(exc) == f"{tmp_path / 'nope.txt'} does not exist"


def test_a_file_where_a_folder_is_wanted(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    exc = caught(lambda: os.listdir(tmp_path / "f"))
    assert os_error_text(exc) == f"{tmp_path / 'f'} is not a directory"


def test_a_folder_where_a_file_is_wanted(tmp_path: Path) -> None:
    exc = caught(lambda: tmp_path.read_text())
    assert os_error_text(exc) == f"{tmp_path} is a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may read anything")
def test_permission_denied(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.write_text("x")
    locked.chmod(0)
    exc = caught(locked.read_text)
    assert os_error_text(exc) == f"permission denied: {locked}"


def test_an_error_without_a_path_or_a_number() -> None:
    assert os_error_text(OSError(2, "No such file or directory")) == (
        "a file or directory does not exist"
    )
    assert os_error_text(OSError(22, "Invalid argument")) == "invalid argument"
    assert os_error_text(OSError("the server went away")) == "the server went away"
    assert error_text(ValueError("bad value")) == "bad value"
