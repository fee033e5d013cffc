"""Opening an index: from its postings snapshot when one fits, else by decoding every record.

The slow way decodes every record and builds the postings whole (seconds at 30,000 files); the
snapshot way maps one file, takes the records' stats from it when the index is at the generation
the snapshot was written for (else reads them from SQLite) and decodes the few records changed
since the snapshot was written. Snapshots are written after the postings are built
whole, on a background thread; a big read writes its snapshot from the bodies it kept on disk
instead (`kestrel.context.whole`).
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path

from kestrel.context.index_store import Head, IndexStore
from kestrel.context.lexical import Bm25Export, Vocabulary
from kestrel.context.postings import HasVectors, Postings
from kestrel.context.reader import RANKED_KINDS
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import Snapshot, SnapshotUnusable, snapshot_path
from kestrel.context.snapshot_write import SnapshotInput, write_snapshot
from kestrel.context.turns import release_freed

MAX_CHANGED_SHARE = 0.1
"""A snapshot missing more than this share of the files (and `MAX_CHANGED_FILES`) is not used:
building whole then costs about as much, and leaves a fresh snapshot."""
MAX_CHANGED_FILES = 500
_LAZY_BLOCK = 16_384
"""Lazy records made between two calls of `restored`'s `between`."""


@dataclass(slots=True)
class Loaded:
    """An opened index: records by path, vocabulary and postings, and how they were loaded."""

    records: dict[str, FileRecord]
    vocab: Vocabulary
    post: Postings
    from_snapshot: bool
    note: str = ""
    """Why the snapshot was not used, when one was there."""
    changed: tuple[str, ...] = ()
    """Paths the snapshot served does not hold as they are (decoded from the rows instead)."""


def load_index(store: IndexStore, has_vectors: HasVectors) -> Loaded:
    """Everything a query needs, from the snapshot if it fits the index, else decoded whole."""
    note = ""
    if store.path is not None:
        path = snapshot_path(store.path)
        try:
            return _from_snapshot(store, path, has_vectors)
        except SnapshotUnusable as exc:
            note = str(exc)
            path.unlink(missing_ok=True)  # its term ids may disagree with what comes next
        except FileNotFoundError:
            pass
    records = {r.path: r for r in store.records()}
    ranked = [r for r in records.values() if r.kind in RANKED_KINDS]
    post = Postings.built(ranked, has_vectors)
    return Loaded(records, Vocabulary(store.vocabulary()), post, False, note)


def opening_notice(store: IndexStore, note: str) -> str:
    """Why opening rebuilt the index or its postings ("" when it did not)."""
    if store.outdated is not None:
        return f"the index was in format {store.outdated}, not the current one: it is rebuilt"
    if store.migrated is not None:
        return f"the index was in format {store.migrated}: brought up to the current one"
    return f"the postings snapshot was not used ({note}): rebuilt from the index" if note else ""


def _from_snapshot(store: IndexStore, path: Path, has_vectors: HasVectors) -> Loaded:
    if not path.exists():
        raise FileNotFoundError(path)
    snapshot = Snapshot(path)
    if snapshot.token != store.token:
        raise SnapshotUnusable(f"{path.name} was written for another index")
    if snapshot.embedder != store.embedder:
        raise SnapshotUnusable(f"{path.name} holds vectors of another embedder")
    vocab = _vocabulary(store, snapshot)
    records: dict[str, FileRecord] = {}
    changed: list[str] = []
    heads = snapshot.heads() if _same_generation(store, snapshot) else None
    since = _written_since(store, snapshot) if heads is None else None
    if since is not None:
        heads = snapshot.heads()
        changed = since
    if heads is not None:
        # The rows are the snapshot's records, but for those written since (if any).
        records = _lazy_records(snapshot, heads, path)
        changed = _new_content(store, records, changed)
    else:
        slot_of = snapshot.slot_of
        if len(slot_of) != len(snapshot.paths):
            raise SnapshotUnusable(f"{path.name} holds a path twice")
        for head in store.heads():
            slot = slot_of.get(head[0])
            if slot is not None and snapshot.hashes[slot] == head[3]:
                records[head[0]] = FileRecord.lazy(head, snapshot, slot)
            else:
                changed.append(head[0])
    if len(changed) > _most_changed(snapshot):
        raise SnapshotUnusable(f"{len(changed)} files changed since {path.name} was written")
    if snapshot.written is not None:
        # What the snapshot holds needs no log; a busy or read-only index keeps it for now.
        with contextlib.suppress(sqlite3.Error):
            store.prune_log(snapshot.written)
    ranked = [records.get(p) for p in snapshot.paths[: snapshot.ranked]]
    post = Postings.restored(snapshot, ranked, has_vectors)
    for name in changed:
        record = store.record(name)
        if record is not None:
            records[name] = record
            if record.kind in RANKED_KINDS:
                post.add(record, has_vectors)
    return Loaded(records, vocab, post, True, changed=tuple(changed))


def _new_content(store: IndexStore, records: dict[str, FileRecord], logged: list[str]) -> list[str]:
    """Of the paths logged since the snapshot, those whose content is not the snapshot's; the
    others keep their stored body under their new stat (a checkout and back rewrites every
    stat it touched, and posting those files again cost 0.44 s per 1,000 at 250,000 files)."""
    if not logged:
        return logged
    rows = {head[0]: head for head in store.heads_of(logged)}
    changed: list[str] = []
    for name in logged:
        old, head = records.get(name), rows.get(name)
        if old is not None and head is not None and (old.content_hash, old.kind) == head[3:]:
            records[name] = old.restat(head[1], head[2])
            continue
        records.pop(name, None)
        if head is not None:
            changed.append(name)
    return changed


def _written_since(store: IndexStore, snapshot: Snapshot) -> list[str] | None:
    """The paths written since the snapshot, when the index's log vouches for them and they
    are few (else None: every row is read and compared)."""
    if snapshot.written is None or not snapshot.has_heads:
        return None
    since = store.written_since(snapshot.written)
    if since is None or len(since) > _most_changed(snapshot):
        return None
    return since


def _most_changed(snapshot: Snapshot) -> float:
    """How many files may have changed since a snapshot for it to be used."""
    return max(MAX_CHANGED_FILES, MAX_CHANGED_SHARE * len(snapshot.paths))


def _same_generation(store: IndexStore, snapshot: Snapshot) -> bool:
    return snapshot.generation is not None and snapshot.generation == store.generation


def _vocabulary(store: IndexStore, snapshot: Snapshot) -> Vocabulary:
    stored = snapshot.vocab
    later = store.vocabulary_from(max(stored.count - 1, 0))
    if stored.count and later and later[0] != stored.term(stored.count - 1):
        raise SnapshotUnusable("its term ids disagree with the index's")
    return Vocabulary(later[1:] if stored.count else later, stored=stored)


Written = Callable[[Path, str, Postings, list[FileRecord], int], bool]
"""Called on the writer's thread after a snapshot is written: its path and nonce, the postings
and records it holds, and the size of the vocabulary then; True when what it held was let go."""


class SnapshotWriter:
    """Writes snapshots on a background thread, one at a time; a failed write leaves the old one."""

    def __init__(self, store: IndexStore, written: Written | None = None) -> None:
        self._store = store
        self._thread: threading.Thread | None = None
        self._written = written
        self.joining = threading.Event()
        """Set while someone waits for the writer: `written` must not wait for them."""

    def schedule(
        self,
        vocab: Vocabulary,
        records: dict[str, FileRecord],
        post: Postings,
        *,
        saved: bool = False,
    ) -> bool:
        """Write a snapshot of `post` (built whole from `records`); False when it cannot be.
        `saved`: every record is in the index as it is here, so the snapshot may stand for the
        index's rows at its present generation when `post` holds exactly these records."""
        exports = post.exports()
        if exports is None or self._store.path is None or not post.held:
            return False
        ranked = list(post.held.values())
        others = [
            r for r in records.values() if r.kind not in RANKED_KINDS and r.path not in post.held
        ]
        exact = saved and len(ranked) + len(others) == len(records)
        exact = exact and all(records.get(r.path) is r for r in ranked)
        point = self._store.snapshot_point() if exact else None
        data = snapshot_input(self._store, vocab, ranked, others, exports, point)
        nonce = data.nonce
        assert nonce is not None
        self.wait()
        target = snapshot_path(self._store.path)
        then = None
        if self._written is not None:
            held = [*ranked, *others]
            written, size = self._written, len(data.terms)

            def then() -> bool:
                return written(target, nonce, post, held, size)

        # Handed over in a list the writer empties: the thread's own arguments would keep
        # every record alive until it ends, after a swap let them go.
        job: list[tuple[SnapshotInput, Callable[[], bool] | None]] = [(data, then)]
        self._thread = threading.Thread(
            target=_write, args=(target, job), name="kestrel-snapshot", daemon=True
        )
        self._thread.start()
        return True

    @property
    def busy(self) -> bool:
        """Whether a snapshot is being written."""
        return self._thread is not None and self._thread.is_alive()

    def run(self, work: Callable[[], None]) -> bool:
        """Run `work` (which writes a snapshot) on the writer's thread, after what runs there;
        `wait` waits for it too. Its own failures are its to handle: none reach the caller."""
        self.wait()
        self._thread = threading.Thread(target=work, name="kestrel-snapshot", daemon=True)
        self._thread.start()
        return True

    def wait(self, *, holding_lock: bool = True) -> None:
        """Wait for the snapshot being written, if any. `holding_lock`: the caller may hold the
        engine's lock, which the writer then does not wait for (nor write another snapshot)."""
        thread = self._thread
        if thread is not None:
            if holding_lock:
                self.joining.set()
            try:
                thread.join()
            finally:
                if holding_lock:
                    self.joining.clear()
            if self._thread is thread:
                self._thread = None


def snapshot_input(
    store: IndexStore,
    vocab: Vocabulary,
    ranked: list[FileRecord],
    others: list[FileRecord],
    exports: tuple[Bm25Export, Bm25Export] | None,
    point: tuple[str, int] | None,
) -> SnapshotInput:
    """What to write for these records and their postings (None: built from the records'
    stored bodies, `write_merged`), named by a fresh nonce. `point`:
    they are every record of the index as saved at this generation and write-log position
    (`IndexStore.snapshot_point`, taken with them), so the snapshot may stand for its rows."""
    data = SnapshotInput(
        token=store.token,
        embedder=store.embedder,
        terms=vocab.frozen(),
        ranked=ranked,
        others=others,
        files=None if exports is None else _copied(exports[0]),
        chunks=None if exports is None else _copied(exports[1]),
        nonce=secrets.token_hex(8),
    )
    if point is not None:
        data = replace(data, generation=point[0], written=point[1])
    return data


def _copied(export: Bm25Export) -> Bm25Export:
    # The lengths and document frequencies change in place as files change: copied now.
    return replace(export, length=export.length.copy(), df=export.df.copy())


def _write(target: Path, job: list[tuple[SnapshotInput, Callable[[], bool] | None]]) -> None:
    data, then = job.pop()
    # A cache: when it cannot be written, the next open decodes every record and tries again.
    try:
        write_snapshot(target, data)
    except (OSError, ValueError):
        return
    del data
    let_go = then is not None and then()
    del then
    if let_go:
        release_freed()  # now that nothing here holds the records either


def _lazy_records(
    snapshot: Snapshot, heads: list[Head], path: Path, between: Callable[[], object] | None = None
) -> dict[str, FileRecord]:
    """The snapshot's records by path, each decoded when first read; `between` is called
    between blocks of them (a background writer gives way to queries there)."""
    records: dict[str, FileRecord] = {}
    paths = snapshot.paths
    for lo in range(0, len(heads), _LAZY_BLOCK):
        hi = min(lo + _LAZY_BLOCK, len(heads))
        made = map(FileRecord.lazy, heads[lo:hi], repeat(snapshot), range(lo, hi))
        records.update(zip(paths[lo:hi], made, strict=True))
        if between is not None:
            between()
    if len(records) != len(heads):
        raise SnapshotUnusable(f"{path.name} holds a path twice")
    return records


def restored(
    path: Path, nonce: str, has_vectors: HasVectors, between: Callable[[], object] | None = None
) -> Loaded:
    """The records and postings of the snapshot this process just wrote (named `nonce`: another
    process may have renamed its own over it since), read lazily as a reopen would."""
    snapshot = Snapshot(path)
    heads = snapshot.heads()
    if snapshot.nonce != nonce or heads is None:
        raise SnapshotUnusable(f"{path.name} is not the one just written")
    records = _lazy_records(snapshot, heads, path, between)
    ranked = [records.get(p) for p in snapshot.paths[: snapshot.ranked]]
    post = Postings.restored(snapshot, ranked, has_vectors)
    return Loaded(records, Vocabulary((), stored=snapshot.vocab), post, True)
