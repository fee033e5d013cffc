"""An operating-system error as a sentence for a person, never `[Errno 2] …: PosixPath('/x')`.

`str(OSError)` shows the error number and the repr of the path it was given; a message built
from it leaks Python into what the user reads. `os_error_text` says the same thing in words,
with the path as the user would type it.
"""

from __future__ import annotations

import errno
import os

_SENTENCES = {
    errno.ENOENT: "{path} does not exist",
    errno.EACCES: "permission denied: {path}",
    errno.EPERM: "operation not permitted: {path}",
    errno.ENOTDIR: "{path} is not a directory",
    errno.EISDIR: "{path} is a directory",
    errno.EEXIST: "{path} already exists",
    errno.ENOTEMPTY: "{path} is not empty",
    errno.ENOSPC: "no space left on the device holding {path}",
    errno.EROFS: "{path} is on a read-only file system",
    errno.ENAMETOOLONG: "the name is too long: {path}",
    errno.ELOOP: "too many symbolic links in {path}",
    errno.EXDEV: "{path} is on another file system",
}
_NO_PATH = {
    errno.ENOENT: "a file or directory does not exist",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
}


def os_error_text(exc: OSError) -> str:
    """What went wrong, as a short sentence naming the path (`/x does not exist`)."""
    path = _path(exc.filename)
    if exc.errno in _SENTENCES and path:
        return _SENTENCES[exc.errno].format(path=path)
    if exc.errno in _NO_PATH:
        return _NO_PATH[exc.errno]
    reason = (exc.strerror or "").strip()
    if not reason:
        # No error number: the message was written for people already (or is all there is).
        return str(exc) or type(exc).__name__
    reason = reason[0].lower() + reason[1:]
    return f"{reason}: {path}" if path else reason


def _path(name: object) -> str:
    """A filename attribute (str, bytes, a path object, or a file descriptor) as text."""
    if isinstance(name, str | bytes | os.PathLike):
        return os.fsdecode(name)
    return ""


def error_text(exc: BaseException) -> str:
    """`os_error_text` for an OSError; any other error's own message."""
    return os_error_text(exc) if isinstance(exc, OSError) else str(exc) or type(exc).__name__
