"""Reopening a saved index from its postings snapshot answers as decoding every record would."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from context_kit import committed_repo
from context_kit import write as kit_write

import kestrel.context.indexing as indexing_module
from kestrel.context.engine import ContextEngine
from kestrel.context.index_store import index_path_for
from kestrel.context.inventory import content_hash
from kestrel.context.snapshot import MAGIC, snapshot_path

FILES = {
    "shop/cart.py": (
        "class Cart:\n"
        "    def __init__(self):\n        self.items = {}\n\n"
        "    def add_item(self, sku, quantity):\n"
        "        self.items[sku] = self.items.get(sku, 0) + quantity\n\n"
        "    def total_price(self, catalog):\n"
        "        return sum(catalog.price(s) * q for s, q in self.items.items())\n"
    ),
    "shop/catalog.py": (
        "class Catalog:\n"
        "    def __init__(self):\n        self.prices = {}\n\n"
        "    def price(self, sku):\n        return self.prices[sku]\n\n"
        "def load_catalog(path):\n    return Catalog()\n"
    ),
    "shop/shipping.py": (
        "def shipping_cost(weight, country):\n"
        "    if country == 'NZ':\n        return 5 + weight * 2\n"
        "    return 10 + weight * 3\n"
    ),
    "tests/test_cart.py": (
        "from shop.cart import Cart\n\n"
        "def test_total_price():\n    assert Cart().total_price({}) == 0\n"
    ),
    "README.md": "# Shop\nA tiny shop with a cart, a catalog and shipping.\n",
    "logo.png": "\x89PNG not really an image\0\0",
    "web/app.ts": (
        "export class CheckoutPage {\n  render(): string { return 'checkout'; }\n}\n"
        "export function computeDiscount(total: number): number { return total * 0.1; }\n"
    ),
}
QUERIES = (
    "the total price of the cart is wrong",
    "Catalog.price raises KeyError for an unknown sku",
    "`__init__` of Cart and Catalog",
    "shipping cost to NZ in shop/shipping.py",
    "checkout page discount",
    "add_item quantity",
)


def write(root: Path, files: dict[str, str]) -> None:
    """Rewrite files so that their stat shows it even on coarse clocks."""
    kit_write(root, files, bumped=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "repo", FILES)


def snapshot_of(root: Path, cache: Path) -> Path:
    return snapshot_path(index_path_for(root.resolve(), cache))


def indexed(root: Path, cache: Path, **kwargs: object) -> None:
    """Index `root`, then open it once more: that open decodes every record and snapshots."""
    engine = ContextEngine.open(root, cache, **kwargs)  # type: ignore[arg-type]
    engine.refresh()
    engine.close()
    engine = ContextEngine.open(root, cache, **kwargs)  # type: ignore[arg-type]
    assert not engine.opened_from_snapshot
    engine.close()  # waits for the snapshot
    assert snapshot_of(root, cache).is_file()


def answers(engine: ContextEngine) -> list[object]:
    out: list[object] = []
    for query in QUERIES:
        result = engine.search(query)
        out.append((result.files, result.symbols))
    for name in ("__init__", "price", "Cart", "computeDiscount", "nothing_is_named_so"):
        out.append(sorted(engine.definitions_named(name), key=repr))
    for path in sorted(engine.paths):
        record = engine.record(path)
        assert record is not None
        out.append((path, record.kind, record.content_hash, record.symbols, record.chunk_count))
        out.append([(list(ids), list(tfs)) for ids, tfs in (record.terms, *record.chunks)])
    return out


def decoded_answers(root: Path, cache: Path, **kwargs: object) -> list[object]:
    """What an engine that decodes every record answers (its snapshot moved away meanwhile)."""
    snap = snapshot_of(root, cache)
    aside = snap.with_name("aside")
    snap.rename(aside)
    engine = ContextEngine.open(root, cache, **kwargs)  # type: ignore[arg-type]
    assert not engine.opened_from_snapshot
    try:
        return answers(engine)
    finally:
        engine.close()
        aside.replace(snap)


def test_reopening_from_the_snapshot_answers_as_decoding_everything(
    repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot and engine.notice == ""
    cart = engine.record("shop/cart.py")
    assert cart is not None and not cart.loaded  # nothing decoded until asked
    assert cart.chunk_count == 4 and not cart.loaded
    lazy = answers(engine)
    assert engine.refresh().changed == 0
    engine.close()
    assert lazy == decoded_answers(repo, cache)


def three_changed_after_snapshot(repo: Path, cache: Path) -> None:
    """Index and snapshot; then one file changed, one added, one removed, saved by a refresh."""
    indexed(repo, cache)
    engine = ContextEngine.open(repo, cache)
    write(repo, {"shop/cart.py": "class Basket:\n    def weigh_parcel(self):\n        return 1\n"})
    write(repo, {"shop/returns.py": "def refund_order(order):\n    return order.total\n"})
    (repo / "shop/shipping.py").unlink()
    report = engine.refresh()  # saved and logged, no new snapshot
    assert (report.added, report.changed, report.removed) == (1, 1, 1)
    engine.close()


def serves_the_three_changes(engine: ContextEngine) -> None:
    assert engine.search("weigh parcel").files[0].path == "shop/cart.py"
    assert engine.search("refund an order").files[0].path == "shop/returns.py"
    assert "shop/shipping.py" not in engine.paths
    assert engine.definitions_named("Cart") == []


def test_files_changed_after_the_snapshot_come_from_the_index(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    three_changed_after_snapshot(repo, cache)
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot  # three files changed: the snapshot still serves
    serves_the_three_changes(engine)
    lazy = answers(engine)
    engine.close()
    assert lazy == decoded_answers(repo, cache)


def test_a_change_made_while_closed_is_picked_up_by_the_refresh(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    write(repo, {"shop/catalog.py": "def lookup_warehouse(code):\n    return code\n"})
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot
    # Before the refresh, a query still never serves the old text of a changed file.
    for hit in engine.search("Catalog price sku").files:
        assert hit.content_hash == content_hash((repo / hit.path).read_bytes())
    report = engine.refresh()
    assert report.changed + report.added == 0  # the query above re-read it already
    assert engine.search("lookup warehouse").files[0].path == "shop/catalog.py"
    assert engine.definitions_named("Catalog") == []
    engine.close()


def test_a_bulk_refresh_writes_a_snapshot(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexing_module, "BULK_MIN_FILES", 0)  # this small read counts as bulk
    cache = tmp_path / "cache"
    engine = ContextEngine.open(repo, cache)
    engine.refresh()
    engine.close()
    assert snapshot_of(repo, cache).is_file()
    engine = ContextEngine.open(repo, cache)
    assert engine.opened_from_snapshot
    assert engine.search("shipping cost").files[0].path == "shop/shipping.py"
    engine.close()


def set_format(root: Path, cache: Path, version: str) -> None:
    with sqlite3.connect(index_path_for(root.resolve(), cache)) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (version,))


def test_an_index_in_an_old_format_is_rebuilt_and_says_so(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    set_format(repo, cache, "2")
    engine = ContextEngine.open(repo, cache)
    assert "format 2" in engine.notice and "rebuilt" in engine.notice
    assert not engine.opened_from_snapshot and engine.paths == []
    assert engine.refresh().added == len(FILES)
    assert engine.search("total price").files[0].path == "shop/cart.py"
    engine.close()


def test_an_index_of_format_3_is_kept_and_brought_up_to_date(repo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    set_format(repo, cache, "3")
    engine = ContextEngine.open(repo, cache)
    assert "format 3" in engine.notice
    assert engine.refresh().changed == 0 and len(engine.paths) == len(FILES)
    engine.close()


def damage_header(snap: Path, change: dict[str, object]) -> None:
    """Rewrite the snapshot's JSON header in place, padded to its old length."""
    data = snap.read_bytes()
    start = len(MAGIC) + 8
    size = int.from_bytes(data[len(MAGIC) : start], "little")
    header = json.loads(data[start : start + size])
    text = json.dumps({**header, **change}, separators=(",", ":")).encode()
    assert len(text) <= size
    snap.write_bytes(data[:start] + text.ljust(size) + data[start + size :])


@pytest.mark.parametrize(
    "damage", ["garbage", "truncated", "other index", "file kinds", "log position"]
)
def test_an_unusable_snapshot_is_set_aside(repo: Path, tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache)
    snap = snapshot_of(repo, cache)
    if damage == "file kinds":
        damage_header(snap, {"file_kinds": []})
    elif damage == "log position":
        damage_header(snap, {"written": "many"})
    elif damage == "garbage":
        snap.write_bytes(b"not a snapshot at all")
    elif damage == "truncated":
        snap.write_bytes(snap.read_bytes()[:5000])
    else:
        other = tmp_path / "other"
        other.mkdir()
        write(other, {"a.py": "def alpha():\n    return 1\n"})
        indexed(other, cache)
        snap.write_bytes(snapshot_of(other, cache).read_bytes())
    engine = ContextEngine.open(repo, cache)
    assert not engine.opened_from_snapshot
    assert "snapshot" in engine.notice
    assert engine.search("total price").files[0].path == "shop/cart.py"
    engine.close()
    assert ContextEngine.open(repo, cache).opened_from_snapshot  # a new one was written


class WordEmbedder:
    """Each of a few words pulls a text along its own axis."""

    WORDS = ("cart", "catalog", "shipping", "checkout")

    def __init__(self) -> None:
        self.name = "words-1"
        self.dim = len(self.WORDS)
        self.seen = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if word in self.WORDS:
                    out[row, self.WORDS.index(word)] += 1.0
        return out


def test_vectors_come_back_from_the_snapshot_without_embedding_again(
    repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    indexed(repo, cache, embedder=WordEmbedder())
    embedder = WordEmbedder()
    engine = ContextEngine.open(repo, cache, embedder=embedder)
    assert engine.opened_from_snapshot
    assert engine.refresh().changed == 0 and embedder.seen == 0
    lazy = answers(engine)
    assert embedder.seen == len(QUERIES)  # the queries only
    engine.close()
    assert lazy == decoded_answers(repo, cache, embedder=WordEmbedder())
