"""The engine end to end over real files: ranking basics, persistence and freshness."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from context_kit import bump, committed_repo, git, write

from kestrel.context.engine import ContextEngine
from kestrel.context.inventory import content_hash

FILES = {
    "shop/cart.py": (
        "class Cart:\n"
        "    def add_item(self, sku, quantity):\n"
        "        self.items[sku] = self.items.get(sku, 0) + quantity\n\n"
        "    def total_price(self, catalog):\n"
        "        return sum(catalog.price(s) * q for s, q in self.items.items())\n"
    ),
    "shop/catalog.py": (
        "class Catalog:\n"
        "    def price(self, sku):\n"
        "        return self.prices[sku]\n\n"
        "def load_catalog(path):\n"
        "    return Catalog()\n"
    ),
    "shop/shipping.py": (
        "def shipping_cost(weight, country):\n"
        "    if country == 'NZ':\n"
        "        return 5 + weight * 2\n"
        "    return 10 + weight * 3\n"
    ),
    "tests/test_cart.py": (
        "from shop.cart import Cart\n\n"
        "def test_total_price():\n    assert Cart().total_price({}) == 0\n"
    ),
    "README.md": "# Shop\nA tiny shop with a cart, a catalog and shipping.\n",
    "web/app.ts": (
        "export class CheckoutPage {\n  render(): string { return 'checkout'; }\n}\n"
        "export function computeDiscount(total: number): number { return total * 0.1; }\n"
    ),
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return committed_repo(tmp_path / "repo", FILES)


def open_engine(root: Path, tmp_path: Path) -> ContextEngine:
    engine = ContextEngine.open(root, tmp_path / "cache")
    engine.refresh()
    return engine


def assert_fresh(engine: ContextEngine, root: Path, query: str) -> None:
    """Every file served matches the bytes on disk, by hash."""
    result = engine.search(query, k=20)
    for hit in result.files:
        assert hit.content_hash == content_hash((root / hit.path).read_bytes()), hit.path


def test_ranks_the_file_a_task_names(repo: Path, tmp_path: Path) -> None:
    engine = open_engine(repo, tmp_path)
    result = engine.search("The total price of the cart is wrong when quantity is zero")
    assert result.files[0].path == "shop/cart.py"
    assert result.files[0].symbols[0].qualname == "Cart.total_price"
    assert [h.path for h in result.files].index("tests/test_cart.py") > 0
    assert (
        engine.search("shipping_cost charges too much for NZ").files[0].path == "shop/shipping.py"
    )
    assert engine.search("computeDiscount rounds badly").files[0].path == "web/app.ts"
    engine.close()


def test_definitions_of_the_best_files_come_first_and_classes_after_their_methods(
    repo: Path, tmp_path: Path
) -> None:
    engine = open_engine(repo, tmp_path)
    task = "The total price of the cart is wrong when quantity is zero"
    flat = replace(engine.weights, symbol_file_power=0.0, class_symbol_prior=1.0)
    engine.weights = flat
    before = [s.qualname for s in engine.search(task).symbols]
    # Without the file's share as a power, a test ranked low still pushes past the class.
    assert before[:4] == ["Cart.total_price", "Cart.add_item", "test_total_price", "Cart"]
    engine.weights = replace(flat, symbol_file_power=0.5, class_symbol_prior=0.7)
    result = engine.search(task)
    assert [s.qualname for s in result.symbols][:4] == [
        "Cart.total_price",
        "Cart.add_item",
        "Cart",
        "test_total_price",
    ]
    # A file's own list keeps its class at full weight: shown whole, it holds the methods.
    assert [s.qualname for s in result.files[0].symbols] == [
        "Cart.total_price",
        "Cart.add_item",
        "Cart",
    ]
    engine.close()


def test_index_persists_and_only_changes_are_read(repo: Path, tmp_path: Path) -> None:
    open_engine(repo, tmp_path).close()
    again = ContextEngine.open(repo, tmp_path / "cache")
    report = again.refresh()
    assert (report.added, report.changed, report.removed) == (0, 0, 0)
    assert again.search("catalog price").files[0].path == "shop/catalog.py"
    (repo / "shop" / "shipping.py").write_text("def shipping_cost():\n    return 0\n")
    bump(repo / "shop" / "shipping.py")
    report = again.refresh()
    assert (report.added, report.changed, report.removed) == (0, 1, 0)
    again.close()


def test_edit_delete_rename_then_no_stale_file_is_served(repo: Path, tmp_path: Path) -> None:
    engine = open_engine(repo, tmp_path)
    cart = repo / "shop" / "cart.py"
    cart.write_text("class Basket:\n    def checkout_voucher(self):\n        return 1\n")
    bump(cart)
    # Served files are checked against the disk: the old cart is never served.
    assert_fresh(engine, repo, "cart total price items quantity")
    assert engine.search("checkout_voucher basket").files[0].path == "shop/cart.py"
    (repo / "shop" / "shipping.py").unlink()
    (repo / "shop" / "catalog.py").rename(repo / "shop" / "products.py")
    engine.refresh()
    paths = [h.path for h in engine.search("catalog price shipping", k=20).files]
    assert "shop/shipping.py" not in paths and "shop/catalog.py" not in paths
    assert "shop/products.py" in paths
    assert engine.definitions_named("load_catalog")[0][0] == "shop/products.py"
    assert engine.definitions_named("shipping_cost") == []
    engine.close()


def test_stale_file_is_caught_before_serving(repo: Path, tmp_path: Path) -> None:
    engine = open_engine(repo, tmp_path)
    target = repo / "shop" / "shipping.py"
    target.write_text(FILES["shop/shipping.py"] + "\n# shipping rules changed\n")
    bump(target)
    result = engine.search("shipping_cost country")
    assert result.stale_caught == 1
    assert result.files[0].content_hash == content_hash(target.read_bytes())
    engine.close()


def test_checkout_of_another_commit(repo: Path, tmp_path: Path) -> None:
    engine = open_engine(repo, tmp_path)
    git(repo, "checkout", "-q", "-b", "other")
    write(repo, {f"gen/mod{i}.py": f"def generated_{i}():\n    return {i}\n" for i in range(30)})
    (repo / "shop" / "cart.py").unlink()
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    engine.refresh()
    assert engine.definitions_named("generated_7")[0][0] == "gen/mod7.py"
    git(repo, "checkout", "-q", "-")
    engine.refresh()
    assert engine.definitions_named("generated_7") == []
    assert engine.search("cart total price").files[0].path == "shop/cart.py"
    assert_fresh(engine, repo, "cart generated catalog")
    engine.close()


def test_watcher_applies_changes_without_a_rescan(repo: Path, tmp_path: Path) -> None:
    engine = open_engine(repo, tmp_path)
    if not engine.watch():
        pytest.skip("file watching is not available here")
    (repo / "shop" / "tax.py").write_text("def vat_rate(country):\n    return 0.15\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if engine.search("vat_rate").files and engine.definitions_named("vat_rate"):
            break
        time.sleep(0.1)
    assert engine.definitions_named("vat_rate")[0][0] == "shop/tax.py"
    engine.close()


def test_empty_repository(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    engine = ContextEngine.open(root, tmp_path / "cache")
    report = engine.refresh()
    assert report.files_total == 0
    result = engine.search("anything at all")
    assert result.files == () and result.symbols == ()
    engine.close()


def test_directory_that_is_not_a_git_checkout(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    write(root, FILES)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    engine = ContextEngine.open(root, tmp_path / "cache")
    report = engine.refresh()
    assert report.files_total == len(FILES) + 1
    assert report.skipped == {"binary": 1}
    assert engine.search("shipping cost").files[0].path == "shop/shipping.py"
    engine.close()


def test_in_memory_index(repo: Path) -> None:
    engine = ContextEngine.open(repo, persist=False)
    engine.refresh()
    assert engine.search("Catalog").files[0].path == "shop/catalog.py"
    engine.close()


# ----------------------------------------------------------------------------- semantic layer

CONCEPTS = {
    "vehicle": 0, "automobile": 0, "car": 0, "truck": 0, "engine": 0,
    "invoice": 1, "payment": 1, "money": 1, "refund": 1,
    "weather": 2, "rain": 2, "forecast": 2, "storm": 2,
}  # fmt: skip
MEANING = {
    "garage/fleet.py": (
        "class Automobile:\n"
        "    def start_engine(self):\n        return True\n\n"
        "def park_truck(spot):\n    return spot\n"
    ),
    "billing/settle.py": "def settle_invoice(invoice, money):\n    return invoice.refund(money)\n",
    "sky/outlook.py": "def tomorrow(storm, rain):\n    return storm or rain\n",
}


class ConceptEmbedder:
    """Words of a few concepts pull a text towards that concept's axis; the rest is ignored."""

    def __init__(self, name: str = "concepts-1") -> None:
        self.name = name
        self.dim = 4
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if word in CONCEPTS:
                    out[row, CONCEPTS[word]] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out


@pytest.fixture
def meaning(tmp_path: Path) -> Path:
    root = tmp_path / "meaning"
    root.mkdir()
    write(root, MEANING)
    return root


def test_a_file_with_no_word_of_the_task_is_found_by_meaning(meaning: Path, tmp_path: Path) -> None:
    embedder = ConceptEmbedder()
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=embedder)
    engine.refresh()
    result = engine.search("my vehicle makes a noise")
    assert result.files[0].path == "garage/fleet.py"
    # With a definition weight (0 by default), a close chunk lifts its definition too.
    unlifted = result.files[0].symbols[0].score
    engine.weights = replace(engine.weights, semantic_symbol=0.5)
    lifted = engine.search("my vehicle makes a noise").files[0].symbols[0]
    assert lifted.path == "garage/fleet.py"
    assert lifted.score > unlifted
    assert engine.search("forecast for tomorrow").files[0].path == "sky/outlook.py"
    engine.close()
    lexical = ContextEngine.open(meaning, tmp_path / "plain")
    lexical.refresh()
    assert lexical.search("my vehicle makes a noise").files == ()
    lexical.close()


def test_vectors_persist_and_only_changed_files_are_embedded(meaning: Path, tmp_path: Path) -> None:
    first = ConceptEmbedder()
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=first)
    engine.refresh()
    # One text per definition, then one for the file.
    assert len(first.seen) == (3 + 1) + (1 + 1) + (1 + 1)
    engine.close()

    again = ConceptEmbedder()
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=again)
    report = engine.refresh()
    assert (report.added, report.changed, report.removed) == (0, 0, 0)
    assert again.seen == []
    assert engine.search("payment problems").files[0].path == "billing/settle.py"
    assert again.seen == ["payment problems"]

    again.seen.clear()
    target = meaning / "sky" / "outlook.py"
    target.write_text("def tomorrow(vehicle):\n    return vehicle\n")
    bump(target)
    engine.refresh()
    assert again.seen == [
        "tomorrow\ndef tomorrow(vehicle):\n    return vehicle",
        "sky/outlook.py\n",
    ]
    top = [h.path for h in engine.search("truck").files[:2]]
    assert sorted(top) == ["garage/fleet.py", "sky/outlook.py"]

    (meaning / "garage" / "fleet.py").unlink()
    engine.refresh()
    assert "garage/fleet.py" not in [h.path for h in engine.search("automobile car").files]
    engine.close()


def test_another_embedder_embeds_everything_again(meaning: Path, tmp_path: Path) -> None:
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=ConceptEmbedder())
    engine.refresh()
    engine.close()
    # Opened without an embedder the index still ranks, by words alone.
    plain = ContextEngine.open(meaning, tmp_path / "cache")
    assert plain.refresh().changed == 0
    assert plain.search("settle_invoice").files[0].path == "billing/settle.py"
    assert plain.search("my vehicle makes a noise").files == ()
    plain.close()
    other = ConceptEmbedder("concepts-2")
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=other)
    engine.refresh()
    assert len(other.seen) == 8
    assert engine.search("my vehicle makes a noise").files[0].path == "garage/fleet.py"
    engine.close()


def test_an_index_built_without_embedder_is_embedded_later(meaning: Path, tmp_path: Path) -> None:
    plain = ContextEngine.open(meaning, tmp_path / "cache")
    plain.refresh()
    plain.close()
    late = ConceptEmbedder()
    engine = ContextEngine.open(meaning, tmp_path / "cache", embedder=late)
    engine.refresh()
    assert len(late.seen) == 8
    assert engine.search("storm warning").files[0].path == "sky/outlook.py"
    engine.close()
