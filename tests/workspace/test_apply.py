"""Applying a session's change set to the real checkout: refusals, flags, merges, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from apply_kit import (
    AFTER,
    BEFORE,
    Crash,
    Files,
    changes_between,
    crash_at,
    leftovers,
    link,
    materialize,
    scenario_changes,
    snapshot,
    text,
)

from kestrel.protocol.errors import KestrelError
from kestrel.workspace.apply import (
    ApplyError,
    ApplyPending,
    ApplyResult,
    Conflict,
    Flag,
    RecoveryResult,
    Refusal,
    apply_changes,
    check,
    recover,
)
from kestrel.workspace.changes import Change, ChangeSet, Entry

pytestmark = pytest.mark.system  # real git for merges, real fsync, a real SIGKILL

OPS = len(scenario_changes().changes)
APPLY_STEPS = ["staged", "journaled", *(f"op:{n}" for n in range(OPS)), "done", "cleanup"]
NOTES = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """New files get their mode from the umask; pin the usual one for exact comparisons."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The scenario's starting tree."""
    return materialize(tmp_path / "checkout", BEFORE)


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """The journal folder, beside the checkout."""
    return tmp_path / "journal"


def expected(tmp_path: Path, files: Files) -> dict[str, tuple[object, ...]]:
    """The snapshot of a tree holding exactly `files`."""
    return snapshot(materialize(tmp_path / f"expected-{len(list(tmp_path.iterdir()))}", files))


def op_order() -> tuple[str, ...]:
    """The scenario's paths in journal order: deletions first, then writes, each by path."""
    changes = scenario_changes().changes
    deletions = [change.path for change in changes if change.new is None]
    return (*deletions, *(change.path for change in changes if change.new is not None))


def journal_folder(journal: Path) -> Path:
    """The one apply folder inside `journal`."""
    [folder] = [path for path in journal.iterdir() if path.name != "lock"]
    return folder


def assert_clean(checkout: Path, journal: Path) -> None:
    """No staged file in the checkout and no journal folder left behind."""
    assert leftovers(checkout) == []
    assert [path.name for path in journal.iterdir() if path.name != "lock"] == []


# --- clean applies --------------------------------------------------------------------------


def test_clean_apply_writes_every_kind_of_change(
    checkout: Path, journal: Path, tmp_path: Path
) -> None:
    result = apply_changes(checkout, scenario_changes(), journal)

    assert result == ApplyResult(
        applied=True,
        written=(
            "README.md",
            "bin/tool",
            "conf",
            "link",
            "pkg/deep/mod.py",
            "pointer",
            "scripts/run.sh",
            "src/new_name.py",
        ),
        deleted=("bin", "conf/a.ini", "conf/sub/b.ini", "docs/guide.md", "src/old_name.py"),
        flags=(
            Flag("bin/tool", "becomes executable"),
            Flag("scripts/run.sh", "becomes executable"),
        ),
    )
    assert snapshot(checkout) == expected(tmp_path, AFTER)
    assert_clean(checkout, journal)


def test_mode_change_keeps_the_other_permission_bits(checkout: Path, journal: Path) -> None:
    (checkout / "README.md").chmod(0o640)
    base = text("hello\n")
    changes = ChangeSet((Change("README.md", base, text("hello\n", executable=True)),))

    assert apply_changes(checkout, changes, journal).written == ("README.md",)
    assert (checkout / "README.md").stat().st_mode & 0o777 == 0o750

    back = ChangeSet((Change("README.md", text("hello\n", executable=True), base),))
    apply_changes(checkout, back, journal)
    assert (checkout / "README.md").stat().st_mode & 0o777 == 0o640


def test_a_change_already_in_the_checkout_writes_nothing(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"new.txt": text("same\n")})
    changes = ChangeSet((Change("new.txt", None, text("same\n")),))

    assert apply_changes(checkout, changes, journal) == ApplyResult(applied=True)
    assert_clean(checkout, journal)


def test_replaced_file_keeps_its_inode_untouched(checkout: Path, journal: Path) -> None:
    """Writes replace the file; a reader holding the old file still sees the old bytes."""
    with (checkout / "README.md").open("rb") as held:
        changes = ChangeSet((Change("README.md", text("hello\n"), text("bye\n")),))
        apply_changes(checkout, changes, journal)
        assert held.read() == b"hello\n"
    assert (checkout / "README.md").read_bytes() == b"bye\n"


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (Change("link", None, link("/etc/passwd")), "absolute path '/etc/passwd'"),
        (Change("a/link", None, link("../../x")), "leads outside the checkout"),
        (Change("a/link", None, link("b/../../../x")), "leads outside the checkout"),
        (Change("hooks", None, link(".git/hooks")), "git internals"),
        (Change(".git/config", None, text("[core]\n")), "git internals"),
        (Change("sub/.GIT/hooks/pre-commit", None, text("x")), "git internals"),
        (Change("/etc/passwd", None, text("x")), "absolute"),
        (Change("a/../../b", None, text("x")), "'..' component"),
        (Change("a//b", None, text("x")), "empty component"),
        (Change("fifo", None, Entry("special")), "special files"),
        (Change("x", None, text("x"), old_path="../x"), "'..' component"),
    ],
)
def test_refused_changes_write_nothing(
    checkout: Path, journal: Path, change: Change, reason: str
) -> None:
    before = snapshot(checkout)
    changes = ChangeSet((Change("README.md", text("hello\n"), text("changed\n")), change))

    result = apply_changes(checkout, changes, journal)

    assert not result.applied
    assert [refusal.path for refusal in result.refusals] == [change.old_path or change.path]
    assert reason in result.refusals[0].reason
    assert result.written == result.deleted == ()
    assert snapshot(checkout) == before


def test_check_refuses_duplicate_and_nested_paths() -> None:
    changes = ChangeSet(
        (
            Change("a", None, text("1")),
            Change("a", None, text("2")),
            Change("a/b", None, text("3")),
        )
    )
    refusals, _ = check(changes)
    assert refusals == [
        Refusal("a", "the path is changed twice in one change set"),
        Refusal("a/b", "'a' is written both as a file and as a folder"),
    ]


def test_symlinked_folder_leading_outside_is_refused(
    checkout: Path, journal: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, checkout / "escape")
    before = snapshot(checkout)
    changes = ChangeSet((Change("escape/evil.sh", None, text("rm -rf /\n")),))

    result = apply_changes(checkout, changes, journal)

    assert result.refusals == (
        Refusal("escape/evil.sh", "'escape' is a symlink that leads outside the checkout"),
    )
    assert list(outside.iterdir()) == []
    assert snapshot(checkout) == before


def test_symlinked_folder_inside_the_checkout_is_written_through(
    checkout: Path, journal: Path
) -> None:
    os.symlink("src", checkout / "source")
    changes = ChangeSet((Change("source/extra.py", None, text("z = 3\n")),))

    assert apply_changes(checkout, changes, journal).applied
    assert (checkout / "src" / "extra.py").read_text() == "z = 3\n"


def test_folder_where_a_file_goes_is_refused(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"made/keep.txt": text("mine\n")})
    before = snapshot(checkout)
    changes = ChangeSet((Change("made", None, text("file\n")),))

    result = apply_changes(checkout, changes, journal)

    assert result.refusals == (
        Refusal("made", "the checkout has a folder where the session has a file"),
    )
    assert snapshot(checkout) == before


def test_file_where_a_folder_goes_is_refused(checkout: Path, journal: Path) -> None:
    changes = ChangeSet((Change("README.md/inner.txt", None, text("x\n")),))

    result = apply_changes(checkout, changes, journal)

    assert [refusal.reason for refusal in result.refusals] == [
        "'README.md' is a file in the checkout, where the session has a folder"
    ]


def test_special_file_in_the_checkout_is_refused(checkout: Path, journal: Path) -> None:
    os.mkfifo(checkout / "pipe")
    changes = ChangeSet((Change("pipe", None, text("x\n")),))

    result = apply_changes(checkout, changes, journal)

    assert [refusal.reason for refusal in result.refusals] == [
        "the checkout has a special file (device, socket, fifo) here"
    ]


def test_deleting_a_file_that_is_now_a_folder_is_a_conflict(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"was_file/inner.txt": text("mine\n")})
    changes = ChangeSet((Change("was_file", text("old\n"), None),))

    result = apply_changes(checkout, changes, journal)

    assert result.conflicts == (
        Conflict("was_file", "deleted by the session, but a folder in the checkout now"),
    )
    assert (checkout / "was_file" / "inner.txt").read_text() == "mine\n"


# --- flags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".envrc",
        ".env",
        "service/.env.local",
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        "azure-pipelines.yml",
        "Jenkinsfile",
        ".husky/pre-commit",
        ".pre-commit-config.yaml",
        ".githooks/pre-push",
        "Makefile",
        "makefile",
        "GNUmakefile",
        "tests/unit/conftest.py",
        "setup.py",
        "pyproject.toml",
        "web/package.json",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
    ],
)
def test_sensitive_files_are_flagged_and_applied(path: str, checkout: Path, journal: Path) -> None:
    changes = ChangeSet((Change(path, None, text("x\n")),))

    refusals, flags = check(changes)
    result = apply_changes(checkout, changes, journal)

    assert refusals == []
    assert [flag.path for flag in flags] == [path]
    assert result.applied and result.flags == tuple(flags)
    assert (checkout / path).read_text() == "x\n"


def test_ordinary_files_are_not_flagged() -> None:
    changes = ChangeSet(
        (
            Change("src/app.py", text("a"), text("b")),
            Change("docs/environment.md", None, text("c")),
            Change("tool.sh", text("d", executable=True), text("e", executable=True)),
        )
    )
    assert check(changes) == ([], [])


# --- concurrent edits -------------------------------------------------------------------------


def edit_line(content: str, number: int, replacement: str) -> str:
    """`content` with line `number` (1-based) replaced."""
    lines = content.splitlines(keepends=True)
    lines[number - 1] = replacement + "\n"
    return "".join(lines)


def test_non_overlapping_edit_in_the_checkout_is_merged(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"notes.txt": text(edit_line(NOTES, 9, "person's line 9"))})
    session = edit_line(NOTES, 2, "session's line 2")
    changes = ChangeSet((Change("notes.txt", text(NOTES), text(session)),))

    result = apply_changes(checkout, changes, journal)

    assert result.applied and result.merged == ("notes.txt",) and result.written == ("notes.txt",)
    merged = edit_line(session, 9, "person's line 9")
    assert (checkout / "notes.txt").read_text() == merged


def test_merge_keeps_an_executable_bit_set_in_the_checkout(checkout: Path, journal: Path) -> None:
    person = edit_line(NOTES, 9, "person's line 9")
    materialize(checkout, {"notes.txt": text(person, executable=True)})
    session = edit_line(NOTES, 2, "session's line 2")
    changes = ChangeSet((Change("notes.txt", text(NOTES), text(session)),))

    assert apply_changes(checkout, changes, journal).merged == ("notes.txt",)
    assert (checkout / "notes.txt").stat().st_mode & 0o777 == 0o755


def test_overlapping_edit_is_a_conflict_and_nothing_changes(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"notes.txt": text(edit_line(NOTES, 2, "person's line 2"))})
    before = snapshot(checkout)
    changes = ChangeSet(
        (
            Change("README.md", text("hello\n"), text("changed\n")),
            Change("notes.txt", text(NOTES), text(edit_line(NOTES, 2, "session's line 2"))),
        )
    )

    result = apply_changes(checkout, changes, journal)

    assert not result.applied and result.written == ()
    [conflict] = result.conflicts
    assert conflict.path == "notes.txt"
    assert conflict.merged_with_markers is not None
    assert b"<<<<<<< checkout\nperson's line 2\n=======\nsession's line 2\n>>>>>>> session\n" in (
        conflict.merged_with_markers
    )
    assert snapshot(checkout) == before


@pytest.mark.parametrize(
    ("base", "now", "new", "reason"),
    [
        (text("a\n"), text("person\n"), None, "deleted by the session, but changed"),
        (None, text("person\n"), text("session\n"), "with other content in the checkout"),
        (text("a\n"), None, text("session\n"), "deleted in the checkout since"),
        (text("a\n"), Entry("file", b"\0person"), text("b\n"), "not mergeable text"),
        (link("x"), link("y"), link("z"), "not mergeable text"),
    ],
)
def test_divergent_changes_are_conflicts(
    checkout: Path,
    journal: Path,
    base: Entry | None,
    now: Entry | None,
    new: Entry | None,
    reason: str,
) -> None:
    if now is not None:
        materialize(checkout, {"path": now})
    before = snapshot(checkout)

    result = apply_changes(checkout, ChangeSet((Change("path", base, new),)), journal)

    assert [conflict.path for conflict in result.conflicts] == ["path"]
    assert reason in result.conflicts[0].reason
    assert result.conflicts[0].merged_with_markers is None
    assert snapshot(checkout) == before


def test_every_conflict_and_refusal_is_listed(checkout: Path, journal: Path) -> None:
    materialize(checkout, {"one": text("mine\n"), "two": text("mine\n"), "dir/x": text("x")})
    changes = ChangeSet(
        (
            Change("dir", None, text("file\n")),
            Change("one", None, text("session\n")),
            Change("two", text("old\n"), None),
        )
    )

    result = apply_changes(checkout, changes, journal)

    assert [refusal.path for refusal in result.refusals] == ["dir"]
    assert [conflict.path for conflict in result.conflicts] == ["one", "two"]
    assert isinstance(result.conflicts[0], Conflict)


# --- crashes and recovery ---------------------------------------------------------------------


@pytest.mark.parametrize("step", APPLY_STEPS)
def test_crash_at_any_step_recovers_to_old_or_new(
    step: str, checkout: Path, journal: Path, tmp_path: Path
) -> None:
    old, new = snapshot(checkout), expected(tmp_path, AFTER)

    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at(step))
    recovered = recover(checkout, journal)

    if step == "staged":
        assert recovered is None and snapshot(checkout) == old
    elif step == "cleanup":
        assert recovered is None and snapshot(checkout) == new
    else:
        assert recovered is not None and recovered.action == "completed"
        assert recovered.paths == op_order()
        assert snapshot(checkout) == new
    assert_clean(checkout, journal)
    assert recover(checkout, journal) is None


RECOVER_STEPS = [*(f"op:{n}" for n in range(OPS)), "done", "cleanup"]


@pytest.mark.parametrize("step", RECOVER_STEPS)
def test_crash_inside_recovery_then_recover_again(
    step: str, checkout: Path, journal: Path, tmp_path: Path
) -> None:
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("op:3"))
    with pytest.raises(Crash):
        recover(checkout, journal, fault=crash_at(step))

    again = recover(checkout, journal)

    assert (again is None) == (step == "cleanup")
    assert again is None or again.action == "completed"
    assert snapshot(checkout) == expected(tmp_path, AFTER)
    assert_clean(checkout, journal)


@pytest.mark.parametrize("crashed_at", ["journaled", "op:4", f"op:{OPS - 1}", "done"])
def test_missing_staged_file_rolls_back(crashed_at: str, checkout: Path, journal: Path) -> None:
    old = snapshot(checkout)
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at(crashed_at))
    next(journal_folder(journal).glob("new-*")).unlink()

    recovered = recover(checkout, journal)

    assert recovered is not None and recovered.action == "rolled_back"
    assert snapshot(checkout) == old
    assert_clean(checkout, journal)


def test_unflushed_backups_are_never_written_over_untouched_files(
    checkout: Path, journal: Path
) -> None:
    """A crash before the staging flush may leave journal.json with empty staged files and
    backups; rolling back then leaves every file the apply had not reached as it is."""
    old = snapshot(checkout)
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("journaled"))
    for staged in journal_folder(journal).glob("*-*"):
        staged.unlink()
        staged.write_bytes(b"")  # a new, empty file: not a link to the checkout's file

    recovered = recover(checkout, journal)

    assert recovered is not None and recovered.action == "rolled_back"
    assert snapshot(checkout) == old
    assert_clean(checkout, journal)


def test_damaged_backup_of_a_replaced_file_is_an_error(checkout: Path, journal: Path) -> None:
    """Where the apply already replaced a file, a backup that no longer matches its recorded
    hash is reported, not written into the checkout."""
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at(f"op:{OPS - 1}"))
    folder = journal_folder(journal)
    body = json.loads((folder / "journal.json").read_text())
    body["state"] = "rolling_back"
    (folder / "journal.json").write_text(json.dumps(body))
    numbers = [n for n, op in enumerate(body["ops"]) if op["backup"] and op["action"] == "write"]
    backup = folder / f"old-{numbers[0]}"
    backup.unlink()
    backup.write_bytes(b"not what was there")

    with pytest.raises(ApplyError, match="damaged"):
        recover(checkout, journal)


def test_rolling_back_leaves_a_file_the_apply_did_not_write(checkout: Path, journal: Path) -> None:
    """A new path that holds someone else's file when the apply is undone keeps that file."""
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("op:0"))
    folder = journal_folder(journal)
    body = json.loads((folder / "journal.json").read_text())
    added = "src/new_name.py"
    assert any(op["path"] == added and not op["existed"] for op in body["ops"])
    (checkout / added).write_bytes(b"written by the person\n")
    next(folder.glob("new-*")).unlink()  # force a roll back

    assert recover(checkout, journal) is not None
    assert (checkout / added).read_bytes() == b"written by the person\n"


def test_backups_are_hard_links_where_the_filesystem_allows(checkout: Path, journal: Path) -> None:
    """No copy of a replaced file is made: its backup is the replaced file itself."""
    inode = (checkout / "README.md").stat().st_ino
    changes = ChangeSet((Change("README.md", text("hello\n"), text("bye\n")),))
    with pytest.raises(Crash):
        apply_changes(checkout, changes, journal, fault=crash_at("journaled"))

    [backup] = journal_folder(journal).glob("old-*")
    assert backup.stat().st_ino == inode
    recover(checkout, journal)
    assert (checkout / "README.md").read_bytes() == b"bye\n"


@pytest.mark.parametrize("step", [f"undo:{n}" for n in range(OPS)])
def test_crash_inside_roll_back_then_recover_again(
    step: str, checkout: Path, journal: Path
) -> None:
    old = snapshot(checkout)
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("op:6"))
    next(journal_folder(journal).glob("new-*")).unlink()
    with pytest.raises(Crash):
        recover(checkout, journal, fault=crash_at(step))

    again = recover(checkout, journal)

    assert again is not None and again.action == "rolled_back"
    assert snapshot(checkout) == old
    assert_clean(checkout, journal)


@pytest.mark.parametrize("step", ["staged", "journaled", "op:0", "op:5", f"op:{OPS - 1}", "done"])
def test_sigkill_during_apply_then_recover(
    step: str, checkout: Path, journal: Path, tmp_path: Path
) -> None:
    old, new = snapshot(checkout), expected(tmp_path, AFTER)
    code = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parent)!r})
from apply_kit import scenario_changes
from kestrel.workspace.apply import apply_changes
os.umask(0o022)

def fault(step):
    if step == {step!r}:
        os.kill(os.getpid(), signal.SIGKILL)

apply_changes(Path({str(checkout)!r}), scenario_changes(), Path({str(journal)!r}), fault=fault)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()

    recovered = recover(checkout, journal)

    assert snapshot(checkout) == (old if step == "staged" else new)
    assert (recovered is None) == (step == "staged")
    assert_clean(checkout, journal)


def test_journal_records_every_op(checkout: Path, journal: Path) -> None:
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("journaled"))
    folder = journal_folder(journal)
    body = json.loads((folder / "journal.json").read_text())

    assert body["id"] == folder.name and body["state"] == "committed"
    assert body["checkout"] == str(checkout.resolve())
    ops = {op["path"]: op for op in body["ops"]}
    assert ops["README.md"]["action"] == "write" and ops["README.md"]["existed"] is True
    assert (folder / ops["README.md"]["staged"]).read_bytes() == b"hello\nworld\n"
    assert (folder / ops["README.md"]["backup"]).read_bytes() == b"hello\n"
    assert ops["docs/guide.md"]["action"] == "delete" and ops["docs/guide.md"]["staged"] is None
    assert ops["pkg/deep/mod.py"]["existed"] is False
    assert ops["pkg/deep/mod.py"]["made_dirs"] == ["pkg", "pkg/deep"]
    assert ops["pointer"]["action"] == "symlink"


def test_apply_with_a_pending_journal_is_refused(checkout: Path, journal: Path) -> None:
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("op:2"))
    changes = ChangeSet((Change("other.txt", None, text("x")),))

    with pytest.raises(ApplyPending, match="run recover first"):
        apply_changes(checkout, changes, journal)


def test_failed_write_is_undone_and_raised(checkout: Path, journal: Path) -> None:
    old = snapshot(checkout)
    changes = changes_between(BEFORE, {**BEFORE, "README.md": text("new\n"), "zzz": text("z\n")})

    def obstruct(step: str) -> None:
        if step == "op:1":  # someone makes a folder where the second write goes
            (checkout / "zzz").mkdir()

    with pytest.raises(ApplyError, match="applying failed and was undone"):
        apply_changes(checkout, changes, journal, fault=obstruct)

    assert snapshot(checkout) == {**old, "zzz": ("dir",)}
    assert_clean(checkout, journal)


def test_misuse_raises_typed_errors(checkout: Path, tmp_path: Path) -> None:
    empty = ChangeSet(())
    with pytest.raises(ApplyError, match="outside the checkout"):
        apply_changes(checkout, empty, checkout / ".kestrel")
    with pytest.raises(ApplyError, match="not a folder"):
        apply_changes(tmp_path / "missing", empty, tmp_path / "journal")
    assert issubclass(ApplyError, KestrelError)


def test_recover_with_no_journal_returns_none(checkout: Path, journal: Path) -> None:
    assert recover(checkout, journal) is None
    assert recover(checkout, journal) is None


def test_journal_of_another_checkout_is_not_touched(
    checkout: Path, journal: Path, tmp_path: Path
) -> None:
    with pytest.raises(Crash):
        apply_changes(checkout, scenario_changes(), journal, fault=crash_at("op:1"))
    pending = journal_folder(journal).name
    other = tmp_path / "other"
    other.mkdir()

    with pytest.raises(ApplyError, match="belongs to the checkout"):
        recover(other, journal)
    assert list(other.iterdir()) == []
    assert recover(checkout, journal) == RecoveryResult("completed", op_order(), pending)
