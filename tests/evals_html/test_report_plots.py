"""The report's plots: how values fall into bins, and what each SVG says about them."""

from __future__ import annotations

import re

from kestrel.evals.html_plots import Bin, bins, histogram, share_bar


def test_whole_number_bins_are_one_wide_while_they_fit() -> None:
    assert bins([3, 5, 5, 7], integer=True) == [
        Bin(3, 4, 1),
        Bin(4, 5, 0),
        Bin(5, 6, 2),
        Bin(6, 7, 0),
        Bin(7, 8, 1),
    ]


def test_whole_number_bins_widen_to_stay_few() -> None:
    groups = bins(list(range(1, 31)), integer=True)
    assert [(b.lo, b.hi) for b in groups][:2] == [(1, 4), (4, 7)]
    assert len(groups) == 10 and sum(b.count for b in groups) == 30


def test_real_valued_bins_cover_the_range_and_keep_the_maximum() -> None:
    groups = bins([0.0, 0.1, 0.2, 0.4])
    assert len(groups) == 3  # Sturges: ceil(log2 4) + 1
    assert groups[0].lo == 0.0 and abs(groups[-1].hi - 0.4) < 1e-12
    assert [b.count for b in groups] == [2, 1, 1]


def test_equal_values_and_no_values() -> None:
    assert bins([0.25, 0.25]) == [Bin(0.25, 0.25, 2)]
    assert bins([]) == []


def test_histogram_draws_a_bar_per_bin_with_its_count() -> None:
    svg = histogram([1, 2, 2, 9], kind="turns", caption="Turns", fmt=str, integer=True)
    counts = re.findall(r'<rect[^>]*class="bar"[^>]*data-count="(\d+)"', svg)
    assert counts == ["1", "2", "0", "0", "0", "0", "0", "0", "1"]
    assert "<title>2 tasks: 2</title>" in svg and "<title>1 tasks: 9</title>" in svg
    assert 'data-plot="turns"' in svg and 'role="img"' in svg


def test_empty_histogram_says_so() -> None:
    svg = histogram([], kind="cost", caption="Cost", fmt=str)
    assert "no data" in svg and "<rect" not in svg


def test_share_bar_splits_by_status() -> None:
    svg = share_bar(
        [("resolved", 3, "#0a0"), ("unresolved", 1, "#a00"), ("error", 0, "#999")],
        kind="resolved",
        caption="Resolved rate",
    )
    widths = re.findall(r'<rect[^>]*width="([\d.]+)"[^>]*class="bar"', svg)
    assert [float(w) for w in widths] == [270.0, 90.0]
    assert "resolved: 3 (75%)" in svg and "error: 0 (0%)" in svg
