"""The parts a reopened index reads in place behave as the ones built in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kestrel.context import vocab as vocab_module
from kestrel.context.lexical import Bm25Index, Vocabulary
from kestrel.context.model import FileSymbols, Symbol
from kestrel.context.postings import Postings
from kestrel.context.rank import PathIndex
from kestrel.context.record import FileRecord, prefetch_definitions
from kestrel.context.snapshot import Snapshot
from kestrel.context.snapshot_write import (
    SnapshotInput,
    string_columns,
    vocab_columns,
    write_snapshot,
)

WORDS = [f"w{n}" for n in range(40)]


def record(path: str, words: list[str], vocab: Vocabulary, defs: list[str]) -> FileRecord:
    symbols = FileSymbols(
        language="python",
        definitions=tuple(
            Symbol(
                name=d,
                qualname=f"M.{d}",
                kind="function",
                line=n + 1,
                end_line=n + 2,
                signature=f"def {d}()",
            )
            for n, d in enumerate(defs)
        ),
    )
    weights = {w: 1.0 + words.count(w) for w in words}
    chunks = tuple(vocab.vector({w: 1.0 for w in words[n :: len(defs)]}) for n in range(len(defs)))
    return FileRecord(path, 10, 1, f"hash-{path}", "code", symbols, vocab.vector(weights), chunks)


def snapshot_of(tmp_path: Path) -> tuple[Snapshot, list[FileRecord], Vocabulary]:
    vocab = Vocabulary()
    rng = np.random.default_rng(7)
    records = [
        record(
            f"pkg{n % 3}/mod{n}.py",
            list(rng.choice(WORDS, 12)),
            vocab,
            ["run", f"helper{n}", "__init__"][: 1 + n % 3],
        )
        for n in range(30)
    ]
    built = Postings.built(records, lambda r: False)
    exports = built.exports()
    assert exports is not None
    path = tmp_path / "postings.snap"
    write_snapshot(path, SnapshotInput("tok", None, vocab.all_terms(), records, [], *exports))
    return Snapshot(path), records, vocab


def restored(snapshot: Snapshot) -> Postings:
    lazy = [
        FileRecord.lazy((p, 10, 1, h, "code"), snapshot, n)
        for n, (p, h) in enumerate(zip(snapshot.paths, snapshot.hashes, strict=True))
    ]
    return Postings.restored(snapshot, lazy, lambda r: False)


def scores(index: Bm25Index, query: dict[int, float]) -> dict[str, float]:
    return {
        index.key_of(int(s)): round(float(v), 9) for s, v in enumerate(index.scores(query)) if v
    }


def test_restored_postings_score_and_change_as_built_ones(tmp_path: Path) -> None:
    snapshot, records, vocab = snapshot_of(tmp_path)
    eager = Postings.built(records, lambda r: False)
    lazy = restored(snapshot)
    query = {vocab.intern(w): 1.0 for w in ("w1", "w7", "w30")}
    for post in (eager, lazy):
        post.remove("pkg1/mod4.py")
        post.add(record("pkg1/mod4.py", ["w7", "w7", "w2"], vocab, ["fresh"]), lambda r: False)
        post.add(record("new/extra.py", ["w30", "w1"], vocab, ["run"]), lambda r: False)
        post.remove("pkg2/mod5.py")
    for a, b in ((eager.files, lazy.files), (eager.chunks, lazy.chunks)):
        assert scores(a, query) and scores(a, query) == scores(b, query)
        assert sorted(a.keys()) == sorted(b.keys()) and len(a) == len(b)
    for name in ("run", "__init__", "fresh", "helper5", "helper4", "absent"):
        assert eager.names.get(name) == lazy.names.get(name), name
    for path, held in eager.held.items():
        other = lazy.held[path]
        assert [other.definition(i) for i in range(4)] == [held.definition(i) for i in range(4)]
        assert other.definition_named("M.run") == held.definition_named("M.run")
        assert other.chunk_count == len(held.chunks)


def test_lazy_records_decode_only_when_read(tmp_path: Path) -> None:
    snapshot, records, _ = snapshot_of(tmp_path)
    lazy = FileRecord.lazy(("pkg2/mod2.py", 5, 9, snapshot.hashes[2], "code"), snapshot, 2)
    moved = lazy.restat(6, 10)
    assert lazy.chunk_count == len(records[2].chunks) and lazy.vector_shape is None
    assert lazy.definition(0) == records[2].symbols.definitions[0]  # type: ignore[union-attr]
    assert not lazy.loaded
    assert lazy.symbols == records[2].symbols and lazy.loaded
    assert (moved.size, moved.mtime_ns, moved.symbols) == (6, 10, records[2].symbols)
    assert [list(x) for x in moved.terms] == [list(x) for x in records[2].terms]


def test_definitions_fetched_together_are_the_ones_read_alone(tmp_path: Path) -> None:
    snapshot, records, _ = snapshot_of(tmp_path)
    lazy = restored(snapshot)
    wanted = [(lazy.held[r.path], i) for r in records[::2] for i in (2, 0, 5, -1)]
    prefetch_definitions(wanted)
    for record, index in wanted:
        eager = next(r for r in records if r.path == record.path)
        defs = eager.symbols.definitions  # type: ignore[union-attr]
        expected = defs[index] if 0 <= index < len(defs) else None
        assert record.definition(index) == expected
        assert not record.loaded


def test_a_vocabulary_looks_terms_up_in_the_snapshot_also_when_adding(tmp_path: Path) -> None:
    snapshot, _, built = snapshot_of(tmp_path)
    vocab = Vocabulary(["later"], stored=snapshot.vocab)
    assert len(vocab) == len(built) + 1
    assert [vocab.get(t) for t in built.terms] == list(range(len(built)))
    assert vocab.get("later") == len(built) and vocab.get("never") is None
    assert list(vocab.terms) == [*built.terms, "later"]
    assert vocab.intern("newer") == len(built) + 1
    assert vocab.intern("w3") == built.get("w3")  # a stored term keeps its stored id
    ids, _ = vocab.vector({"w3": 1.0, "newest": 2.0, "later": 1.0})
    assert sorted(ids.tolist()) == [built.get("w3"), len(built), len(built) + 2]
    assert vocab._stored is not None  # adding a few terms built no map of them all
    assert vocab.all_terms()[-3:] == ["later", "newer", "newest"]
    assert list(vocab.terms) == vocab.all_terms()


def test_many_additions_load_the_whole_vocabulary_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot, _, built = snapshot_of(tmp_path)
    vocab = Vocabulary([], stored=snapshot.vocab)
    monkeypatch.setattr(vocab_module, "LOOKUPS_BEFORE_LOAD", 2)
    assert vocab.intern("one") == len(built)
    assert vocab.intern("two") == len(built) + 1
    assert vocab._stored is not None
    assert vocab.intern("three") == len(built) + 2  # the third lookup loads every term
    assert vocab._stored is None
    assert vocab.intern("w3") == built.get("w3") and vocab.intern("two") == len(built) + 1
    assert vocab.all_terms() == [*built.all_terms(), "one", "two", "three"]


def test_path_lookups_match_by_trailing_components() -> None:
    paths = [
        "a/b/__init__.py",
        "c/b/__init__.py",
        "x/__init__.py",
        "__init__.py",
        "d/e/m.py",
        "m.py",
        "dj/db/models/__init__.py",
        "old/dj/db/models/__init__.py",
    ]
    index = PathIndex(paths)
    assert index.lookup("__init__.py") == []  # too many to mean one
    assert index.lookup("b/__init__.py") == ["a/b/__init__.py", "c/b/__init__.py"]
    assert index.lookup("./a/b/__init__.py") == ["a/b/__init__.py"]
    assert index.lookup("zz/m.py") == ["d/e/m.py", "m.py"]  # the longest tail that matches
    assert index.lookup("db/models/__init__.py") == paths[-2:]
    index.remove("a/b/__init__.py")
    index.add("q/b/__init__.py")
    assert index.lookup("b/__init__.py") == ["c/b/__init__.py", "q/b/__init__.py"]
    assert index.lookup("") == []


@pytest.mark.parametrize("added", [[], ["later"], ["later", "w3x", "ünïcode", "more"]])
def test_a_stored_vocabulary_is_written_as_its_terms_would_be(
    tmp_path: Path, added: list[str]
) -> None:
    snapshot, _, built = snapshot_of(tmp_path)
    vocab = Vocabulary(added, stored=snapshot.vocab)
    frozen = vocab.frozen()
    assert list(frozen) == vocab.all_terms() == [*built.all_terms(), *added]
    fast = vocab_columns(frozen)
    slow = string_columns("vocab", vocab.all_terms())
    assert fast.keys() == slow.keys()
    for name in slow:
        assert fast[name].dtype == slow[name].dtype, name
        assert np.array_equal(fast[name], slow[name]), name
    vocab.intern("newest")
    assert list(frozen)[-1:] == (added or built.all_terms())[-1:]  # frozen: no later term


def test_an_empty_stored_vocabulary_is_written_as_its_added_terms(tmp_path: Path) -> None:
    path = tmp_path / "empty.snap"
    empty = Bm25Index().export()
    write_snapshot(path, SnapshotInput("tok", None, [], [], [], empty, empty))
    vocab = Vocabulary(["one", "two"], stored=Snapshot(path).vocab)
    fast, slow = vocab_columns(vocab.frozen()), string_columns("vocab", ["one", "two"])
    assert all(np.array_equal(fast[name], slow[name]) for name in slow)
