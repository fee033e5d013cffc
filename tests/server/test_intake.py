"""Repository intake against hostile requests, tarballs, bundles and folders, with real git.

Nothing here reaches beyond loopback: remote URLs are checked without running git, and the clone
path runs against a closed port and a dumb-HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from intake_kit import head, make_repo, plain

from kestrel.server.intake import (
    GitUrl,
    IntakeError,
    IntakeLimits,
    LocalPath,
    archive_source,
    materialize,
    parse_source,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
URL = "https://example.com/r.git"


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "work" / "checkout"


# --- requests -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"git_url": URL}, GitUrl(URL)),
        ({"git_url": URL, "ref": "v1.2"}, GitUrl(URL, "v1.2")),
        ({"git_url": "https://example.com:8443/r", "ref": None}, GitUrl("https://example.com:8443/r")),
        ({"git_url": "ssh://git@example.com/o/r.git"}, GitUrl("ssh://git@example.com/o/r.git")),
        ({"git_url": "git@example.com:o/r", "ref": "x/y"}, GitUrl("git@example.com:o/r", "x/y")),
        ({"git_url": "https://[::1]/r", "ref": "a" * 40}, GitUrl("https://[::1]/r", "a" * 40)),
        ({"path": "/srv/repos/r"}, LocalPath("/srv/repos/r")),
    ],
)  # fmt: skip
def test_valid_requests_parse(body: dict[str, object], expected: object) -> None:
    assert parse_source(body) == expected


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({}, "name a repository"),
        ({"git_url": "https://h/r", "path": "/r"}, "not both"),
        ({"git_url": "https://h/r", "branch": "dev"}, "unknown field 'branch'"),
        ({"path": "/r", "ref": "main"}, "unknown field 'ref'"),
        ({"git_url": 42}, "git_url must be a string"),
        ({"git_url": "https://h/r", "ref": ["main"]}, "ref must be a string"),
        ({"path": "repos/r"}, "absolute"),
        ({"path": "/r\x00x"}, "printable"),
    ],
)
def test_malformed_requests_are_refused(body: dict[str, object], said: str) -> None:
    with pytest.raises(IntakeError, match=said):
        parse_source(body)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ext::sh -c touch% /tmp/pwned", "spaces"),
        ("ext::sh", "helper program"),
        ("file::/srv/r", "helper program"),
        ("fd::3", "helper program"),
        ("x+y::https://h/r", "helper program"),
        ("file:///etc", "file:// URLs are not accepted"),
        ("/srv/repos/r", "local|folder on the"),
        ("./r", "folder on the"),
        ("-uhttps://h/r", "start with '-'"),
        ("--upload-pack=touch", "start with '-'"),
        ("https://h/r\n", "control characters"),
        ("https://h/r\x1b[2J", "control characters"),
        ("ftp://h/r", "scheme 'ftp' is not accepted"),
        ("git://h/r", "scheme 'git' is not accepted"),
        ("ssh://-oProxyCommand=touch/r", "host in git_url must not start with '-'"),
        ("ssh://-oProxyCommand@h/r", "user name"),
        ("git@h:-r", "must not start with '-'"),
        ("git@-h:r", "neither a URL"),
        ("https:///r", "valid host"),
        ("https://h:99999/r", "port"),
        ("", "non-empty"),
    ],
)
def test_transports_and_options_are_refused_before_git_runs(url: str, said: str) -> None:
    with pytest.raises(IntakeError, match=said):
        GitUrl(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://alice:hunter2@example.com/r.git",
        "https://hunter2@example.com/r.git",
        "http://alice:hunter2@example.com/r.git",
        "ssh://git:hunter2@example.com/r.git",
        "git:hunter2@example.com:r.git",
    ],
)
def test_credentials_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(IntakeError) as caught:
        parse_source({"git_url": url})
    message = str(caught.value)
    assert "hunter2" not in message
    assert "credential configuration" in message or "own ssh keys" in message


@pytest.mark.parametrize(
    "ref",
    ["-b", "--upload-pack=x", "a..b", "a b", "a~1", "x^", "a:b", "x.lock", ".hidden", "a//b",
     "x/", "x.", "@", "a@{1}", "a\\b", "*", "", "a\tb"],
)  # fmt: skip
def test_bad_refs_are_refused(ref: str) -> None:
    with pytest.raises(IntakeError, match="ref"):
        GitUrl("https://example.com/r.git", ref)


@pytest.mark.parametrize("kind", ["zip", "tgz", "", "TAR"])
def test_unknown_archive_kinds_are_refused(kind: str) -> None:
    with pytest.raises(IntakeError, match="archive kind"):
        archive_source(b"data", kind)


# --- remote clones --------------------------------------------------------------------------


def test_http_is_refused_unless_allowed(dest: Path) -> None:
    with pytest.raises(IntakeError, match="http:// git URLs are turned off"):
        materialize(GitUrl("http://127.0.0.1:9/r.git"), dest)
    assert not dest.exists()


def test_a_closed_port_fails_quickly_as_an_intake_error(dest: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(IntakeError, match="git clone failed"):
        materialize(GitUrl(f"https://127.0.0.1:{port}/r.git"), dest)
    assert time.monotonic() - started < 30
    assert not dest.exists()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A source repository and a dumb-HTTP URL of its bare copy on loopback."""
    source = make_repo(tmp_path / "source")
    plain(tmp_path, "clone", "-q", "--bare", str(source), "site/r.git")
    plain(tmp_path / "site" / "r.git", "update-server-info")
    handler = partial(_Quiet, directory=str(tmp_path / "site"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/r.git", source
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("ref", "expected", "present"),
    [(None, "main", "a.txt"), ("dev", "dev", "b.txt"), ("sha-of-dev", "dev", "b.txt")],
)
def test_http_clone_checks_out_the_ref(
    served: tuple[str, Path], dest: Path, ref: str | None, expected: str, present: str
) -> None:
    url, source = served
    if ref == "sha-of-dev":
        ref = head(source, "dev")
    out = materialize(GitUrl(url, ref), dest, allow_http=True)
    assert head(out) == head(source, expected)
    assert (out / present).is_file()
    assert not (out / ".git" / "hooks").exists()


def test_a_missing_branch_is_an_intake_error(served: tuple[str, Path], dest: Path) -> None:
    with pytest.raises(IntakeError, match="nope"):
        materialize(GitUrl(served[0], "nope"), dest, allow_http=True)
    assert not dest.exists()


# --- local folders --------------------------------------------------------------------------


def test_a_local_repo_inside_a_root_is_cloned_not_used(tmp_path: Path, dest: Path) -> None:
    source = make_repo(tmp_path / "roots" / "r")
    out = materialize(LocalPath(str(source)), dest, allowed_roots=[tmp_path / "roots"])
    assert head(out) == head(source)
    (out / "a.txt").write_text("changed\n")
    plain(out, "commit", "-qam", "session work")
    assert (source / "a.txt").read_text() == "a\n"
    assert head(source) != head(out)
    assert plain(out, "remote").strip() == ""


def _outside(tmp_path: Path) -> str:
    return str(make_repo(tmp_path / "elsewhere" / "r"))


def _via_symlink(tmp_path: Path) -> str:
    make_repo(tmp_path / "elsewhere" / "r")
    (tmp_path / "roots").mkdir()
    (tmp_path / "roots" / "link").symlink_to(tmp_path / "elsewhere" / "r")
    return str(tmp_path / "roots" / "link")


def _dot_dot(tmp_path: Path) -> str:
    make_repo(tmp_path / "elsewhere" / "r")
    (tmp_path / "roots").mkdir()
    return str(tmp_path / "roots" / ".." / "elsewhere" / "r")


def _subfolder_of_outer_repo(tmp_path: Path) -> str:
    make_repo(tmp_path / "outer")
    (tmp_path / "outer" / "roots" / "sub").mkdir(parents=True)
    return str(tmp_path / "outer" / "roots" / "sub")


def _not_a_repo(tmp_path: Path) -> str:
    (tmp_path / "roots" / "plain").mkdir(parents=True)
    return str(tmp_path / "roots" / "plain")


def _unsafe_config(tmp_path: Path) -> str:
    repo = make_repo(tmp_path / "roots" / "r")
    plain(repo, "config", "filter.x.clean", "touch pwned")
    return str(repo)


@pytest.mark.parametrize(
    ("setup", "roots", "said"),
    [
        (_outside, ["roots"], "outside the folders"),
        (_via_symlink, ["roots"], "outside the folders"),
        (_dot_dot, ["roots"], "outside the folders"),
        (_outside, [], "accepts no local paths"),
        (_subfolder_of_outer_repo, ["outer/roots"], "not a git work tree|not its top folder"),
        (_not_a_repo, ["roots"], "not a git work tree"),
        (_unsafe_config, ["roots"], "filter.x.clean"),
        (lambda tmp_path: str(tmp_path / "roots" / "missing"), ["roots"], "does not exist"),
    ],
)
def test_local_paths_outside_roots_or_unsafe_are_refused(
    tmp_path: Path, dest: Path, setup: object, roots: list[str], said: str
) -> None:
    assert callable(setup)
    path = setup(tmp_path)
    (tmp_path / "roots").mkdir(exist_ok=True)
    allowed = [tmp_path / root for root in roots]
    with pytest.raises(IntakeError, match=said):
        materialize(LocalPath(path), dest, allowed_roots=allowed)
    assert not dest.exists()
    assert not (tmp_path / "roots" / "r" / "pwned").exists()


@pytest.mark.parametrize(
    ("limits", "said"),
    [
        ({"max_entries": 1}, "more than 1 files"),
        ({"max_file_bytes": 1}, "'a.txt' is larger than 1 bytes"),
        ({"max_total_bytes": 1}, "take more than 1 bytes"),
    ],
)
def test_a_cloned_tree_over_the_limits_is_never_checked_out(
    tmp_path: Path, dest: Path, limits: dict[str, int], said: str
) -> None:
    source = make_repo(tmp_path / "roots" / "r")
    plain(source, "merge", "-q", "dev")
    with pytest.raises(IntakeError, match=said):
        materialize(
            LocalPath(str(source)),
            dest,
            allowed_roots=[tmp_path / "roots"],
            limits=IntakeLimits(**limits),
        )
    assert not dest.exists()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "../.git/config"])
def test_a_committed_link_out_of_the_tree_is_refused(
    tmp_path: Path, dest: Path, target: str
) -> None:
    source = make_repo(tmp_path / "roots" / "r")
    (source / "docs").mkdir()
    (source / "docs" / "link").symlink_to(target)
    plain(source, "add", "docs/link")
    plain(source, "commit", "-qm", "link")
    with pytest.raises(IntakeError, match="'docs/link' is a symbolic link pointing outside"):
        materialize(LocalPath(str(source)), dest, allowed_roots=[tmp_path / "roots"])
    assert not dest.exists()


def test_a_bundle_saved_to_a_file_is_cloned_from_it(tmp_path: Path, dest: Path) -> None:
    source = make_repo(tmp_path / "source")
    bundle = tmp_path / "upload" / "r.bundle"
    bundle.parent.mkdir()
    plain(source, "bundle", "create", str(bundle), "--all")
    out = materialize(archive_source(bundle, "bundle"), dest)
    assert head(out, "main") == head(source, "main")
    assert bundle.is_file()
