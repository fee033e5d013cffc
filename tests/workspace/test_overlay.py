"""The session's overlay: writes land in its layer, the checkout stays as it was.

Entering the private namespace changes the whole process for good, so the kernel overlay is
exercised in a child Python process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.workspace.overlay import layer_for, open_view

CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from pathlib import Path
    from kestrel.workspace.overlay import layer_for, open_view, prepare_namespace

    checkout, data = Path(sys.argv[1]), Path(sys.argv[2])
    reason = prepare_namespace()
    if reason is not None:
        print(json.dumps({"unavailable": reason}))
        sys.exit(0)
    view = open_view(checkout, layer_for(data, "s1"))
    (checkout / "a.txt").write_text("changed\\n")
    os.unlink(checkout / "gone.txt")
    subprocess.run(["sh", "-c", "echo made > made.txt && mkdir -p d && echo x > d/y"],
                   cwd=checkout, check=True)
    seen = sorted(p.name for p in checkout.iterdir())
    real = (view.real / "a.txt").read_text()
    view.close()
    after_close = (checkout / "a.txt").read_text()
    print(json.dumps({"kind": view.kind, "seen": seen, "real": real, "after": after_close}))
    """
)


def _checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "a.txt").write_text("original\n")
    (checkout / "gone.txt").write_text("still here\n")
    return checkout


def test_the_kernel_overlay_keeps_the_checkout_untouched(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout), str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    if "unavailable" in report:
        pytest.skip(f"no private mount namespace here: {report['unavailable']}")
    assert report["kind"] == "kernel"
    assert report["seen"] == ["a.txt", "d", "made.txt"]
    assert report["real"] == "original\n"
    assert report["after"] == "original\n"
    # Seen from outside the namespace, the checkout never changed ...
    assert sorted(p.name for p in checkout.iterdir()) == ["a.txt", "gone.txt"]
    assert (checkout / "a.txt").read_text() == "original\n"
    # ... and the session's layer holds what it did.
    upper = layer_for(data, "s1").upper
    assert (upper / "a.txt").read_text() == "changed\n"
    assert (upper / "made.txt").read_text() == "made\n"


def test_the_copy_overlay_works_on_a_copy(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    (checkout / "link").symlink_to("a.txt")
    view = open_view(checkout, layer_for(tmp_path / "data", "s2"), kernel=False)
    assert view.kind == "copy"
    assert view.real == checkout.resolve()
    (view.root / "a.txt").write_text("changed\n")
    assert (checkout / "a.txt").read_text() == "original\n"
    assert (view.root / "link").is_symlink()
    # Reopening finds the same copy, with the session's change in it.
    again = open_view(checkout, layer_for(tmp_path / "data", "s2"), kernel=False)
    assert (again.root / "a.txt").read_text() == "changed\n"


def test_a_layer_inside_the_checkout_is_refused(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    with pytest.raises(ConfigError, match="inside the workspace"):
        open_view(checkout, layer_for(checkout / ".data", "s3"), kernel=False)


APPLY_CRASH = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from kestrel.workspace.overlay import prepare_namespace
    prepare_namespace()  # Before the imports below start a thread.
    from kestrel.app_workspace import open_workspace
    from kestrel.settings import Settings
    from kestrel.workspace.apply import apply_changes
    from kestrel.workspace.changes import Change, ChangeSet, Entry

    checkout, data, crash = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "crash"
    settings = Settings(data_dir=data)
    view = open_workspace(settings, "s1", checkout)
    print(view.kind)
    if crash:
        changes = ChangeSet(tuple(
            Change(f"f{i}.txt", Entry("file", b"old\\n"), Entry("file", b"new\\n"))
            for i in range(3)
        ))
        def die(step):
            if step == "op:1":
                os._exit(9)  # As a SIGKILL would: no cleanup, no finally.
        apply_changes(view.real, changes, view.journal, fault=die)
    """
)


@pytest.mark.parametrize("git", [False, True], ids=["journal-in-layer", "journal-in-dot-git"])
def test_an_apply_killed_midway_is_completed_when_the_session_opens_again(
    tmp_path: Path, git: bool
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    if git:
        (checkout / ".git").mkdir()  # where the journal goes, a hard link away from the files
    for i in range(3):
        (checkout / f"f{i}.txt").write_text("old\n")
    data = tmp_path / "data"
    run = [sys.executable, "-c", APPLY_CRASH, str(checkout), str(data)]
    killed = subprocess.run([*run, "crash"], capture_output=True, text=True, check=False)
    assert killed.returncode == 9, killed.stderr
    contents = {p.name: p.read_text() for p in checkout.iterdir() if p.is_file()}
    assert contents["f0.txt"] == "new\n" and contents["f2.txt"] == "old\n"  # Half applied.

    reopened = subprocess.run([*run, "open"], capture_output=True, text=True, check=False)
    assert reopened.returncode == 0, reopened.stderr
    if reopened.stdout.strip() != "kernel":
        pytest.skip("no private mount namespace here: the copy kind was tested instead")

    assert sorted(p.name for p in checkout.iterdir() if p.name != ".git") == [
        "f0.txt",
        "f1.txt",
        "f2.txt",
    ]
    assert {(checkout / f"f{i}.txt").read_text() for i in range(3)} == {"new\n"}
    journal = checkout / ".git" / "kestrel-journal"
    if git:  # only the lock stays: the finished apply left no folder behind
        assert [path.name for path in journal.iterdir()] == ["lock"]
    else:
        assert not journal.exists()
