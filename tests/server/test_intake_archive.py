"""Uploaded tarballs and bundles: hostile entries are refused, and an uploaded `.git` never runs.

Tarballs are crafted entry by entry with `tarfile.TarInfo`, so each attack is exactly the one
named; every failing case also checks that nothing was left behind or written outside.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest
from intake_kit import Member, entry, head, make_repo, plain, regular, tarball, unpack

from kestrel.server.intake import IntakeError, archive_source, materialize

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SYM = tarfile.SYMTYPE
HOOK = "#!/bin/sh\ntouch {marker}\n"


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "work" / "checkout"


def refused(dest: Path, data: bytes, said: str, kind: str = "tar", **limits: int) -> None:
    """The upload is refused with `said`, naming no server folder, and `dest` is gone."""
    with pytest.raises(IntakeError, match=said) as caught:
        unpack(dest, data, kind, **limits)
    assert str(dest.parent) not in str(caught.value)
    assert not dest.exists()
    assert sorted(os.listdir(dest.parent)) == []


def test_a_tarball_becomes_a_repository_with_one_commit(dest: Path) -> None:
    data = tarball(
        entry("./", tarfile.DIRTYPE),
        regular("./src/app.py", b"print('hi')\n"),
        regular("run.sh", b"#!/bin/sh\n", mode=0o4755),
        entry("docs", tarfile.DIRTYPE),
        regular("docs/readme.md", b"# hi\n"),
        entry("readme", tarfile.SYMTYPE, "docs/readme.md"),
        entry("src/up", tarfile.SYMTYPE, "../docs"),
        gz=True,
    )
    out = unpack(dest, data, "tar.gz")
    assert out == dest
    assert plain(out, "log", "--format=%an %s").strip() == "Kestrel Uploaded files"
    listing = plain(out, "ls-tree", "-r", "HEAD")
    assert "100755 blob" in listing and "run.sh" in listing
    assert "120000 blob" in listing and "readme" in listing
    assert not os.stat(out / "run.sh").st_mode & stat.S_ISUID
    assert plain(out, "status", "--porcelain") == ""


def test_an_archive_saved_to_a_file_is_read_from_it(tmp_path: Path, dest: Path) -> None:
    upload = tmp_path / "upload.tar"
    upload.write_bytes(tarball(regular("a.txt")))
    out = materialize(archive_source(upload, "tar"), dest)
    assert (out / "a.txt").read_bytes() == b"x\n"


@pytest.mark.parametrize(
    ("members", "said"),
    [
        ([regular("../x")], "climbs out"),
        ([regular("a/../../x")], "climbs out"),
        ([regular("/etc/passwd")], "absolute path"),
        ([regular("ok"), regular("/x")], "absolute path"),
        ([entry("ln", tarfile.SYMTYPE, "../x")], "symbolic link pointing outside"),
        ([entry("ln", tarfile.SYMTYPE, "a/../../../x")], "symbolic link pointing outside"),
        ([entry("ln", tarfile.SYMTYPE, "/etc/passwd")], "absolute or empty"),
        ([entry("ln", tarfile.SYMTYPE, ".git/hooks")], "symbolic link pointing outside"),
        ([entry("d", SYM, "."), entry("d/x", SYM, "../x")], "under a symbolic link"),
        ([entry("d", SYM, "."), entry("e", SYM, "d/../x")], "pointing outside"),
        ([entry("ln", tarfile.SYMTYPE, "/tmp"), regular("ln/x")], "absolute or empty"),
        ([regular("t", b"secret"), entry("h", tarfile.LNKTYPE, "t")], "hard link"),
        ([entry("h", tarfile.LNKTYPE, "/etc/passwd")], "hard link"),
        ([entry("null", tarfile.CHRTYPE)], "device, FIFO"),
        ([entry("disk", tarfile.BLKTYPE)], "device, FIFO"),
        ([entry("pipe", tarfile.FIFOTYPE)], "device, FIFO"),
        ([regular("a.txt"), regular("a.txt")], "appears twice"),
        ([regular("./a.txt"), regular("a.txt")], "appears twice"),
        ([entry("a", tarfile.DIRTYPE), regular("a")], "appears twice"),
        ([regular("a"), entry("a", tarfile.DIRTYPE)], "appears twice"),
        ([regular("a"), regular("a/b")], "under a file"),
        ([regular("x" * 300)], "cannot be written"),
    ],
)  # fmt: skip
def test_hostile_entries_are_refused(dest: Path, members: list[Member], said: str) -> None:
    refused(dest, tarball(*members), said)
    assert not (dest.parent.parent / "x").exists()


def test_a_sparse_file_is_refused(dest: Path) -> None:
    info, _ = regular("holes")
    info.type = tarfile.GNUTYPE_SPARSE
    refused(dest, tarball((info, b"x\n")), "sparse file")


def test_a_gzip_bomb_stops_at_the_byte_limit(dest: Path) -> None:
    data = tarball(regular("zeros", b"\0" * (8 << 20)), gz=True)
    assert len(data) < 64 << 10
    refused(dest, data, "unpacks to more than", "tar.gz", max_total_bytes=1 << 20)


def test_a_huge_pax_header_is_refused_before_it_is_held(dest: Path) -> None:
    info, data = regular("a.txt")
    info.pax_headers = {"comment": "y" * (2 << 20)}
    refused(dest, tarball((info, data), gz=True), "header larger than", "tar.gz")


@pytest.mark.parametrize(
    ("members", "limits", "said"),
    [
        ([regular(f"f{n}") for n in range(6)], {"max_entries": 5}, "more than 5 entries"),
        ([regular("big", b"x" * 2048)], {"max_file_bytes": 1024}, "larger than 1024 bytes"),
        ([regular("a", b"x" * 4096)], {"max_archive_bytes": 1024}, "archive is larger than"),
    ],
)
def test_limits_are_enforced(
    dest: Path, members: list[Member], limits: dict[str, int], said: str
) -> None:
    refused(dest, tarball(*members), said, "tar", **limits)


@pytest.mark.parametrize(
    ("data", "kind", "said"),
    [
        (b"not a tarball at all" * 40, "tar", "not a readable tarball"),
        (tarball(regular("a")), "tar.gz", "not gzip-compressed; send it with kind 'tar'"),
        (tarball(regular("a"), gz=True), "tar", "is gzip-compressed; send it with kind 'tar.gz'"),
        (b"\x1f\x8b" + b"\0" * 64, "tar.gz", "not a readable tarball"),
        (tarball(regular("a", os.urandom(4096)), gz=True)[:200], "tar.gz", "not a readable"),
    ],
    ids=["garbage", "tar-sent-as-gz", "gz-sent-as-tar", "empty-gzip", "truncated-gzip"],
)
def test_corrupt_tarballs_are_refused(dest: Path, data: bytes, kind: str, said: str) -> None:
    refused(dest, data, said, kind)


def test_an_uploaded_git_folder_is_dropped_and_never_runs(tmp_path: Path, dest: Path) -> None:
    marker = tmp_path / "pwned"
    hook = HOOK.format(marker=marker).encode()
    config = f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n".encode()
    data = tarball(
        regular(".git/config", config),
        regular(".git/HEAD", b"ref: refs/heads/main\n"),
        regular(".git/hooks/post-checkout", hook, mode=0o755),
        regular(".git/hooks/pre-commit", hook, mode=0o755),
        regular("hooks/post-checkout", hook, mode=0o755),
        regular(".GIT/config", config),
        regular("vendor/lib/.git", b"gitdir: /somewhere/else\n"),
        regular("vendor/lib/x.py", b"x = 1\n"),
        regular("src/.git/config", config),
        regular("main.py", b"print(1)\n"),
    )
    out = unpack(dest, data)
    assert sorted(os.listdir(out / ".git" / "refs" / "heads")) == ["main"]
    assert not (out / ".git" / "hooks").exists()
    assert "fsmonitor" not in (out / ".git" / "config").read_text()
    assert not (out / "vendor" / "lib" / ".git").exists()
    tracked = plain(out, "ls-files").split()
    assert tracked == ["hooks/post-checkout", "main.py", "vendor/lib/x.py"]
    # An ordinary git, as the session will run it, finds nothing of the upload's to run either.
    plain(out, "checkout", "-q", "-b", "session")
    plain(out, "commit", "-q", "--allow-empty", "-m", "work")
    assert not marker.exists()


# --- bundles --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "branch"), [(("--all",), "main"), (("dev",), "dev"), (("main", "dev"), "main")]
)
def test_a_bundle_round_trips(
    tmp_path: Path, dest: Path, what: tuple[str, ...], branch: str
) -> None:
    source = make_repo(tmp_path / "source")
    plain(source, "bundle", "create", str(tmp_path / "r.bundle"), *what)
    data = (tmp_path / "r.bundle").read_bytes()
    out = materialize(archive_source(data, "bundle"), dest)
    assert head(out) == head(source, branch)
    assert plain(out, "symbolic-ref", "--short", "HEAD").strip() == branch
    assert plain(out, "remote").strip() == ""
    assert plain(out, "status", "--porcelain") == ""


def _truncated(tmp_path: Path) -> bytes:
    source = make_repo(tmp_path / "source")
    plain(source, "bundle", "create", str(tmp_path / "r.bundle"), "--all")
    data = (tmp_path / "r.bundle").read_bytes()
    return data[: len(data) - 40]


def _incremental(tmp_path: Path) -> bytes:
    source = make_repo(tmp_path / "source")
    plain(source, "bundle", "create", str(tmp_path / "r.bundle"), "main..dev")
    return (tmp_path / "r.bundle").read_bytes()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda _: b"# v2 git bundle\n" + b"garbage\n" * 20, "does not verify: .*header"),
        (lambda _: b"PK\x03\x04 a zip file", "not a git bundle"),
        (_truncated, "git clone failed"),
        (_incremental, "does not verify: .*prerequisite"),
    ],
    ids=["bad-header", "zip", "truncated", "needs-history"],
)
def test_corrupt_bundles_are_refused(tmp_path: Path, dest: Path, make: object, said: str) -> None:
    assert callable(make)
    with pytest.raises(IntakeError, match=said) as caught:
        materialize(archive_source(make(tmp_path), "bundle"), dest)
    assert "kestrel-bundle-" not in str(caught.value)
    assert not dest.exists()


# --- the destination ------------------------------------------------------------------------


def test_an_existing_empty_dest_is_kept_and_emptied_on_failure(dest: Path) -> None:
    dest.mkdir(parents=True)
    with pytest.raises(IntakeError):
        unpack(dest, tarball(regular("ok"), regular("../x")))
    assert dest.is_dir() and os.listdir(dest) == []


def test_a_dest_with_files_is_refused_and_left_alone(dest: Path) -> None:
    dest.mkdir(parents=True)
    (dest / "keep").write_text("mine\n")
    with pytest.raises(FileExistsError):
        unpack(dest, tarball(regular("a")))
    assert (dest / "keep").read_text() == "mine\n"
