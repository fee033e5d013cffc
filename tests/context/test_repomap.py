"""The repository map: outlines best first, cut to a token budget, always saying what is missing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kestrel.context.budget import estimate_tokens, max_chars
from kestrel.context.model import FileSymbols, Symbol, SymbolKind
from kestrel.context.repomap import render_repo_map


def sym(qualname: str, kind: SymbolKind, line: int, signature: str) -> Symbol:
    name = qualname.rpartition(".")[2]
    return Symbol(
        name=name, qualname=qualname, kind=kind, line=line, end_line=line, signature=signature
    )


SHAPES = FileSymbols(
    language="python",
    definitions=(
        sym("Shape", "class", 3, "class Shape(Protocol):"),
        sym("Shape.area", "method", 5, "def area(self) -> float:"),
        sym("Shape.Meta", "class", 8, "class Meta:"),
        sym("Shape.Meta.deep", "method", 9, "def deep(self):"),
        sym("make", "function", 12, "def make(\n    kind: str,\n    size: int,\n) -> Shape:"),
        sym("make.helper", "function", 14, "def helper():"),
    ),
)


def many(count: int) -> tuple[list[tuple[str, float]], dict[str, FileSymbols]]:
    ranked = [(f"pkg/mod{i:04d}.py", 1.0 / (i + 1)) for i in range(count)]
    symbols = {
        path: FileSymbols(
            language="python",
            definitions=(
                sym(f"Thing{i}", "class", 1, f"class Thing{i}:"),
                sym(f"Thing{i}.run", "method", 2, "def run(self) -> None:"),
            ),
        )
        for i, (path, _) in enumerate(ranked)
    }
    return ranked, symbols


def test_outline_lists_top_level_and_members_indented() -> None:
    result = render_repo_map([("shapes.py", 1.0)], {"shapes.py": SHAPES}, 1000)
    assert result.text.splitlines() == [
        "shapes.py",
        "  3: class Shape(Protocol):",
        "    5: def area(self) -> float:",
        "    8: class Meta:",
        "  12: def make( kind: str, size: int, ) -> Shape:",
        "... all 1 file shown",
    ]
    assert result.files_shown == ("shapes.py",)
    assert result.files_left_out == 0
    assert result.tokens == estimate_tokens(result.text)


def test_files_appear_best_first_and_the_rest_are_counted() -> None:
    ranked, symbols = many(50)
    result = render_repo_map(ranked, symbols, 120)
    shown = len(result.files_shown)
    assert 0 < shown < 50
    assert result.files_shown == tuple(path for path, _ in ranked[:shown])
    assert result.files_left_out == 50 - shown
    assert result.text.splitlines()[-1] == (
        f"... {50 - shown} more files not shown; "
        "use repo_map with a larger budget, outline(path) or search_code(query)"
    )
    assert result.tokens <= 120


def test_left_out_count_uses_thousands_separators() -> None:
    ranked, symbols = many(1300)
    result = render_repo_map(ranked, symbols, 100)
    assert result.text.splitlines()[-1].startswith(f"... {result.files_left_out:,} more files")
    assert result.files_left_out > 1000


def test_a_file_too_big_for_its_full_outline_is_shown_shorter() -> None:
    members = tuple(sym(f"Big.m{i}", "method", i + 2, f"def m{i}(self): ...") for i in range(200))
    big = FileSymbols(
        language="python",
        definitions=(sym("Big", "class", 1, "class Big:"), *members),
    )
    result = render_repo_map([("big.py", 1.0)], {"big.py": big}, 40)
    assert result.text.splitlines() == ["big.py", "  1: class Big:", "... all 1 file shown"]
    helpers = tuple(sym(f"_h{i}", "function", 300 + i, f"def _h{i}(): ...") for i in range(50))
    mixed = FileSymbols(language="python", definitions=(*big.definitions, *helpers))
    result = render_repo_map([("big.py", 1.0)], {"big.py": mixed}, 40)
    assert result.text.splitlines() == ["big.py", "  1: class Big:", "... all 1 file shown"]
    result = render_repo_map([("big.py", 1.0)], {"big.py": big}, 3)
    assert result.text == "big.py"  # the path fits; the closing line does not
    assert result.files_shown == ("big.py",)


def test_stops_at_the_first_file_that_does_not_fit() -> None:
    long_path = "a/" * 80 + "huge.py"
    ranked = [("first.py", 3.0), (long_path, 2.0), ("small.py", 1.0)]
    result = render_repo_map(ranked, {}, 40)
    assert result.files_shown == ("first.py",)
    assert result.files_left_out == 2


def test_one_file_left_out_is_singular() -> None:
    result = render_repo_map([("a.py", 2.0), ("b/" * 60 + "b.py", 1.0)], {}, 30)
    assert result.text.splitlines() == [
        "a.py",
        "... 1 more file not shown; "
        "use repo_map with a larger budget, outline(path) or search_code(query)",
    ]


def test_budget_too_small_for_any_file_still_reports_what_is_missing() -> None:
    ranked, symbols = many(5)
    result = render_repo_map(ranked, symbols, 3)  # ten characters: no path fits
    assert result.files_shown == ()
    assert result.files_left_out == 5
    assert result.text == "... 5 more"
    assert render_repo_map(ranked, symbols, 0).text == ""
    assert render_repo_map(ranked, symbols, 0).files_left_out == 5


def test_empty_input_is_an_empty_map() -> None:
    result = render_repo_map([], {}, 1000)
    assert (result.text, result.files_shown, result.files_left_out, result.tokens) == ("", (), 0, 0)


def test_duplicates_and_files_without_symbols() -> None:
    result = render_repo_map([("a.py", 2.0), ("b.md", 1.0), ("a.py", 0.5)], {}, 1000)
    assert result.text == "a.py\nb.md\n... all 2 files shown"
    assert result.files_shown == ("a.py", "b.md")


def test_long_signatures_are_cut() -> None:
    long = FileSymbols(
        language="python",
        definitions=(
            sym("f", "function", 1, "def f(" + ", ".join(f"a{i}" for i in range(99)) + ")"),
        ),
    )
    line = render_repo_map([("f.py", 1.0)], {"f.py": long}, 1000).text.splitlines()[1]
    assert line.endswith("...")
    assert len(line) < 200


@given(
    budget=st.integers(min_value=-5, max_value=600), count=st.integers(min_value=0, max_value=60)
)
def test_the_budget_is_never_exceeded(budget: int, count: int) -> None:
    ranked, symbols = many(count)
    symbols["pkg/mod0000.py"] = SHAPES
    result = render_repo_map(ranked, symbols, budget)
    assert result.tokens == estimate_tokens(result.text) <= max(budget, 0)
    assert len(result.files_shown) + result.files_left_out == count
    if result.files_left_out and result.text:
        assert "more" in result.text.splitlines()[-1]


def test_token_estimate() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("x") == 1
    assert estimate_tokens("x" * 36) == 10
    assert estimate_tokens("x" * 37) == 11


@given(tokens=st.integers(min_value=-3, max_value=100_000))
def test_max_chars_is_the_exact_inverse(tokens: int) -> None:
    chars = max_chars(tokens)
    assert estimate_tokens("x" * chars) <= max(tokens, 0)
    assert estimate_tokens("x" * (chars + 1)) > max(tokens, 0)
