"""A big index read whole, its bodies kept on disk as it is read, served from its snapshot.

Held in memory, the records of a 250,000-file tree are millions of Python objects (chunk
vectors, definitions), and building the in-memory postings from them made as many again (a key,
a slot and a document pair per chunk, a name entry per definition): 5.7 GB at the peak. Here a
big read writes the records it has read to a part snapshot every `PART_FILES` files and keeps
them as records decoded on demand from it (`stored_part`); at the end the index's snapshot is
written from the parts, run by run, without decoding a body (`kestrel.context.snapshot_merge`),
and the engine serves from it at once, as after a reopen.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable

from kestrel.context.index_store import IndexStore
from kestrel.context.lexical import Bm25Index, Vocabulary
from kestrel.context.loading import Loaded, restored, snapshot_input
from kestrel.context.postings import HasVectors
from kestrel.context.reader import RANKED_KINDS
from kestrel.context.record import FileRecord
from kestrel.context.snapshot import Snapshot, SnapshotUnusable, snapshot_path
from kestrel.context.snapshot_merge import write_merged
from kestrel.context.snapshot_write import SnapshotInput, between_steps, write_snapshot

WHOLE_MIN_FILES = 20_000
"""An index read whole with at least this many files is served from its snapshot at once; a
smaller one builds its postings in memory (faster to query, and small)."""
PART_FILES = 8192
"""A big read writes the records it read to a part every this many files."""

_parts = itertools.count()


def stored_part(store: IndexStore, records: Iterable[FileRecord]) -> dict[str, FileRecord]:
    """The same records by path, their bodies written to a new part snapshot and decoded from
    it when read. The part's file is removed at once: its mapping keeps it until its records go
    (a process that dies first leaves it to the next snapshot write's clean-up)."""
    assert store.path is not None
    listed = list(records)
    empty = Bm25Index().export()
    target = snapshot_path(store.path)
    target = target.with_name(f".{target.name}.part-{os.getpid()}-{next(_parts)}.tmp")
    data = SnapshotInput(
        token=store.token,
        embedder=store.embedder,
        terms=(),
        ranked=[r for r in listed if r.kind in RANKED_KINDS],
        others=[r for r in listed if r.kind not in RANKED_KINDS],
        files=empty,
        chunks=empty,
    )
    try:
        write_snapshot(target, data)
        part = Snapshot(target)
    finally:
        target.unlink(missing_ok=True)
    heads = part.heads()
    if heads is None:
        raise SnapshotUnusable(f"{target.name} holds no heads")
    return {head[0]: FileRecord.lazy(head, part, i) for i, head in enumerate(heads)}


def written_whole(
    store: IndexStore,
    vocab: Vocabulary,
    records: dict[str, FileRecord],
    has_vectors: HasVectors,
    point: tuple[str, int] | None,
    stop: Callable[[], bool] | None = None,
) -> Loaded | None:
    """Write the snapshot of `records` (every record of the index, saved as it is at `point`,
    see `snapshot_input`) and read it back lazily; None when it cannot be written or read (the
    caller builds in memory instead), or `stop` said to give up. Records not stored in a
    snapshot yet go to a part first."""
    if store.path is None:
        return None
    target = snapshot_path(store.path)
    try:
        held = [r for r in records.values() if r.snapshot_slot is None]
        stored = stored_part(store, held) if held else {}
        del held
        between_steps(stop)
        ranked = [stored.get(r.path, r) for r in records.values() if r.kind in RANKED_KINDS]
        others = [stored.get(r.path, r) for r in records.values() if r.kind not in RANKED_KINDS]
        del stored
        between_steps(stop)
        data = snapshot_input(store, vocab, ranked, others, None, point)
        del ranked, others
        write_merged(target, data, stop)
        assert data.nonce is not None
        return restored(target, data.nonce, has_vectors, stop)
    except (SnapshotUnusable, OSError, ValueError):
        return None
