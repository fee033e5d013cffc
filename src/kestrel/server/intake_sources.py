"""What a user may name as a session's repository, checked before anything touches the disk.

Every check here is pure: a `GitUrl`, `LocalPath` or `Archive` that exists has already passed
them, so the steps that run git never see an option, a remote helper or an embedded password.
Messages never repeat the URL, so a password the user pasted by mistake is not echoed back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from kestrel.protocol.errors import KestrelError

ArchiveKind = Literal["tar", "tar.gz", "bundle"]
ARCHIVE_KINDS: tuple[ArchiveKind, ...] = ("tar", "tar.gz", "bundle")

UrlScheme = Literal["https", "http", "ssh"]

_MAX_URL_CHARS = 2048
_MAX_REF_CHARS = 255
_MAX_PATH_CHARS = 4096

# git runs `git-remote-<name>` for `<name>::<address>`, whatever the name (ext:: runs a shell).
_HELPER_FORM = re.compile(r"[A-Za-z0-9._~+-]*::")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,15}")
_USER = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")
_HOST = r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?"
_HOST_PORT = re.compile(rf"(?P<host>{_HOST})(?::(?P<port>[0-9]{{1,5}}))?")
_SCP = re.compile(rf"(?P<user>[^@/:]+)@(?P<host>{_HOST}):(?P<path>.+)")
_FULL_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REF_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


class IntakeError(KestrelError):
    """A repository source was refused or could not be fetched; the message is for the user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IntakeLimits:
    """Bounds on what one source may cost the server in bytes, entries and time."""

    max_archive_bytes: int = 200 * 2**20
    max_entries: int = 100_000
    max_file_bytes: int = 50 * 2**20
    max_total_bytes: int = 2 * 2**30
    clone_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        """Refuse limits that would let nothing, or everything, through."""
        for name in ("max_archive_bytes", "max_entries", "max_file_bytes", "max_total_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"IntakeLimits.{name} must be positive")
        if self.clone_timeout_s <= 0:
            raise ValueError("IntakeLimits.clone_timeout_s must be positive")


@dataclass(frozen=True, slots=True)
class GitUrl:
    """A remote repository to clone: https, http, ssh or scp-like `user@host:path`."""

    url: str
    ref: str | None = None

    def __post_init__(self) -> None:
        """Refuse transports, options and credentials before the URL reaches git."""
        url_scheme(self.url)
        if self.ref is not None:
            check_ref(self.ref)

    @property
    def scheme(self) -> UrlScheme:
        """Which transport git will use for this URL."""
        return url_scheme(self.url)


@dataclass(frozen=True, slots=True)
class LocalPath:
    """A work tree on the server's own disk, cloned only when inside an allowed root."""

    path: str

    def __post_init__(self) -> None:
        """Refuse anything but a plain absolute path."""
        if not isinstance(self.path, str) or not self.path:
            raise IntakeError("path must be a non-empty string")
        if len(self.path) > _MAX_PATH_CHARS or not self.path.isprintable():
            raise IntakeError("path must be printable and at most 4096 characters long")
        if not self.path.startswith("/"):
            raise IntakeError("path must be absolute (start with '/')")


@dataclass(frozen=True, slots=True)
class Archive:
    """An uploaded tarball or git bundle, as bytes or as a file the server saved it to."""

    data: bytes | Path = field(repr=False)
    kind: ArchiveKind

    def __post_init__(self) -> None:
        """Refuse an unknown kind or an empty upload."""
        if self.kind not in ARCHIVE_KINDS:
            raise IntakeError(f"archive kind must be one of {', '.join(ARCHIVE_KINDS)}")
        if isinstance(self.data, bytes) and not self.data:
            raise IntakeError("the uploaded archive is empty")


RepositorySource = GitUrl | LocalPath | Archive
"""Where a session's repository comes from."""


def url_scheme(url: object) -> UrlScheme:
    """The transport of an acceptable git URL; `IntakeError` saying why any other is refused."""
    if not isinstance(url, str) or not url:
        raise IntakeError("git_url must be a non-empty string")
    if len(url) > _MAX_URL_CHARS:
        raise IntakeError(f"git_url is longer than {_MAX_URL_CHARS} characters")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise IntakeError("git_url must not contain spaces or control characters")
    if url.startswith("-"):
        raise IntakeError("git_url must not start with '-' (git would read it as an option)")
    if _HELPER_FORM.match(url):
        raise IntakeError(
            "git_url uses the '<transport>::<address>' form, which makes git run a helper "
            "program; use an https://, ssh:// or user@host:path URL"
        )
    if "://" in url:
        return _scheme_url(url)
    return _scp_url(url)


def _scheme_url(url: str) -> UrlScheme:
    scheme = url.split("://", 1)[0].lower()
    if scheme == "file":
        raise IntakeError(
            'file:// URLs are not accepted; send {"path": ...} for a repository on the '
            "server, which is allowed only inside the folders the server is configured with"
        )
    if scheme not in ("https", "http", "ssh"):
        named = f" '{scheme}'" if _SCHEME.fullmatch(scheme) else ""
        raise IntakeError(
            f"git_url scheme{named} is not accepted; use https://, ssh:// or user@host:path"
        )
    try:
        netloc = urlsplit(url).netloc
    except ValueError as error:
        raise IntakeError("git_url is not a well-formed URL") from error
    userinfo, at, host_port = netloc.rpartition("@")
    if at and scheme != "ssh":
        raise IntakeError(_CREDENTIALS)
    if at:
        _check_ssh_user(userinfo)
    _check_host_port(host_port)
    return "ssh" if scheme == "ssh" else ("https" if scheme == "https" else "http")


def _scp_url(url: str) -> UrlScheme:
    user, at, _ = url.partition("@")
    if at and "/" not in user and ":" in user:
        raise IntakeError(_SSH_USER_ONLY)
    found = _SCP.fullmatch(url)
    if found is None:
        raise IntakeError(
            "git_url is neither a URL (https://, ssh://) nor user@host:path; a folder on the "
            'server must be sent as {"path": ...} and is allowed only inside configured roots'
        )
    _check_ssh_user(found["user"])
    if found["path"].startswith("-"):
        raise IntakeError("the repository path in git_url must not start with '-'")
    return "ssh"


_CREDENTIALS = (
    "git_url must not carry a user name or password; send the URL without them, since this "
    "server authenticates to git hosts with its own credential configuration"
)
_SSH_USER_ONLY = (
    "an ssh git_url may name a user but never a password; the server authenticates with its "
    "own ssh keys"
)


def _check_ssh_user(user: str) -> None:
    if ":" in user:
        raise IntakeError(_SSH_USER_ONLY)
    if not _USER.fullmatch(user):
        raise IntakeError(
            "the ssh user name in git_url may hold only letters, digits, '.', '_' and '-', "
            "and must not start with '-'"
        )


def _check_host_port(host_port: str) -> None:
    if host_port.startswith("-"):
        raise IntakeError("the host in git_url must not start with '-'")
    found = _HOST_PORT.fullmatch(host_port)
    if found is None:
        raise IntakeError("git_url does not name a valid host (letters, digits, '.', '-')")
    port = found["port"]
    if port is not None and not 0 < int(port) < 65536:
        raise IntakeError("the port in git_url must be between 1 and 65535")


def check_ref(ref: object) -> str:
    """A branch, tag or full commit id in `git check-ref-format` shape; `IntakeError` if not."""
    if not isinstance(ref, str) or not ref:
        raise IntakeError("ref must be a non-empty string")
    if len(ref) > _MAX_REF_CHARS:
        raise IntakeError(f"ref is longer than {_MAX_REF_CHARS} characters")
    if ref.startswith("-"):
        raise IntakeError("ref must not start with '-' (git would read it as an option)")
    if _REF_BAD_CHARS.search(ref) or not ref.isprintable():
        raise IntakeError(
            "ref must not contain spaces, control characters or any of ~ ^ : ? * [ \\"
        )
    parts = ref.split("/")
    if ".." in ref or "@{" in ref or ref == "@" or ref.endswith(".") or "" in parts:
        raise IntakeError(
            "ref is not a valid git reference name (no '..', '@{', empty components, "
            "or trailing '.' or '/')"
        )
    if any(part.startswith(".") or part.endswith(".lock") for part in parts):
        raise IntakeError("no component of ref may start with '.' or end with '.lock'")
    return ref


def is_commit_id(ref: str) -> bool:
    """Whether `ref` is a full commit id rather than a branch or tag name."""
    return _FULL_COMMIT.fullmatch(ref) is not None
