"""What the panel's browser tests share: the browser, screenshots, axe, the console, signing in.

Debian's Chromium (`/usr/bin/chromium`, or `$KESTREL_CHROMIUM`) is driven through Playwright's
package; no browser is ever downloaded. Without either the tests skip, except in CI (`CI=true`),
where they must run. Screenshots go to `$KESTREL_TEST_ARTIFACTS` when it is set, else to the
test's `tmp_path`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

CHROMIUM = os.environ.get("KESTREL_CHROMIUM", "/usr/bin/chromium")
PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 900}
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
AXE_RULES = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}
NOT_AN_ADMIN = "status of 403 (Forbidden) at /v1/tenant"
"""What the browser logs when a member opens the Administration view's address: the refusal the
view then shows."""


@contextlib.contextmanager
def launch_or_skip() -> Iterator[Any]:
    """Headless Chromium through Playwright, or a skip saying what is missing."""
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if not Path(CHROMIUM).is_file():
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if missing:
        reason = "the panel's browser tests need " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; CI must run them")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def shots_folder(tmp_path: Path) -> Path:
    """Where screenshots go: `$KESTREL_TEST_ARTIFACTS/web`, else the test's own folder."""
    given = os.environ.get("KESTREL_TEST_ARTIFACTS")
    folder = Path(given) / "web" if given else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def axe_violations(page: Any) -> list[str]:
    """Serious and critical violations of WCAG 2 A and AA on the page as it is, one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(
            AXE.read_text(encoding="utf-8")
        )  # Evaluated, not a script tag: the CSP holds.
    found = page.evaluate("(rules) => axe.run(document, rules)", AXE_RULES)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@dataclass
class Console:
    """Every console error and uncaught exception of the pages of a browser context."""

    errors: list[str] = field(default_factory=list)

    def watch(self, context: Any) -> Any:
        """Listen on `context`'s pages; returns the context."""
        context.on("console", self._console)
        context.on("weberror", lambda e: self.errors.append(f"uncaught: {e.error}"))
        return context

    def _console(self, message: Any) -> None:
        """Keep an error, with the path of the request when it is a refused one."""
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        failed = message.text.startswith("Failed to load resource") and url
        self.errors.append(f"{message.text} at {urlsplit(url).path}" if failed else message.text)

    def unexpected(self, *expected: str) -> list[str]:
        """The errors that mention none of `expected` (a refusal the test provoked, say)."""
        return [e for e in self.errors if not any(x in e for x in expected)]


def new_page(browser: Any, console: Console, viewport: dict[str, int] = DESKTOP) -> Any:
    """A page in a fresh context (its own sessionStorage), watched by `console`."""
    context = console.watch(browser.new_context(viewport=viewport, accept_downloads=True))
    return context.new_page()


def sign_in(page: Any, url: str, token: str) -> None:
    """Open the panel and sign in with `token`; returns once the sessions list shows."""
    from playwright.sync_api import expect

    page.goto(url + "/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
