"""Context packs over a real, indexed repository: budgets, priorities, freshness and the note."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from kestrel.context.budget import estimate_tokens
from kestrel.context.builder import (
    ContextPack,
    PackItem,
    Source,
    build_context_pack,
    read_source,
)
from kestrel.context.engine import ContextEngine
from kestrel.context.inventory import content_hash


def _reports() -> str:
    """A long module of near-identical functions: the large file in the repository."""
    parts = ['"""Order reports."""\n\n']
    for i in range(30):
        parts.append(
            f"def report_{i}(orders):\n"
            f'    """Report {i}."""\n'
            "    total = 0\n"
            "    for order in orders:\n"
            f"        total += order.amount * {i}\n"
            "    return total\n\n\n"
        )
    return "".join(parts)


CART = (
    '"""The cart."""\n'
    "\n"
    "from shop.catalog import Catalog\n"
    "\n"
    "\n"
    "class Cart:\n"
    '    """Items a customer means to buy."""\n'
    "\n"
    "    def __init__(self):\n"
    "        self.items = {}\n"
    "\n"
    "    def add_item(self, sku, quantity):\n"
    "        self.items[sku] = self.items.get(sku, 0) + quantity\n"
    "\n"
    "    def remove_item(self, sku):\n"
    "        self.items.pop(sku, None)\n"
    "\n"
    "    def total_price(self, catalog: Catalog) -> float:\n"
    "        total = 0.0\n"
    "        for sku, quantity in self.items.items():\n"
    "            total += catalog.price(sku) * quantity\n"
    "        return total\n"
)
FILES = {
    "shop/cart.py": CART,
    "shop/catalog.py": (
        "class Catalog:\n"
        "    def price(self, sku):\n"
        "        return self.prices[sku]\n\n\n"
        "def load_catalog(path):\n"
        "    return Catalog()\n"
    ),
    "shop/reports.py": _reports(),
    "util/text.py": "def slugify(title):\n    return title.lower().replace(' ', '-')\n",
    "tests/test_cart.py": (
        "from shop.cart import Cart\n\n\n"
        "def test_total_price():\n"
        "    assert Cart().total_price(None) == 0\n"
    ),
    "web/checkout.ts": (
        "export class CheckoutPage {\n"
        "  render(): string { return 'checkout'; }\n"
        "}\n"
        "export function cartTotal(prices: number[]): number {\n"
        "  return prices.reduce((a, b) => a + b, 0);\n"
        "}\n"
    ),
}
TASK = "The cart total price is wrong: total_price ignores the quantity of each item"
RANKED = {"shop/cart.py", "web/checkout.ts", "shop/catalog.py", "tests/test_cart.py"}
Kind = Literal["code", "outline", "path"]
HINTS = ("read_file(path)", "outline(path)", "search_code(query)")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", "--allow-empty")
    return root


def rewrite(path: Path, text: str) -> None:
    """Write and push the mtime forward, so the change shows in the stat on coarse clocks."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


@pytest.fixture
def engine(repo: Path, tmp_path: Path) -> Iterator[ContextEngine]:
    engine = ContextEngine.open(repo, tmp_path / "cache")
    engine.refresh()
    yield engine
    engine.close()


def shown_paths(pack: ContextPack) -> set[str]:
    return {item.path for item in pack.items}


def assert_lines_match_disk(root: Path, item: PackItem) -> None:
    """A code item's text is exactly the lines its numbers name, in the file as it is now."""
    assert item.kind == "code"
    data = (root / item.path).read_bytes()
    assert item.content_hash == content_hash(data)
    disk = data.decode().split("\n")
    assert item.text.split("\n") == disk[item.line - 1 : item.end_line]


def test_search_ranks_the_fixture_as_the_other_tests_expect(engine: ContextEngine) -> None:
    files = engine.search(TASK).files
    assert files[0].path == "shop/cart.py"
    assert {hit.path for hit in files} >= RANKED
    assert "util/text.py" not in {hit.path for hit in files}


def test_budget_is_never_exceeded_and_nothing_is_cut_silently(engine: ContextEngine) -> None:
    ranked = {hit.path for hit in engine.search(TASK).files}
    for budget in range(50, 5001, 37):
        for in_play in ((), ("util/text.py",), ("shop/reports.py", "shop/cart.py")):
            pack = build_context_pack(engine, TASK, budget_tokens=budget, in_play=in_play)
            rendered = pack.render()
            assert estimate_tokens(rendered) <= budget, (budget, in_play)
            assert pack.tokens == estimate_tokens(rendered)
            assert pack.budget == budget
            # Every ranked file is shown (as code, outline or path) or named as left out.
            assert shown_paths(pack) | set(pack.left_out) == ranked | set(in_play)
            assert not shown_paths(pack) & set(pack.left_out)
            outlines = sum(item.kind == "outline" for item in pack.items)
            if pack.left_out or outlines:
                assert pack.note.startswith("Context")
            if pack.note.startswith("Context: "):
                if pack.left_out:
                    assert f"{len(pack.left_out)} file" in pack.note
                    assert all(hint in pack.note for hint in HINTS)
                if outlines:
                    assert f"{outlines} file" in pack.note
            assert rendered.endswith(pack.note)
            assert pack.stale_caught == 0


def test_large_budget_shows_the_best_definitions_with_true_line_numbers(
    engine: ContextEngine, repo: Path
) -> None:
    pack = build_context_pack(engine, TASK, budget_tokens=5000)
    assert pack.left_out == ()
    assert pack.note == f"Context: all {len(engine.search(TASK).files)} files shown."
    first = pack.items[0]
    assert (first.path, first.kind) == ("shop/cart.py", "code")
    assert first.reason.startswith("ranked 1 for the task; definitions")
    assert "Cart.total_price" in first.reason
    # The class and its two matching methods touch, so they are one merged range.
    assert (first.line, first.end_line) == (6, 22)
    assert_lines_match_disk(repo, first)
    assert first.tokens == estimate_tokens(first.render())
    rendered = pack.render()
    assert rendered.startswith(f"shop/cart.py:6-22 ({first.reason})\n 6| class Cart:\n")
    assert "\n18|     def total_price(self, catalog: Catalog) -> float:\n" in rendered
    for item in pack.items:
        if item.kind == "code":
            assert_lines_match_disk(repo, item)
    typescript = next(item for item in pack.items if item.path == "web/checkout.ts")
    assert typescript.kind == "code" and "cartTotal" in typescript.text


def test_small_budgets_degrade_to_members_then_outlines_then_left_out(
    engine: ContextEngine, repo: Path
) -> None:
    medium = build_context_pack(engine, TASK, budget_tokens=200)
    cart = [item for item in medium.items if item.path == "shop/cart.py"]
    # The class no longer fits whole: its matching methods are shown on their own.
    assert [(i.kind, i.reason.rpartition("; ")[2]) for i in cart] == [
        ("code", "definition Cart.add_item"),
        ("code", "definition Cart.total_price"),
    ]
    for item in cart:
        assert_lines_match_disk(repo, item)
    assert "matching definition" in medium.note

    small = build_context_pack(engine, TASK, budget_tokens=120)
    assert [(i.path, i.kind) for i in small.items] == [("shop/cart.py", "outline")]
    assert "18: def total_price(self, catalog: Catalog) -> float:" in small.items[0].text
    assert len(small.left_out) == 4
    assert small.note.startswith("Context: 1 file shown as outlines only; 4 files left out;")
    assert all(hint in small.note for hint in HINTS)
    assert "Left out: web/checkout.ts" in small.note

    tiny = build_context_pack(engine, TASK, budget_tokens=50)
    assert tiny.items == ()
    assert set(tiny.left_out) == {h.path for h in engine.search(TASK).files}
    assert f"Context: {len(tiny.left_out)} files left out" in tiny.note

    assert build_context_pack(engine, TASK, budget_tokens=4).render() == "Context cut."
    assert build_context_pack(engine, TASK, budget_tokens=0).render() == ""


def test_files_in_play_come_first(engine: ContextEngine, repo: Path) -> None:
    pack = build_context_pack(engine, TASK, budget_tokens=5000, in_play=["util/text.py"])
    first = pack.items[0]
    # In play but not matching the task: shown by its outline.
    assert (first.path, first.kind, first.reason) == (
        "util/text.py",
        "outline",
        "read or edited in this session",
    )
    assert first.text == "1: def slugify(title):"
    assert pack.items[1].path == "shop/cart.py"

    ranked_too = build_context_pack(
        engine, TASK, budget_tokens=5000, in_play=["tests/test_cart.py"]
    )
    first = ranked_too.items[0]
    assert (first.path, first.kind) == ("tests/test_cart.py", "code")
    assert first.reason == (
        "read or edited in this session; ranked 4 for the task; definition test_total_price"
    )
    assert_lines_match_disk(repo, first)

    small = build_context_pack(engine, TASK, budget_tokens=120, in_play=["util/text.py"])
    assert small.items[0].path == "util/text.py"


def test_a_file_changed_after_indexing_is_caught_and_its_new_text_shown(
    engine: ContextEngine, repo: Path
) -> None:
    cart = repo / "shop" / "cart.py"
    rewrite(cart, "# one\n# two\n# three\n" + CART)
    pack = build_context_pack(engine, TASK, budget_tokens=5000)
    assert pack.stale_caught == 1
    first = pack.items[0]
    assert first.path == "shop/cart.py"
    assert (first.line, first.end_line) == (9, 25)
    assert_lines_match_disk(repo, first)
    assert "\n21|     def total_price(" in pack.render()


def test_a_file_changed_while_being_read_is_caught(engine: ContextEngine, repo: Path) -> None:
    cart = repo / "shop" / "cart.py"
    reads: list[str] = []

    def racing_read(root: Path, path: str) -> Source | None:
        # The file changes between the engine serving it and the builder reading it.
        if path == "shop/cart.py" and path not in reads:
            rewrite(cart, CART.replace("class Cart:", "# moved\n\nclass Cart:"))
        reads.append(path)
        return read_source(root, path)

    pack = build_context_pack(engine, TASK, budget_tokens=5000, read=racing_read)
    assert pack.stale_caught == 1
    assert reads.count("shop/cart.py") == 1  # read once, even across the second search
    first = pack.items[0]
    assert (first.path, first.line, first.end_line) == ("shop/cart.py", 8, 24)
    assert_lines_match_disk(repo, first)


def test_a_deleted_file_is_skipped_and_noted(engine: ContextEngine, repo: Path) -> None:
    (repo / "util" / "text.py").unlink()
    pack = build_context_pack(engine, TASK, budget_tokens=5000, in_play=["util/text.py"])
    assert "util/text.py" not in shown_paths(pack) | set(pack.left_out)
    assert pack.vanished == ("util/text.py",)
    assert "1 file gone from disk, skipped: util/text.py" in pack.note
    assert all(hint in pack.note for hint in HINTS)

    def deleting_read(root: Path, path: str) -> Source | None:
        if path == "shop/catalog.py":
            (root / path).unlink()
        return read_source(root, path)

    raced = build_context_pack(engine, TASK, budget_tokens=5000, read=deleting_read)
    assert raced.vanished == ("shop/catalog.py",)
    assert "shop/catalog.py" not in shown_paths(raced) | set(raced.left_out)
    assert "skipped: shop/catalog.py" in raced.note
    assert raced.stale_caught == 0


def test_binary_and_undecodable_files_are_never_shown_as_code(
    engine: ContextEngine, repo: Path
) -> None:
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR cart total_price")
    (repo / "shop" / "legacy.py").write_bytes(b"def total_price():\n    return '\xe9t\xe9'\n")
    in_play = ["logo.png", "shop/legacy.py"]
    pack = build_context_pack(engine, TASK, budget_tokens=5000, in_play=in_play)
    first, second = pack.items[:2]
    assert [(i.path, i.kind, i.text) for i in (first, second)] == [
        ("logo.png", "path", ""),
        ("shop/legacy.py", "path", ""),
    ]
    assert first.reason == "read or edited in this session; not text"
    assert pack.render().startswith("logo.png (read or edited in this session; not text)\n\n")
    assert all(item.kind != "code" for item in pack.items if item.path in in_play)
    # Files the index had not seen yet are indexed, not counted as stale.
    assert pack.stale_caught == 0


def test_an_empty_repository_gives_an_empty_pack_with_a_note(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "empty", {})
    engine = ContextEngine.open(root, tmp_path / "cache")
    engine.refresh()
    pack = build_context_pack(engine, TASK, budget_tokens=500)
    engine.close()
    assert (pack.items, pack.left_out, pack.vanished) == ((), (), ())
    assert pack.note == "No file matched the task; try search_code(query) or read_file(path)."
    assert pack.render() == pack.note
    assert pack.tokens == estimate_tokens(pack.note)


def test_render_format() -> None:
    def item(kind: Kind, line: int, end: int, text: str, reason: str, path: str) -> PackItem:
        return PackItem(
            path=path,
            content_hash="h",
            kind=kind,
            line=line,
            end_line=end,
            text=text,
            tokens=0,
            reason=reason,
        )

    pack = ContextPack(
        items=(
            item("code", 9, 11, "def f():\n    return 1\n", "ranked 1 for the task", "a.py"),
            item("outline", 0, 0, "1: class B:\n  2: def g(self):", "ranked 2", "b.py"),
            item("path", 0, 0, "", "ranked 3; not text", "c.bin"),
        ),
        tokens=0,
        budget=100,
        left_out=(),
        note="Context: all 3 files shown.",
    )
    assert pack.render() == (
        "a.py:9-11 (ranked 1 for the task)\n"
        " 9| def f():\n"
        "10|     return 1\n"
        "11| \n"
        "\n"
        "b.py (outline; ranked 2)\n"
        "1: class B:\n"
        "  2: def g(self):\n"
        "\n"
        "c.bin (ranked 3; not text)\n"
        "\n"
        "Context: all 3 files shown."
    )
    assert ContextPack(items=(), tokens=0, budget=1, left_out=(), note="").render() == ""
