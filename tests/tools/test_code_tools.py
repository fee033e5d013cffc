"""The code tools over a real git repository (Python and JavaScript) and a real context engine."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

import kestrel.context.engine as engine_module
import kestrel.context.indexing as indexing_module
from kestrel.context.engine import ContextEngine
from kestrel.context.inventory import Entry
from kestrel.protocol.messages import ToolCall
from kestrel.sandbox.local import LocalExecutor
from kestrel.tools import PlannedWrite, ToolContext, ToolOutcome, ToolRegistry, default_tools
from kestrel.tools.code import CodeIndex
from kestrel.tools.registry import code_tools

pytestmark = pytest.mark.system

CART = '''\
from shop.pricing import apply_discount


class Cart:
    """A shopping cart."""

    def __init__(self) -> None:
        self.items: list[tuple[str, float]] = []

    def add(self, name: str, price: float) -> None:
        self.items.append((name, price))

    def total(self, code: str | None = None) -> float:
        subtotal = sum(price for _, price in self.items)
        return apply_discount(subtotal, code)
'''
PRICING = '''\
DISCOUNTS = {"SAVE10": 0.10}


def apply_discount(amount: float, code: str | None) -> float:
    """Take the discount a code gives off the amount."""
    rate = DISCOUNTS.get(code or "", 0.0)
    return round(amount * (1 - rate), 2)


def apply_discounts(amounts: list[float], code: str | None) -> list[float]:
    return [apply_discount(a, code) for a in amounts]
'''
REPORT = """\
from shop.cart import Cart


def summary(cart: Cart) -> str:
    return f"{len(cart.items)} items, {cart.total():.2f} in all"
"""
CHECKOUT = """\
import { formatPrice } from "./format.js";

export function checkoutTotal(cart) {
  return formatPrice(cart.total());
}
"""
FORMAT = """\
export function formatPrice(amount) {
  return `$${amount.toFixed(2)}`;
}
"""
TEST_CART = """\
from shop.cart import Cart
from shop.pricing import apply_discount


def test_discount():
    assert apply_discount(10.0, "SAVE10") == 9.0
    cart = Cart()
    cart.add("tea", 10.0)
    assert cart.total("SAVE10") == 9.0
"""
FILES = {
    ".gitignore": "build/\n",
    "README.md": "# Shop\n\nPrices go through apply_discount before checkout.\n",
    "src/shop/__init__.py": "",
    "src/shop/cart.py": CART,
    "src/shop/pricing.py": PRICING,
    "src/shop/report.py": REPORT,
    "web/checkout.js": CHECKOUT,
    "web/format.js": FORMAT,
    "tests/test_cart.py": TEST_CART,
    "build/generated.py": "def apply_discount():\n    pass\n",
}


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Repo:
    """A git repository, the code tools over it, and one session's context."""

    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        self.artifacts = tmp / "artifacts"
        self.cache = tmp / "cache"
        self.clock = FakeClock()
        self.opened: list[Path] = []
        self.index = CodeIndex(self._open, clock=self.clock)
        self.registry = ToolRegistry([*default_tools(), *code_tools(self.index)])
        self.read_hashes: dict[str, str] = {}
        self.max_output_chars = 30_000

    def _open(self, root: Path) -> ContextEngine:
        self.opened.append(root)
        return ContextEngine.open(root, cache_dir=self.cache)

    def write(self, relative: str, content: str) -> None:
        """Put a file in the repository, outside any tool."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)

    def context(self) -> ToolContext:
        """The context of every call: one session, so `read_hashes` is shared."""
        return ToolContext(
            root=self.root,
            executor=LocalExecutor(),
            artifacts_dir=self.artifacts,
            on_output=_ignore_output,
            before_write=_allow_write,
            max_output_chars=self.max_output_chars,
            read_hashes=self.read_hashes,
        )

    async def call(self, name: str, /, **arguments: object) -> ToolOutcome:
        """Call a tool as the loop does: through the registry, with JSON arguments."""
        call = ToolCall(id="call-1", name=name, arguments=json.dumps(arguments))
        return await self.registry.dispatch(call, self.context())

    async def ok(self, name: str, /, **arguments: object) -> str:
        """Call a tool that must succeed; what the model sees."""
        outcome = await self.call(name, **arguments)
        assert not outcome.is_error, outcome.content
        assert str(self.root) not in outcome.content
        return outcome.content

    async def fails(self, name: str, /, **arguments: object) -> str:
        """Call a tool that must fail; the error the model sees."""
        outcome = await self.call(name, **arguments)
        assert outcome.is_error, outcome.content
        return outcome.content


def _ignore_output(stream: Literal["stdout", "stderr"], text: str) -> None:
    pass


async def _allow_write(plan: PlannedWrite) -> None:
    pass


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[Repo]:
    """The shop repository, committed, with the code tools ready and nothing indexed yet."""
    root = tmp_path / "shop"
    root.mkdir()
    made = Repo(root, tmp_path)
    for relative, content in FILES.items():
        made.write(relative, content)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "shop")
    yield made
    made.index.close()


async def test_search_code_ranks_files_with_their_definitions(repo: Repo) -> None:
    content = await repo.ok("search_code", query="apply a discount code to the amount", k=3)
    lines = content.splitlines()
    assert lines[0] == "3 files for 'apply a discount code to the amount', best first:"
    assert lines[1].startswith("1. src/shop/pricing.py  (score ")
    assert (
        "     src/shop/pricing.py:4 apply_discount — "
        "def apply_discount(amount: float, code: str | None) -> float:"
    ) in lines
    top = lines.index("Top definitions:")
    assert lines[top + 1].startswith("  src/shop/pricing.py:4 apply_discount (function) — def ")


async def test_search_code_says_when_nothing_matches(repo: Repo) -> None:
    content = await repo.ok("search_code", query="zeppelin")
    assert content.startswith("No indexed file matches 'zeppelin'.")


async def test_find_symbol_gives_path_lines_kind_and_signature(repo: Repo) -> None:
    content = await repo.ok("find_symbol", name="total")
    assert content == (
        "1 definition of 'total':\n"
        "src/shop/cart.py:13-15  method  Cart.total — "
        "def total(self, code: str | None = None) -> float:"
    )


@pytest.mark.parametrize("name", ["Cart.total", "shop.cart.Cart.total", "cart.Cart.total"])
async def test_find_symbol_takes_dotted_names(repo: Repo, name: str) -> None:
    content = await repo.ok("find_symbol", name=name)
    assert content.splitlines()[1].startswith("src/shop/cart.py:13-15  method  Cart.total")


async def test_find_symbol_finds_javascript_and_skips_ignored_files(repo: Repo) -> None:
    content = await repo.ok("find_symbol", name="formatPrice")
    assert "web/format.js:1-3  function  formatPrice" in content
    only = await repo.ok("find_symbol", name="apply_discount")
    assert only.startswith("1 definition of 'apply_discount':\nsrc/shop/pricing.py:4-7")
    assert "build/" not in only


async def test_find_symbol_says_clearly_when_there_is_none(repo: Repo) -> None:
    content = await repo.ok("find_symbol", name="discount")
    assert content.startswith("No definition named 'discount' in the ")
    assert "Similar names: DISCOUNTS, test_discount, apply_discount, apply_discounts." in content
    wrong_class = await repo.ok("find_symbol", name="Basket.total")
    assert wrong_class.startswith("No definition named 'Basket.total'")


async def test_find_references_groups_whole_word_matches_by_file(repo: Repo) -> None:
    content = await repo.ok("find_references", name="apply_discount")
    assert content == (
        "7 references to 'apply_discount' in 4 files (whole-word matches):\n"
        "\n"
        "README.md\n"
        "     3: Prices go through apply_discount before checkout.\n"
        "\n"
        "src/shop/cart.py\n"
        "     1: from shop.pricing import apply_discount\n"
        "    15: return apply_discount(subtotal, code)\n"
        "\n"
        "src/shop/pricing.py\n"
        "     4: def apply_discount(amount: float, code: str | None) -> float:  [definition]\n"
        "    11: return [apply_discount(a, code) for a in amounts]\n"
        "\n"
        "tests/test_cart.py\n"
        "     2: from shop.pricing import apply_discount\n"
        '     6: assert apply_discount(10.0, "SAVE10") == 9.0'
    )


async def test_find_references_caps_the_matches_and_counts_the_rest(repo: Repo) -> None:
    repo.write("src/shop/many.py", "from shop.cart import Cart\n" + "Cart()\n" * 250)
    content = await repo.ok("find_references", name="Cart")
    assert content.startswith("256 references to 'Cart' in 4 files (whole-word matches):")
    assert content.endswith(
        "[showing the first 200 of 256 references (in 2 of 4 files); 56 more not shown: "
        "use grep with a path or glob to see the rest]"
    )


async def test_find_references_says_when_there_are_none(repo: Repo) -> None:
    content = await repo.ok("find_references", name="Cart.total")
    assert content == (
        "No references to 'Cart.total' in the indexed files. Names are matched as written; "
        "try the short name 'total'."
    )


async def test_outline_lists_a_files_definitions_nested(repo: Repo) -> None:
    content = await repo.ok("outline", path="src/shop/cart.py")
    assert content == (
        "src/shop/cart.py (python, 4 definitions; LINE: signature, nested definitions "
        "indented):\n"
        "4: class Cart:\n"
        "  7: def __init__(self) -> None:\n"
        "  10: def add(self, name: str, price: float) -> None:\n"
        "  13: def total(self, code: str | None = None) -> float:"
    )
    js = await repo.ok("outline", path=str(repo.root / "web/format.js"))
    assert js.splitlines()[1] == "1: function formatPrice(amount)"


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("src/shop/basket.py", "src/shop/basket.py does not exist"),
        ("../outside.py", "../outside.py is outside the workspace"),
        ("README.md", "README.md is not in a language outline knows (c, cpp, go, java, "),
        ("src/shop", "src/shop is a directory"),
    ],
)
async def test_outline_refuses_what_it_cannot_outline(repo: Repo, path: str, error: str) -> None:
    content = await repo.fails("outline", path=path)
    assert content.startswith(error)


async def test_repo_map_ranks_source_files_within_the_budget(repo: Repo) -> None:
    content = await repo.ok("repo_map")
    lines = content.splitlines()
    assert lines[0].startswith("Repository map: 7 of 7 files, most connected first (~")
    assert "src/shop/pricing.py" in lines
    assert "  4: def apply_discount(amount: float, code: str | None) -> float:" in lines
    assert lines[-1] == "... all 7 files shown"
    assert "README.md" not in lines


async def test_repo_map_is_weighted_toward_the_files_the_session_read(repo: Repo) -> None:
    await repo.ok("read_file", path="web/checkout.js")
    content = await repo.ok("repo_map", budget=100)
    lines = content.splitlines()
    assert ", weighted toward 1 file you have read or edited (~" in lines[0]
    assert lines[1:3] == ["web/checkout.js", "  3: function checkoutTotal(cart)"]
    assert lines[3] == "web/format.js"


async def test_a_file_the_session_edits_is_seen_at_once(repo: Repo) -> None:
    assert "No definition" in await repo.ok("find_symbol", name="apply_coupon")
    await repo.ok("read_file", path="src/shop/pricing.py")
    new = "\n\ndef apply_coupon(amount: float) -> float:\n    return amount - 1\n"
    await repo.ok("write_file", path="src/shop/pricing.py", content=PRICING + new)
    content = await repo.ok("find_symbol", name="apply_coupon")
    assert content.splitlines()[1].startswith("src/shop/pricing.py:14-15  function")


async def test_other_changes_are_seen_once_two_seconds_have_passed(repo: Repo) -> None:
    await repo.ok("find_symbol", name="total")
    repo.write("src/shop/tax.py", "def add_tax(amount: float) -> float:\n    return amount\n")
    repo.clock.now += 1.5
    assert "No definition" in await repo.ok("find_symbol", name="add_tax")
    repo.clock.now += 1.0
    content = await repo.ok("find_symbol", name="add_tax")
    assert content.splitlines()[1].startswith("src/shop/tax.py:1-2  function  add_tax")


async def test_the_tools_share_one_engine_opened_on_first_use(repo: Repo) -> None:
    assert repo.opened == []
    await asyncio.gather(
        repo.ok("search_code", query="cart total"),
        repo.ok("find_symbol", name="Cart"),
        repo.ok("find_references", name="Cart"),
        repo.ok("repo_map"),
    )
    assert repo.opened == [repo.root.resolve()]


async def test_long_output_is_cut_with_a_note(repo: Repo) -> None:
    repo.max_output_chars = 300
    repo.write("src/shop/many.py", "from shop.cart import Cart\n" + "Cart()\n" * 50)
    outcome = await repo.call("find_references", name="Cart")
    assert outcome.truncated and not outcome.is_error
    assert len(outcome.content) <= 300
    assert outcome.content.splitlines()[-1].startswith("[output cut: ")
    assert outcome.content.endswith(
        "more characters not shown; use grep with a path or glob to narrow it]"
    )


def test_the_code_tools_are_opt_in_and_read_only(tmp_path: Path) -> None:
    index = CodeIndex(lambda root: ContextEngine.open(root, cache_dir=tmp_path))
    tools = code_tools(index)
    names = [tool.name for tool in tools]
    assert names == ["search_code", "find_symbol", "find_references", "outline", "repo_map"]
    assert not set(names) & {tool.name for tool in default_tools()}
    registry = ToolRegistry([*default_tools(), *tools])
    assert all(registry.kind(name) == "read" for name in names)
    assert all(spec.description for spec in registry.specs())
    index.close()
    index.close()  # twice is harmless


async def test_search_code_answers_during_a_big_read_and_says_what_it_left_out(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Any read counts as big here, and it never ends until the test lets it.
    monkeypatch.setattr(engine_module, "BACKGROUND_MIN_FILES", 1)
    opened = threading.Event()
    real = indexing_module.read_files

    def held(
        root: Path,
        todo: Sequence[Entry],
        workers: int,
        stop: object = None,
        give_way: object = None,
    ) -> Any:
        assert opened.wait(30)
        yield from real(root, todo, 0)

    monkeypatch.setattr(indexing_module, "read_files", held)
    content = await repo.ok("search_code", query="apply a discount code")
    assert content.startswith("No indexed file matches 'apply a discount code'.")
    unread = re.search(r"The index is still being built: (\d+) files not read yet", content)
    assert unread is not None and int(unread[1]) == len(FILES) - 1  # build/ is ignored
    assert "grep reads every file" in content
    opened.set()
    for _ in range(100):  # the read ends soon; no call waits for it
        await asyncio.sleep(0.1)
        content = await repo.ok("search_code", query="apply a discount code", k=3)
        if "still being built" not in content:
            break
    assert content.startswith("3 files for 'apply a discount code', best first:")
    assert "still being built" not in content
