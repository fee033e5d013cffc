"""A private mount namespace for this process, and the overlay mounted in it.

Kestrel moves itself into a new user and mount namespace (as `unshare -Urm` would, but keeping
its own user id) and mounts a kernel overlayfs over the checkout there. From then on every part of
the process, and every command it starts, sees the merged view at the checkout's own path, while
the rest of the machine still sees the untouched checkout. The real checkout stays reachable
inside the namespace through a bind mount at `Layer.lower`, which is where an approved change is
applied.

A process can only enter a new user namespace while it has a single thread, so this runs at
start-up, before anything starts threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from kestrel.protocol.errors import KestrelError

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2


class NamespaceUnavailable(KestrelError):
    """This process cannot have a private mount namespace with an overlay here; says why."""


def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c") or "libc.so.6"
    return ctypes.CDLL(name, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespaceUnavailable(f"{what}: {os.strerror(errno)}")


def thread_count() -> int:
    """How many threads this process has now (1 when it may still enter a user namespace)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def enter_private_namespace() -> None:
    """Move this process into a new user and mount namespace with the same user and group ids.

    Mounts made afterwards are seen by this process and its children only. Raises
    `NamespaceUnavailable` when the kernel refuses (user namespaces off, seccomp, more than one
    thread) or on a system without them.
    """
    threads = thread_count()
    if threads != 1:
        raise NamespaceUnavailable(f"the process already runs {threads} threads")
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(user, mount)")
    # Map our own ids to themselves, so files keep their owner and commands see the same user.
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    # Keep our mounts from spreading back to the namespace they were copied from.
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")


def mount_overlay(checkout: Path, lower: Path, upper: Path, work: Path) -> None:
    """Bind the real `checkout` at `lower`, then mount the merged view over `checkout`."""
    libc = _libc()
    for path in (lower, upper, work):
        path.mkdir(parents=True, exist_ok=True)
    _check(
        libc.mount(bytes(checkout), bytes(lower), None, _MS_BIND | _MS_REC, None),
        f"bind {checkout}",
    )
    for path in (lower, upper, work):
        if any(c in str(path) for c in ",:="):
            raise NamespaceUnavailable(f"{path}: an overlay layer's path cannot hold , : or =")
    options = f"lowerdir={lower},upperdir={upper},workdir={work},userxattr"
    _check(
        libc.mount(b"overlay", bytes(checkout), b"overlay", 0, options.encode()),
        f"overlay on {checkout}",
    )


def unmount_overlay(checkout: Path, lower: Path) -> None:
    """Take the merged view off `checkout` and release the bind of the real checkout."""
    libc = _libc()
    _check(libc.umount2(bytes(checkout), _MNT_DETACH), f"unmount {checkout}")
    _check(libc.umount2(bytes(lower), _MNT_DETACH), f"unmount {lower}")
