"""Where a session works: an overlay of the checkout, so the checkout changes only on approval.

Two kinds, chosen at start-up:

- `kernel`: a kernel overlayfs mounted over the checkout's own path inside a private mount
  namespace of this process (see `namespace`). Tools, commands and the sandbox all see the merged
  view at the usual path; writes land in the session's upper layer. Creating it is a few mounts,
  whatever the size of the repository.
- `copy`: where the kernel refuses, a copy of the checkout in the session's layer directory;
  the session works on the copy's path instead.

Each session's layer lives in `<data>/overlays/<session>`, and outlives the process: a killed
session is resumed on the same layer, and `kestrel apply` reads its change from the checkpoints.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from kestrel.protocol.errors import ConfigError
from kestrel.workspace.namespace import (
    NamespaceUnavailable,
    enter_private_namespace,
    mount_overlay,
    unmount_overlay,
)

ViewKind = Literal["kernel", "copy"]

_entered = False
"""Whether this process already moved into its private namespace (it can do so only once)."""


@dataclass(frozen=True, slots=True)
class Layer:
    """The directories that hold one session's side of the overlay."""

    root: Path

    @property
    def upper(self) -> Path:
        """The kernel overlay's writable layer: what the session wrote or deleted."""
        return self.root / "upper"

    @property
    def work(self) -> Path:
        """The kernel overlay's scratch directory."""
        return self.root / "work"

    @property
    def lower(self) -> Path:
        """Where the real checkout stays reachable inside the namespace."""
        return self.root / "lower"

    @property
    def tree(self) -> Path:
        """The copy that a `copy` view works on."""
        return self.root / "tree"

    @property
    def journal(self) -> Path:
        """The apply journal's directory."""
        return self.root / "journal"

    def exists(self) -> bool:
        """Whether the session has a layer on disk."""
        return self.upper.is_dir() or self.tree.is_dir()


def layer_for(data_dir: Path, session_id: str) -> Layer:
    """The layer directory of a session."""
    return Layer(data_dir / "overlays" / session_id)


@dataclass(frozen=True, slots=True)
class View:
    """An open overlay: where the session works and where the real checkout can be written."""

    kind: ViewKind
    checkout: Path
    root: Path
    real: Path
    layer: Layer
    fresh: bool = False
    """The layer was created now: the view shows the checkout as it is, with no change."""

    @property
    def journal(self) -> Path:
        """Where applies to the real checkout keep their journal: inside its `.git` folder when
        it has one, where staged files and backups are hard links away from their targets (the
        layer is another mount in the kernel kind, so every file would be copied); else in the
        session's layer."""
        git = self.real / ".git"
        if git.is_dir() and not git.is_symlink():
            return git / "kestrel-journal"
        return self.layer.journal

    def close(self) -> None:
        """Take the overlay off the checkout (kernel); the layer stays on disk."""
        if self.kind == "kernel":
            unmount_overlay(self.checkout, self.layer.lower)
            _rechdir()


def open_view(checkout: Path, layer: Layer, *, kernel: bool = True) -> View:
    """Open the session's overlay of `checkout`, its layer created or reused.

    Tries the kernel overlay first (when `kernel` is true and this process can still enter a
    namespace), then falls back to a copy. Raises `ConfigError` when the layer would lie inside
    the checkout.
    """
    checkout = checkout.resolve()
    if layer.root.resolve().is_relative_to(checkout):
        raise ConfigError(
            f"the data directory ({layer.root.parent.parent}) lies inside the workspace "
            f"({checkout}); set KESTREL_DATA_DIR elsewhere or use --workspace direct"
        )
    fresh = not layer.exists()
    layer.root.mkdir(parents=True, exist_ok=True)
    if kernel and not layer.tree.is_dir():
        try:
            return replace(_kernel_view(checkout, layer), fresh=fresh)
        except NamespaceUnavailable:
            pass
    return replace(_copy_view(checkout, layer), fresh=fresh)


def prepare_namespace() -> str | None:
    """Move this process into its private namespace now, while it has one thread.

    Returns None when done (or done before), else why the kernel overlay cannot be used; the
    session then works on a copy.
    """
    global _entered
    if _entered:
        return None
    try:
        enter_private_namespace()
    except NamespaceUnavailable as exc:
        return str(exc)
    _entered = True
    return None


def _kernel_view(checkout: Path, layer: Layer) -> View:
    if not _entered:
        reason = prepare_namespace()
        if reason is not None:
            raise NamespaceUnavailable(reason)
    mount_overlay(checkout, layer.lower, layer.upper, layer.work)
    _rechdir()
    return View(kind="kernel", checkout=checkout, root=checkout, real=layer.lower, layer=layer)


def _copy_view(checkout: Path, layer: Layer) -> View:
    if not layer.tree.is_dir():
        partial = layer.root / "tree.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(checkout, partial, symlinks=True, ignore=_special_files)
        os.replace(partial, layer.tree)  # A killed copy is never taken for a finished one.
    return View(kind="copy", checkout=checkout, root=layer.tree, real=checkout, layer=layer)


def _special_files(directory: str, names: list[str]) -> set[str]:
    """Names that are neither files, directories nor symlinks: copying a fifo would hang."""
    skipped = set()
    for name in names:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.add(name)
    return skipped


def discard_layer(layer: Layer) -> None:
    """Delete a session's layer (its overlay must be closed)."""
    shutil.rmtree(layer.root, ignore_errors=True)


def _rechdir() -> None:
    """Look the working directory up again, so it names the view now mounted there (or not)."""
    with contextlib.suppress(OSError):
        os.chdir(os.getcwd())
