"""The git steps of intake: clone a checked source, check its tree's size, commit an upload.

Every command goes through `kestrel.gitsafe.run_git`, so hooks, fsmonitor, pagers, credential
helpers and every transport are off unless a step turns one back on. A clone enables exactly
one transport, fetches without checking out, and checks the out-coming tree against the limits
before a file is written, so a small pack cannot unpack into a disk-filling work tree.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kestrel.gitsafe import (
    GitRun,
    GitUnavailable,
    NotARepository,
    Repository,
    UnsafeRepository,
    open_repository,
    run_git,
)
from kestrel.server.intake_archive import check_links
from kestrel.server.intake_sources import (
    GitUrl,
    IntakeError,
    IntakeLimits,
    UrlScheme,
    is_commit_id,
)

_CLONE = ("clone", "--quiet", "--no-checkout", "--template=", "--no-recurse-submodules")
_CHECKED_FETCH = ("-c", "transfer.fsckObjects=true")
_SLOW_HTTP = ("-c", "http.lowSpeedLimit=1024", "-c", "http.lowSpeedTime=60")
_TRANSPORT: dict[UrlScheme, tuple[str, ...]] = {
    "https": ("-c", "protocol.https.allow=always", *_SLOW_HTTP),
    "http": ("-c", "protocol.http.allow=always", *_SLOW_HTTP),
    # gitsafe sets core.sshCommand=false against repository config; a fresh clone has none
    # yet, and BatchMode keeps ssh from waiting for a password nobody can type.
    "ssh": ("-c", "protocol.ssh.allow=always", "-c", "core.sshCommand=ssh -o BatchMode=yes"),
}
_IDENTITY = ("-c", "user.name=Kestrel", "-c", "user.email=kestrel@localhost")
_BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_DEFAULT_BRANCHES = ("main", "master")
_MAX_MESSAGE_CHARS = 600


def clone_url(source: GitUrl, dest: Path, limits: IntakeLimits) -> None:
    """Clone a remote repository into `dest` and check out `source.ref` (or its HEAD)."""
    ref = source.ref
    branch = () if ref is None or is_commit_id(ref) else ("--branch", ref)
    args = (*_TRANSPORT[source.scheme], *_CHECKED_FETCH, *_CLONE, *branch)
    _git(dest.parent, (*args, "--", source.url, str(dest)), limits, dest, repository=False)
    _check_out(dest, ref if ref is not None and is_commit_id(ref) else None, limits)


def clone_local(path: str, dest: Path, roots: Sequence[Path], limits: IntakeLimits) -> None:
    """Clone the work tree at `path` into `dest`, if it lies inside one of `roots`."""
    try:
        resolved = Path(path).resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise IntakeError(f"path {path!r} does not exist on the server") from error
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    if not any(resolved.is_relative_to(root) for root in real_roots):
        raise IntakeError(
            f"path {path!r} is outside the folders this server may clone from"
            if real_roots
            else "this server accepts no local paths; upload an archive or send a git_url"
        )
    try:
        repo = _open(resolved)
    except NotARepository as error:
        raise IntakeError(f"path {path!r} is not a git work tree") from error
    if repo.work_tree != resolved:
        raise IntakeError(f"path {path!r} is inside a git work tree but is not its top folder")
    if not any(repo.common_dir.is_relative_to(root) for root in real_roots):
        raise IntakeError(f"the git data of {path!r} lies outside the allowed folders")
    # --no-local: git's shortcut for local paths hard-links or copies objects/ file by file,
    # following any symbolic link planted there; the ordinary transport sends only objects.
    args = (*_CHECKED_FETCH, *_CLONE, "--no-local", "--", str(resolved), str(dest))
    _git(dest.parent, args, limits, dest, repository=False, file_protocol=True)
    _check_out(dest, None, limits)
    _git(dest, ("remote", "remove", "origin"), limits, dest)


def clone_bundle(upload: bytes | Path, dest: Path, limits: IntakeLimits) -> None:
    """Verify a git bundle, clone it into `dest` and check out its HEAD (or main branch)."""
    with tempfile.TemporaryDirectory(prefix="kestrel-bundle-") as scratch_dir:
        scratch = Path(scratch_dir)
        bundle = _bundle_file(upload, scratch, limits)
        checker = scratch / "verify"
        checker.mkdir()
        _git(checker, ("init", "-q", "--template="), limits, scratch, repository=False)
        verify = ("bundle", "verify", str(bundle))
        _git(checker, verify, limits, scratch, what="the bundle does not verify")
        args = (*_CHECKED_FETCH, *_CLONE, "--", str(bundle), str(dest))
        _git(dest.parent, args, limits, dest, repository=False, file_protocol=True)
    _check_out(dest, None, limits)
    _git(dest, ("remote", "remove", "origin"), limits, dest)


def commit_upload(dest: Path, limits: IntakeLimits) -> None:
    """Start a repository over the unpacked files in `dest` with one commit holding them all."""
    _git(
        dest, ("init", "-q", "--template=", "--initial-branch=main"), limits, dest, repository=False
    )
    # Only the upload's own .gitignore files count, not the server user's excludes file.
    no_excludes = f"core.excludesFile={os.devnull}"
    _git(dest, ("-c", no_excludes, "add", "-A", "--", "."), limits, dest)
    message = "Uploaded files"
    args = (*_IDENTITY, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    _git(dest, args, limits, dest)


def _bundle_file(upload: bytes | Path, scratch: Path, limits: IntakeLimits) -> Path:
    """The bundle as a file of acceptable size that starts with a bundle signature."""
    if isinstance(upload, bytes):
        path, size, head = scratch / "upload.bundle", len(upload), upload[:16]
    else:
        path = Path(os.path.abspath(upload))
        try:
            size = path.stat().st_size
            with path.open("rb") as handle:
                head = handle.read(16)
        except OSError as error:
            raise IntakeError(f"the uploaded bundle cannot be read: {error.strerror}") from error
    if size > limits.max_archive_bytes:
        raise IntakeError(f"the bundle is larger than {limits.max_archive_bytes} bytes; refused")
    if head not in _BUNDLE_SIGNATURES:
        raise IntakeError("the upload is not a git bundle (made by `git bundle create`)")
    if isinstance(upload, bytes):
        path.write_bytes(upload)
    return path


def _check_out(dest: Path, commit_id: str | None, limits: IntakeLimits) -> None:
    """Fill the work tree with `commit_id`, or with HEAD, after checking the tree's size."""
    if commit_id is not None:
        commit = _resolve(dest, commit_id, limits)
        if commit is None:
            raise IntakeError(f"commit {commit_id} is not in the repository")
        _check_tree(dest, commit, limits)
        _git(dest, ("checkout", "-q", "--detach", commit, "--"), limits, dest)
    else:
        commit = _resolve(dest, "HEAD", limits) or _adopt_branch(dest, limits)
        _check_tree(dest, commit, limits)
        _git(dest, ("checkout", "-q", "-f"), limits, dest)
    check_links(dest)


def _adopt_branch(dest: Path, limits: IntakeLimits) -> str:
    """When the source has no HEAD (a bundle of some branches), make its main branch ours."""
    listing = _git(dest, ("for-each-ref", "--format=%(refname)", "refs/remotes/origin/"), limits)
    names = [line.removeprefix("refs/remotes/origin/") for line in listing.splitlines()]
    names = sorted(name for name in names if name and name != "HEAD")
    if not names:
        raise IntakeError("the repository holds no commits to start a session from")
    branch = next((name for name in _DEFAULT_BRANCHES if name in names), names[0])
    commit = _resolve(dest, f"refs/remotes/origin/{branch}", limits)
    if commit is None:
        raise IntakeError(f"branch {branch!r} of the repository does not point at a commit")
    _git(dest, ("update-ref", f"refs/heads/{branch}", commit), limits)
    _git(dest, ("symbolic-ref", "HEAD", f"refs/heads/{branch}"), limits)
    return commit


def _resolve(dest: Path, rev: str, limits: IntakeLimits) -> str | None:
    args = ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    done = _run(dest, args, limits, repository=True, file_protocol=False)
    return done.text().strip() if done.ok else None


def _check_tree(dest: Path, commit: str, limits: IntakeLimits) -> None:
    """Refuse a commit whose files would pass the entry, file or total size limits."""
    listing = _git(dest, ("ls-tree", "-r", "-l", "-z", "--full-tree", commit), limits)
    entries = total = 0
    for record in listing.split("\0"):
        if not record:
            continue
        entries += 1
        meta, _, name = record.partition("\t")
        fields = meta.split()
        size = int(fields[3]) if len(fields) == 4 and fields[1] == "blob" else 0
        if size > limits.max_file_bytes:
            raise IntakeError(f"file {name!r} is larger than {limits.max_file_bytes} bytes")
        total += size
    if entries > limits.max_entries:
        raise IntakeError(f"the repository holds more than {limits.max_entries} files")
    if total > limits.max_total_bytes:
        raise IntakeError(f"the repository's files take more than {limits.max_total_bytes} bytes")


def _open(path: Path) -> Repository:
    """The validated repository at `path`; `NotARepository` passes through for the caller."""
    try:
        return open_repository(path)
    except UnsafeRepository as error:
        raise IntakeError(f"the repository is not safe to run git in: {error}") from error
    except GitUnavailable as error:
        raise IntakeError(f"git could not read the repository: {error}") from error


def _git(
    cwd: Path,
    args: Sequence[str],
    limits: IntakeLimits,
    hide: Path | None = None,
    *,
    repository: bool = True,
    file_protocol: bool = False,
    what: str = "",
) -> str:
    """Run one hardened git command; its stdout, or `IntakeError` with what git said.

    `hide` is a server folder whose name is cut from the message, which the user will read;
    `what` opens the message (else "git <command> failed").
    """
    done = _run(cwd, args, limits, repository=repository, file_protocol=file_protocol)
    if done.ok:
        return done.text()
    said = _explain(done)
    if hide is not None:
        said = said.replace(str(hide), "<server folder>")
    if not what:
        verb = next((arg for arg in args if not arg.startswith("-") and "=" not in arg), "")
        what = f"git {verb} failed"
    raise IntakeError(f"{what}: {said}")


def _explain(done: GitRun) -> str:
    """What git said went wrong: the `fatal:` line and what led to it (ssh's reason), or the
    first errors, never the advice printed after them."""
    lines = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("hint:", "warning:"))]
    fatal = next((at for at, line in enumerate(lines) if line.startswith("fatal:")), None)
    kept = lines[:2] if fatal is None else lines[max(0, fatal - 2) : fatal + 1]
    return "; ".join(kept)[:_MAX_MESSAGE_CHARS] or done.said()


def _run(
    cwd: Path, args: Sequence[str], limits: IntakeLimits, *, repository: bool, file_protocol: bool
) -> GitRun:
    try:
        return run_git(
            cwd,
            args,
            timeout_s=limits.clone_timeout_s,
            repository=repository,
            file_protocol=file_protocol,
        )
    except GitUnavailable as error:
        # A clone that runs out of time is the source's fault as often as the server's.
        raise IntakeError(f"git did not finish: {error}") from error
    except (UnsafeRepository, NotARepository) as error:
        raise IntakeError(f"git refused the checkout: {error}") from error
