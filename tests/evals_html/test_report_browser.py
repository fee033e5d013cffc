"""The evaluation report in a real headless Chromium: plots drawn, table filled, links work.

Uses Debian's Chromium (`/usr/bin/chromium`) through Playwright; the browser is never downloaded.
Without Chromium the test skips, except in CI (`CI=true`), where it must run. Screenshots are
saved under pytest's `tmp_path` and copied to `$KESTREL_TEST_ARTIFACTS` (default: `test-artifacts/`
at the repository root) so a CI job can keep them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from report_kit import HOSTILE, ScriptedSession, make_run

from kestrel.evals.html import write_run_report

CHROMIUM = os.environ.get("KESTREL_CHROMIUM", "/usr/bin/chromium")


def _browser_or_skip() -> None:
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if not Path(CHROMIUM).is_file():
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if not missing:
        return
    reason = "the browser test needs " + " and ".join(missing)
    if os.environ.get("CI") == "true":
        pytest.fail(reason + "; CI must run it")
    pytest.skip(reason)


def _keep(shot: Path) -> Path:
    root = Path(__file__).resolve().parents[2]
    folder = Path(os.environ.get("KESTREL_TEST_ARTIFACTS", root / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(shot, folder / shot.name))


def test_report_opens_in_chromium_with_plots_and_table(
    session: ScriptedSession, tmp_path: Path
) -> None:
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    report = write_run_report(make_run(tmp_path, session))
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(report.as_uri())

            for kind in ("resolved", "cost", "turns"):
                plot = page.locator(f'svg[data-plot="{kind}"]')
                assert plot.is_visible()
                box = plot.bounding_box()
                assert box is not None and box["width"] > 200 and box["height"] > 100
            bars = page.locator('svg[data-plot="resolved"] rect.bar')
            assert bars.count() == 4  # resolved, unresolved, budget exhausted, error
            assert page.locator('svg[data-plot="turns"] rect.bar').count() >= 3
            rows = page.locator("table.tasks tbody tr")
            assert rows.count() == 4
            assert rows.nth(0).locator("td").nth(0).inner_text() == "calc__calc-1"
            assert "budget exhausted" in rows.nth(3).inner_text()
            assert "error" in rows.nth(2).inner_text()
            shot = tmp_path / "eval-report.png"
            page.screenshot(path=str(shot), full_page=True)

            page.click("text=calc__calc-1")
            page.wait_for_load_state()
            assert page.url.endswith("/trajectories/calc__calc-1.html")
            timeline = page.locator(".timeline")
            assert "Fixed: add now adds." in timeline.inner_text()
            assert HOSTILE in timeline.inner_text()  # The log's markup shows as text.
            page.screenshot(path=str(tmp_path / "eval-trajectory.png"), full_page=True)
        finally:
            browser.close()

    assert dialogs == []  # No script from the log ran.
    assert all(url.startswith("file://") for url in requests), requests
    assert shot.stat().st_size > 10_000
    kept = _keep(shot)
    _keep(tmp_path / "eval-trajectory.png")
    assert kept.is_file()
