"""Records made of files read by the workers: term ids from the vocabulary, chunk vectors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kestrel.context.embed import Embedder
from kestrel.context.inventory import Entry
from kestrel.context.lexical import Vocabulary
from kestrel.context.reader import ReadFile
from kestrel.context.record import FileRecord


def embedded(
    embedder: Embedder | None, batch: Sequence[tuple[Entry, ReadFile | None]]
) -> list[np.ndarray | None]:
    """Each read file's chunk vectors (one call for the whole batch); None without them."""
    texts_of = [
        read.analysis.texts if read is not None and read.analysis is not None else ()
        for _, read in batch
    ]
    texts = [text for file_texts in texts_of for text in file_texts]
    if embedder is None or not texts:
        return [None] * len(batch)
    matrix = embedder.embed(texts).astype(np.float16)
    out: list[np.ndarray | None] = []
    at = 0
    for file_texts in texts_of:
        out.append(matrix[at : at + len(file_texts)] if file_texts else None)
        at += len(file_texts)
    return out


def record_of(read: ReadFile, vectors: np.ndarray | None, vocab: Vocabulary) -> FileRecord:
    """The record of a read file, its terms given ids in `vocab` (new terms are added)."""
    entry, analysis = read.entry, read.analysis
    if analysis is None:
        empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
        return FileRecord(
            entry.path,
            entry.size,
            entry.mtime_ns,
            read.content_hash,
            read.kind,
            None,
            empty,
            (),
        )
    return FileRecord(
        path=entry.path,
        size=entry.size,
        mtime_ns=entry.mtime_ns,
        content_hash=read.content_hash,
        kind=read.kind,
        symbols=analysis.symbols,
        terms=vocab.vector(analysis.terms),
        chunks=tuple(vocab.vector(c) for c in analysis.chunks),
        vectors=vectors,
    )
