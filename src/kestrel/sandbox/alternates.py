"""Object stores outside the workspace that a checkout borrows objects from (git alternates).

`git clone --shared` (or `--reference`) leaves `.git/objects/info/alternates` naming another
repository's object directory. Inside the sandbox that directory may be hidden (a private /tmp,
a masked home), and git then cannot read the checkout's history. Each alternate that looks like
an object store and is not a refused place is made visible again, read-only, at its own path.

The alternates file is in the workspace, so a sandboxed command can write it: what it names is
checked before it is bound, and never trusted to be harmless.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

MAX_DEPTH = 5
"""How deep alternates of alternates are followed (git itself stops at five)."""
MAX_FILE_BYTES = 64 * 1024
"""An alternates file larger than this is read no further."""
MAX_STORES = 32
"""At most this many object stores are bound for one workspace."""

REFUSED_TREES: tuple[str, ...] = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run")
"""System places no alternate may point into: configuration, kernel interfaces, sockets."""
HOME_ROOTS: tuple[str, ...] = ("/root", "/home")


def alternate_stores(workspace: Path, refused: Sequence[Path] = ()) -> list[Path]:
    """Object directories outside `workspace` that its repository borrows from and that may be
    bound read-only: existing, shaped like an object store, and nowhere refused."""
    objects = workspace / ".git" / "objects"
    if not objects.is_dir():
        return []
    stores: list[Path] = []
    seen = {objects.resolve()}
    for store in _walk(objects, depth=0, seen=seen):
        if store.is_relative_to(workspace) or refusal(store, refused) is not None:
            continue
        stores.append(store)
        if len(stores) >= MAX_STORES:
            break
    return stores


def refusal(store: Path, refused: Sequence[Path] = ()) -> str | None:
    """Why `store` (a resolved path) must not be bound, or None when it may be."""
    if store == Path("/"):
        return "the root directory"
    for tree in map(Path, REFUSED_TREES):
        if store.is_relative_to(tree) or tree.is_relative_to(store):
            return f"a system directory ({tree})"
    for hidden in refused:
        hidden = hidden.resolve()
        if store.is_relative_to(hidden) or hidden.is_relative_to(store):
            return f"a hidden directory ({hidden})"
    home_reason = _home_refusal(store)
    if home_reason is not None:
        return home_reason
    if not (store / "pack").is_dir():
        return "not a git object directory"
    return None


def _home_refusal(store: Path) -> str | None:
    """Home roots and home directories themselves, and anything in a home's hidden folders
    (where keys, tokens and tools' data live: `.ssh`, `.aws`, `.config`, `.local/share`)."""
    home = Path(os.path.expanduser("~")).resolve()
    for root in dict.fromkeys([*map(Path, HOME_ROOTS), home]):
        if root != Path("/") and root.is_relative_to(store):
            return f"a home directory or what holds one ({root})"
    owner = _home_holding(store, home)
    if owner is None:
        return None
    if store == owner:
        return f"a home directory ({owner})"
    inner = store.relative_to(owner).parts
    if any(part.startswith(".") and part != ".git" for part in inner):
        return "a hidden folder in a home directory"
    return None


def _home_holding(store: Path, home: Path) -> Path | None:
    """The home directory `store` is in, if any."""
    for place in (home, Path("/root")):
        if place != Path("/") and store.is_relative_to(place):
            return place
    homes = Path("/home")
    if store.is_relative_to(homes) and store != homes:
        return homes / store.relative_to(homes).parts[0]
    return None


def _walk(objects: Path, *, depth: int, seen: set[Path]) -> Iterator[Path]:
    """Every object directory named by `objects/info/alternates`, depth first, each once."""
    if depth >= MAX_DEPTH:
        return
    for line in _lines(objects / "info" / "alternates"):
        target = Path(line) if os.path.isabs(line) else objects / line
        try:
            store = target.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if store in seen or not store.is_dir():
            continue
        seen.add(store)
        yield store
        yield from _walk(store, depth=depth + 1, seen=seen)


def _lines(path: Path) -> list[str]:
    """The paths an alternates file names: no comments, no blanks, no quoted (escaped) forms."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES)
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [line.strip() for line in lines if line.strip() and line[0] not in '#"']
