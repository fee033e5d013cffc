"""Accessibility of the panel's main views, checked in a real Chromium with axe-core (bundled in
tests/web/vendor): no serious or critical violation of WCAG 2 A and AA on any of them, on a
desktop screen and a phone's."""

from __future__ import annotations

from typing import Any

import pytest
from panel_kit import DESKTOP, PHONE, Console, axe_violations, new_page, sign_in
from playwright.sync_api import expect
from server_kit import BASH_THEN_DONE, Server, wait_for


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_main_views_have_no_serious_accessibility_violations(
    server: Server, browser: Any, viewport: dict[str, int]
) -> None:
    token = server.token(f"a11y-{viewport['width']}")
    client = server.client(token)
    repo = server.repo(f"a11y-{viewport['width']}")
    body = {"task": "make a file", "source": {"path": str(repo)}}
    body["model"] = server.script(BASH_THEN_DONE, f"a11y-{viewport['width']}.json")
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")

    console = Console()
    page = new_page(browser, console, viewport)
    page.goto(server.url + "/")
    expect(page.get_by_label("API token")).to_be_visible()
    found = {"sign-in": axe_violations(page)}
    sign_in(page, server.url, token)
    found["sessions list"] = axe_violations(page)
    page.goto(f"{server.url}/#/sessions/{sid}")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    found["approval"] = axe_violations(page)
    page.get_by_role("button", name="Allow once").click()
    wait_for(client, sid, lambda v: v["waiting_on"] == "review")
    expect(page.get_by_role("button", name="Apply")).to_be_visible()
    found["review"] = axe_violations(page)
    assert {view: v for view, v in found.items() if v} == {}
    # The check can fail: an image with no text alternative is a critical violation.
    page.evaluate("document.body.append(Object.assign(document.createElement('img'), {src: '/x'}))")
    assert any(v.startswith("image-alt") for v in axe_violations(page))
