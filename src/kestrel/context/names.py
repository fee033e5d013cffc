"""Definitions by short name: from a snapshot's columns, plus the files changed since."""

from __future__ import annotations

from collections.abc import Container

from kestrel.context.model import Symbol
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import Snapshot


class Names:
    """Definitions by short name, then by path; dropping a file touches only its names.

    With a snapshot (and `stored`, the paths of its ranked files), the definitions of files
    unchanged since it was written are decoded from it when a name is asked for: a popular name
    costs microseconds per definition, not the decoding of every file that defines it. Files
    added since are held here.
    """

    def __init__(self, snapshot: Snapshot | None = None, stored: Container[str] = ()) -> None:
        self._snapshot = snapshot
        self._stored: Container[str] = stored
        self._decoded: dict[str, dict[str, tuple[Symbol, ...]]] = {}
        """Stored definitions by name, decoded when first asked for."""
        self._gone: set[str] = set()
        """Stored paths dropped or replaced since: their stored definitions no longer count."""
        self._held: dict[str, dict[str, tuple[Symbol, ...]]] = {}
        """Tuples, not lists: with only tuples and strings inside, the garbage collector skips
        them."""

    def get(self, name: str) -> dict[str, tuple[Symbol, ...]]:
        """Definitions named `name`, by path."""
        out: dict[str, tuple[Symbol, ...]] = {}
        for path, symbols in self._stored_named(name).items():
            if path not in self._gone:
                out[path] = symbols
        out.update(self._held.get(name, {}))
        return out

    def count(self, name: str) -> int:
        """About how many definitions are named `name` (files replaced since the snapshot
        may be counted twice), without decoding any."""
        held = sum(len(symbols) for symbols in self._held.get(name, {}).values())
        snapshot = self._snapshot
        if snapshot is None:
            return held
        name_id = snapshot.names.find(name)
        return held + (0 if name_id is None else snapshot.definition_count(name_id))

    def _stored_named(self, name: str) -> dict[str, tuple[Symbol, ...]]:
        """The snapshot's definitions of `name`, decoded once."""
        snapshot = self._snapshot
        if snapshot is None:
            return {}
        cached = self._decoded.get(name)
        if cached is None:
            name_id = snapshot.names.find(name)
            found: dict[str, list[Symbol]] = {}
            if name_id is not None:
                slots, symbols = snapshot.definitions_named(name_id)
                for slot, symbol in zip(slots, symbols, strict=True):
                    found.setdefault(snapshot.paths[slot], []).append(symbol)
            cached = self._decoded[name] = {p: tuple(s) for p, s in found.items()}
        return cached

    def add(self, record: FileRecord) -> None:
        """Hold the definitions of a record (its path dropped first)."""
        if record.path in self._stored:
            self._gone.add(record.path)
        if record.symbols is None:
            return
        mine: dict[str, list[Symbol]] = {}
        for symbol in record.symbols.definitions:
            mine.setdefault(symbol.name, []).append(symbol)
        for name, symbols in mine.items():
            self._held.setdefault(name, {})[record.path] = tuple(symbols)

    def remove(self, path: str, old: FileRecord | None) -> None:
        """Forget the definitions of `path`, whose record was `old`."""
        if path in self._stored and path not in self._gone:
            self._gone.add(path)
            return
        if old is None or old.symbols is None:
            return
        for name in {symbol.name for symbol in old.symbols.definitions}:
            owners = self._held.get(name)
            if owners is not None:
                owners.pop(path, None)
                if not owners:
                    del self._held[name]
